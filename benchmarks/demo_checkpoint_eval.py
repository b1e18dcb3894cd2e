"""The demo checkpoint's model-card numbers: mask accuracy of a pre-trained model against the majority-code and the
nearest-neighbour-copy baselines (appendix G.2), on *the same* block masks, for the sample videos it was trained on
and for held-out videos made here (never seen by the model or, for the test pattern and Grace Hopper, the tokenizer).

    .venv/bin/python benchmarks/demo_checkpoint_eval.py [--checkpoint vimpac/weights/demo] [--out eval.json]

Model, majority and contrastive accuracy come from `vimpac.pretrain.evaluate_masking` (20 batches, seed 1234); the
copy baselines replay the same batches and masks (same seed, same draws) and fill the masked tokens with
`vimpac.masking.nearest_neighbour_fill` in each mode. Held-out videos (10 s at 8 FPS, 128x128, written with PyAV and
split in two 5-s halves so that a batch holds two videos):
- `test_pattern`: saturated colour bars with saturated shapes moving and turning over them (`vimpac.synthetic`);
- `grace_hopper_pan`: a slow pan and zoom over matplotlib's `grace_hopper.jpg` (`vimpac.synthetic.pan_zoom`)."""

import argparse, tempfile
from pathlib import Path
import numpy as np
import torch
from matplotlib import cbook
import matplotlib.pyplot as plt
import vimpac
from vimpac.video import sample_videos
from vimpac.synthetic import Background, Scene, random_scene, render, pan_zoom, write_video
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store, TokenStore
from vimpac.masking import nearest_neighbour_fill
from vimpac.data import ClipPairDataset
from vimpac.model import VimpacForPreTraining
from vimpac.pretrain import PretrainConfig, evaluate_masking, mask_clip_pairs, batch_indices
from vimpac.utils import make_generator, derive_seed, read_json, write_json

BARS = ((255, 255, 255), (255, 255, 0), (0, 255, 255), (0, 255, 0), (255, 0, 255), (255, 0, 0), (0, 0, 255))


def heldout_videos(folder: Path, fps: float = 8.0, seconds: float = 10.0, size: int = 128) -> dict[str, list[Path]]:
    "The two held-out videos, each written as two halves: {name: [first half, second half]}."
    n = int(fps * seconds)
    shapes = random_scene(np.random.default_rng(7), (4, 4), n, saturated=1.0, max_speed=0.01).shapes
    pattern = render(Scene(Background("bars", BARS), shapes), n, size)
    hopper = pan_zoom(
        plt.imread(cbook.get_sample_data("grace_hopper.jpg")), n, size, (0.4, 0.35, 1.0), (0.55, 0.3, 2.0)
    )
    out = {}
    for name, frames in (("test_pattern", pattern), ("grace_hopper_pan", hopper)):
        out[name] = [
            write_video(frames[i * n // 2 : (i + 1) * n // 2], folder / name / f"{name}_{i}.mp4", fps=fps)
            for i in (0, 1)
        ]
    return out


@torch.no_grad()
def copy_baselines(model, store, cfg: PretrainConfig, batches: int = 20, seed: int = 1234) -> dict:
    "Nearest-neighbour copy accuracy on the masks `evaluate_masking` draws (same seed, same order of draws)."
    data = ClipPairDataset(store, cfg.clip_len, pad_id=model.config.pad_id, seed=seed)
    gen = make_generator(derive_seed(seed, "eval-masks"))
    hits, total = {"spatial": 0, "spatiotemporal": 0}, 0
    for b in range(batches):
        data.set_epoch(b)
        pairs = data.batch(batch_indices(len(store), cfg.batch_size, b, seed))
        _, labels, mask = mask_clip_pairs(pairs, model.config, cfg, gen)
        clips = torch.cat([pairs[:, 0], pairs[:, 1]])  # the order mask_clip_pairs uses: (two n)
        valid = labels != -100
        total += int(valid.sum())
        for mode in hits:
            hits[mode] += int((nearest_neighbour_fill(clips, mask, mode)[valid] == labels[valid]).sum())
    return {f"nn_{k}_acc": v / max(total, 1) for k, v in hits.items()} | {"nn_masked_tokens": total}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(Path(vimpac.__file__).parent / "weights" / "demo"))
    ap.add_argument("--out", default=None, help="JSON file for the numbers (default: print only)")
    ap.add_argument("--batches", type=int, default=20)
    a = ap.parse_args(argv)
    ckpt = Path(a.checkpoint)
    run = read_json(ckpt / "training.json", "the run's record", required=("tokenizer", "fps", "frame_size"))
    model = VimpacForPreTraining.from_pretrained(ckpt).eval()
    tok = load_tokenizer("default")
    if tok.identity != run["tokenizer"]:
        raise SystemExit(f"the default tokenizer {tok.identity} is not the run's {run['tokenizer']}")
    cfg = PretrainConfig(batch_size=run.get("batch_size", 3), clip_len=model.config.max_clip_len)
    results = {}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        sets = {"sample_videos": sample_videos()} | heldout_videos(d / "videos")
        for name, videos in sets.items():
            build_store(videos, tok, d / name, fps=run["fps"], frame_size=run["frame_size"], progress=False)
            store = TokenStore(d / name, tokenizer=tok)
            torch.manual_seed(0)
            ev = evaluate_masking(model, store, cfg, batches=a.batches) | copy_baselines(model, store, cfg, a.batches)
            assert ev["nn_masked_tokens"] == ev["masked_tokens"], ev  # the same masked tokens as the model's
            results[name] = dict(ev, batches=a.batches)
            print(
                f"{name:18s} model {100 * ev['mask_acc']:5.1f}%  majority {100 * ev['majority_acc']:5.1f}%  "
                f"NN spatial {100 * ev['nn_spatial_acc']:5.1f}%  NN spatiotemporal "
                f"{100 * ev['nn_spatiotemporal_acc']:5.1f}%  "
                f"CL {100 * ev['cl_acc']:5.1f}%  masked tokens {ev['masked_tokens']}",
                flush=True,
            )
    if a.out:
        write_json(a.out, results)
    return results


if __name__ == "__main__":
    main()
