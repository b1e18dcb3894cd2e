"""The demo checkpoint's training videos: animated procedural scenes and pans / zooms over the photographs the
default tokenizer was trained on (never Grace Hopper nor cheetah2, held out of the tokenizer and of the demo model),
written as H.264 videos with `vimpac.synthetic.write_video`, for `vimpac-tokenize` and `nbs/runs/pretrain.ipynb`.

    .venv/bin/python benchmarks/make_demo_data.py --out runs/demo_data [--scenes 400] [--pans 40] [--seconds 6]

Writes OUT/scenes/scene_NNNN.mp4 and OUT/photos/NAME_NN.mp4 (128x128 at 8 FPS, `seconds` long each) and
OUT/videos.json (the list and what each kind holds). Seeds: scene k is `random_scene(default_rng(10_000 + k))` (the
tokenizer's training scenes use seeds 0-59 and its held-out ones 1_000_000+, the held-out test pattern of
`benchmarks/demo_checkpoint_eval.py` seed 7: all disjoint); pan j of a photograph draws its start and end from
`default_rng((20_000, i, j))`. The held-out videos of `benchmarks/demo_checkpoint_eval.py` are never written here."""

import argparse, importlib.util, json
from pathlib import Path
import numpy as np
import matplotlib.pyplot as plt
from vimpac.synthetic import random_scene, render, pan_zoom, write_video

HELDOUT_IMAGES = ("grace_hopper.jpg", "cheetah2.jpg")  # held out of the default tokenizer: kept out here too


def package_images() -> list[Path]:
    """The photographs (.jpg / .jpeg over 15 kB) in matplotlib's sample data and Gradio's media assets, as
    `nbs/runs/train_tokenizer.ipynb` finds them (duplicates by content dropped)."""
    found = []
    for pkg, sub in (
        ("matplotlib", "mpl-data/sample_data"),
        ("gradio", "media_assets/images"),
        ("gradio", "test_data"),
    ):
        spec = importlib.util.find_spec(pkg)
        if spec and spec.submodule_search_locations:
            d = Path(list(spec.submodule_search_locations)[0]) / sub
            found += [p for p in sorted(d.glob("*.jp*g")) if p.stat().st_size > 15_000]
    unique = {p.read_bytes(): p for p in reversed(found)}
    return sorted(unique.values(), key=found.index)


def scene_frames(k: int, n: int, size: int) -> np.ndarray:
    "Procedural scene k: 1-6 objects over any background, a random share of saturated colours and speed."
    rng = np.random.default_rng(10_000 + k)
    sat, speed = float(rng.uniform(0, 1)), float(rng.uniform(0.004, 0.03))
    return render(random_scene(rng, (1, 6), n, saturated=sat, max_speed=speed), n, size)


def pan_frames(img: np.ndarray, i: int, j: int, n: int, size: int) -> np.ndarray:
    "Pan j over photograph i: start and end centre and zoom (1-2.5) drawn as the tokenizer's run draws them."
    rng = np.random.default_rng((20_000, i, j))
    z0, z1 = rng.uniform(1.0, 2.5, 2)
    ends = [(*rng.uniform(0.5 - 0.5 * (1 - 1 / z), 0.5 + 0.5 * (1 - 1 / z), 2), z) for z in (z0, z1)]
    return pan_zoom(img, n, size, *ends)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the videos")
    ap.add_argument("--scenes", type=int, default=400, help="procedural scene videos")
    ap.add_argument("--pans", type=int, default=40, help="pan / zoom videos per training photograph")
    ap.add_argument("--seconds", type=float, default=6.0, help="length of each video")
    ap.add_argument("--fps", type=float, default=8.0, help="frame rate of the written videos")
    ap.add_argument("--size", type=int, default=128, help="frame size in pixels")
    a = ap.parse_args(argv)
    out, n = Path(a.out), int(round(a.seconds * a.fps))
    videos = []
    for k in range(a.scenes):
        videos.append(write_video(scene_frames(k, n, a.size), out / "scenes" / f"scene_{k:04d}.mp4", fps=a.fps))
    imgs = [p for p in package_images() if p.name not in HELDOUT_IMAGES]
    for i, p in enumerate(imgs):
        img = np.asarray(plt.imread(p))[..., :3]
        for j in range(a.pans):
            videos.append(
                write_video(pan_frames(img, i, j, n, a.size), out / "photos" / f"{p.stem}_{j:02d}.mp4", fps=a.fps)
            )
    record = dict(
        scenes=a.scenes,
        photographs=[p.name for p in imgs],
        pans_per_photograph=a.pans,
        seconds=a.seconds,
        fps=a.fps,
        size=a.size,
        heldout_images=list(HELDOUT_IMAGES),
        videos=[str(v.relative_to(out)) for v in videos],
    )
    (out / "videos.json").write_text(json.dumps(record, indent=1))
    print(
        f"{len(videos)} videos in {out}: {a.scenes} scenes, {len(imgs)} photographs x {a.pans} pans ({a.seconds:g} s)"
    )
    return record


if __name__ == "__main__":
    main()
