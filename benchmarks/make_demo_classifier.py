"""The shipped classifier `vimpac/weights/classifier/`: the shipped demo model (`vimpac/weights/demo/`) fine-tuned to
name the camera motion of a clip, on pans and zooms over still photographs. A classifier to try on one's own video
with `vimpac-predict VIDEO`; it knows camera motion over a still scene and nothing else.

    .venv/bin/python benchmarks/make_demo_classifier.py --out runs/classifier [--per-class 24] [--steps 300]

The videos: for each of the photographs the demo model and its tokenizer trained on (`make_demo_data.py`), and each
class of `CLASSES`, `--per-class` clips of 6 frames at 2 FPS, 128 px, each from its own random zoom (1.3-2.2) and
position: a pan slides the window across 90% of the room the zoom leaves, a zoom scales it by 1.6, "still" holds it.
The test videos: the same on the two photographs both held out (Grace Hopper, cheetah2), 8 per class. Tokenized with
the default tokenizer at 2 FPS (centre view: no flip, which would swap left and right), then
`vimpac-finetune --init vimpac/weights/demo --clip-len 5` with the test store, then `vimpac-evaluate` on it. Writes the
run, `eval.json` and, with `--install`, the model, `classes.json` and a card into `vimpac/weights/classifier/`."""

import argparse, json, shutil, subprocess, sys
from pathlib import Path
import numpy as np
import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).parent))
from make_demo_data import HELDOUT_IMAGES, package_images  # noqa: E402
from vimpac.synthetic import pan_zoom, write_video  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CLASSES = ("still", "pan left", "pan right", "pan up", "pan down", "zoom in", "zoom out")
FRAMES, FPS, SIZE = 6, 2.0, 128


def camera(cls: str, rng: np.random.Generator) -> tuple:
    "(start, end) of `pan_zoom` (centre x, centre y, zoom) for a clip of class `cls`."
    z = float(rng.uniform(1.3, 2.2))
    room = 0.5 * (1 - 1 / z)  # how far the centre can move with the window inside the image
    cx, cy = 0.5 + rng.uniform(-0.3, 0.3, 2) * room
    d = 0.9 * room
    moves = {
        "still": ((cx, cy, z), (cx, cy, z)),
        "pan left": ((0.5 + d, cy, z), (0.5 - d, cy, z)),  # the camera turns left: the scene slides right
        "pan right": ((0.5 - d, cy, z), (0.5 + d, cy, z)),
        "pan up": ((cx, 0.5 + d, z), (cx, 0.5 - d, z)),
        "pan down": ((cx, 0.5 - d, z), (cx, 0.5 + d, z)),
        "zoom in": ((cx, cy, z / 1.6 if z / 1.6 >= 1 else 1.0), (cx, cy, z)),
        "zoom out": ((cx, cy, z), (cx, cy, z / 1.6 if z / 1.6 >= 1 else 1.0)),
    }
    return moves[cls]


def write_split(out: Path, images: list, per_class: int, seed: int) -> dict:
    "Videos under `out/CLASS/`, `per_class` per class and photograph; returns {path: class index}."
    labels = {}
    for i, p in enumerate(images):
        img = np.asarray(plt.imread(p))[..., :3]
        img = img if img.dtype == np.uint8 else (np.clip(img, 0, 1) * 255).astype(np.uint8)
        for c, name in enumerate(CLASSES):
            rng = np.random.default_rng((seed, i, c))
            for j in range(per_class):
                start, end = camera(name, rng)
                path = out / name.replace(" ", "_") / f"{p.stem}_{j:02d}.mp4"
                labels[write_video(pan_zoom(img, FRAMES, SIZE, start, end), path, fps=FPS)] = c
    return labels


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-class", type=int, default=24, help="training clips per class and photograph")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--install", action="store_true", help="copy the model into vimpac/weights/classifier/")
    a = ap.parse_args(argv)
    from vimpac.store import build_store
    from vimpac.tokenizer import load_tokenizer

    out, tok = Path(a.out), load_tokenizer("default")
    train_imgs = [p for p in package_images() if p.name not in HELDOUT_IMAGES]
    test_imgs = [p for p in package_images() if p.name in HELDOUT_IMAGES]
    for split, imgs, n, seed in (("train", train_imgs, a.per_class, 0), ("test", test_imgs, 8, 1)):
        labels = write_split(out / "videos" / split, imgs, n, seed)
        build_store(
            list(labels),
            tok,
            out / split,
            fps=FPS,
            frame_size=SIZE,
            labels=labels,
            classes=list(CLASSES),
            root=out / "videos" / split,
            progress=False,
        )
    run = out / "run"
    cmd = [BIN / "vimpac-finetune", "--store", out / "train", "--test-store", out / "test", "--out", run]
    cmd += ["--init", ROOT / "vimpac/weights/demo", "--clip-len", 5, "--steps", a.steps, "--batch-size", 16]
    cmd += ["--lr", "5e-4", "--log-every", 50, "--device", "cpu"]
    subprocess.run([str(c) for c in cmd], check=True)
    ev = [BIN / "vimpac-evaluate", "--test", out / "test", "--checkpoint", run, "--views", "1x1", "--out", out / "eval"]
    subprocess.run([str(c) for c in ev], check=True)
    record = dict(
        classes=CLASSES,
        train_photographs=[p.name for p in train_imgs],
        test_photographs=[p.name for p in test_imgs],
        per_class=a.per_class,
        steps=a.steps,
    )
    (out / "classifier.json").write_text(json.dumps(record, indent=1))
    if a.install:
        install(run, out, record, json.loads((out / "eval" / "metrics.json").read_text()))


def install(run: Path, out: Path, record: dict, m: dict) -> None:
    "The model, its classes and settings (the store named by its place in the run) and a card, into the package."
    dest = ROOT / "vimpac" / "weights" / "classifier"
    dest.mkdir(parents=True, exist_ok=True)
    for f in ("model.safetensors", "config.json", "classes.json"):
        shutil.copy(run / f, dest / f)
    cfg = json.loads((run / "finetune_config.json").read_text())
    cfg["store"] = "runs/classifier/train: pans and zooms over 5 photographs"
    (dest / "finetune_config.json").write_text(json.dumps(cfg, indent=2))
    per = " | ".join(f"{c} {100 * v:.0f}%" for c, v in zip(CLASSES, m["per_class"]))
    rows = {
        "data": f"{cfg['videos']} clips of 6 frames at 2 FPS, 128 px: {record['per_class']} per class over each of the "
        f"5 photographs the demo model trained on ({', '.join(record['train_photographs'])}), each from its own "
        "random zoom and position (`benchmarks/make_demo_classifier.py`)",
        "held out": f"the same, 8 per class, over {' and '.join(record['test_photographs'])} (held out of the "
        f"tokenizer and the demo model too): {m['n']} clips",
        "training": f"`vimpac-finetune --init vimpac/weights/demo --clip-len 5 --steps {record['steps']} "
        "--batch-size 16 --lr 5e-4`, on a 2-core CPU",
        "tokens": "default tokenizer, 2 FPS, S = 128, centre view (no flip: a flip swaps left and right)",
    }
    good = [c for c, v in zip(CLASSES, m["per_class"]) if v >= 0.8]
    weak = [c for c, v in zip(CLASSES, m["per_class"]) if v < 0.5]
    knows = f"{', '.join(good) or 'no class'} reliably (80% or more of the held-out clips)"
    if weak:
        knows += (
            f"; not {', '.join(weak)} (under 50%: the confusion matrix in `eval/` of the run shows which for which)"
        )
    made = f"--out runs/classifier --per-class {record['per_class']} --steps {record['steps']} --install"
    card = "\n".join(
        [
            "# vimpac camera-motion classifier",
            "",
            f"The shipped demo model (`vimpac/weights/demo/`) fine-tuned to name the camera motion of a clip: "
            f"{', '.join(CLASSES)}. A classifier to try (`vimpac-predict VIDEO` uses it when no `--checkpoint` is "
            "given): it knows camera motion over a still scene and nothing else; on a video of moving things it "
            "still answers with a camera motion.",
            "",
            "| | |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in rows.items()),
            "",
            "## On the held-out clips (1 view per clip)",
            "",
            f"top-1 **{100 * m['top1']:.1f}%** against chance {100 / len(CLASSES):.1f}% (7 classes); per class: {per}.",
            "",
            f"What it knows: {knows}.",
            "",
            f"Made with `.venv/bin/python benchmarks/make_demo_classifier.py {made}`.",
            "",
        ]
    )
    (dest / "README.md").write_text(card)


if __name__ == "__main__":
    main()
