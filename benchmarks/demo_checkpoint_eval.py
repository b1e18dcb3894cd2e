"""The demo checkpoint's model-card numbers: mask accuracy of a pre-trained model against the majority-code and the
nearest-neighbour-copy baselines (appendix G.2), on *the same* block masks, for the sample videos (part of its
training data) and for held-out videos made here (never seen by the model or, for the test pattern and Grace Hopper,
the tokenizer).

    .venv/bin/python benchmarks/demo_checkpoint_eval.py [--checkpoint vimpac/weights/demo] [--out eval.json]

Model, majority and contrastive accuracy come from `vimpac.pretrain.evaluate_masking` (20 batches, seed 1234); the
copy baselines replay the same batches and masks (same seed, same draws) and fill the masked tokens with
`vimpac.masking.nearest_neighbour_fill` in each mode. Held-out videos (10 s at 8 FPS, 128x128, written with PyAV and
split in two 5-s halves so that a batch holds two videos):
- `test_pattern`: saturated colour bars with saturated shapes moving and turning over them (`vimpac.synthetic`);
- `grace_hopper_pan`: a slow pan and zoom over matplotlib's `grace_hopper.jpg` (`vimpac.synthetic.pan_zoom`).

`--train-store DIR` adds a row for the store the model was trained on (the same 20 batches). The page rows replay
the Gradio page at its default settings on each sample video and each held-out half
(`vimpac.inference.reconstruct_video`: the first T frames at `vimpac.inference.FPS`, one block mask of the default
number of blocks, about 15% masked) for mask seeds 0 .. `--page-seeds` - 1 (the page's default is seed 0), pooled
over the masked tokens; the copy baselines fill the same masks in both modes."""

import argparse, tempfile
from dataclasses import asdict
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
from vimpac.utils import make_generator, derive_seed, write_json
from vimpac.runs import read_run
from vimpac.inference import reconstruct_video
from vimpac.masking import copy_accuracy

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


def page_settings(model, tok, videos: list, seeds: int = 20) -> dict:
    """Model and copy accuracy at the Gradio page's defaults (`reconstruct_video` with its default strategy, blocks
    and FPS) over `videos` and mask seeds 0 .. seeds - 1, pooled over the masked tokens; also seed 0 alone."""
    hits = {s0: {"model": 0.0, "spatial": 0.0, "spatiotemporal": 0.0} for s0 in ("all", "seed0")}
    total = {"all": 0, "seed0": 0}
    for v in videos:
        for s in range(seeds):
            r = reconstruct_video(v, model, tok, seed=s)
            n = int(r.mask.sum())
            accs = dict(
                model=r.model_acc,
                spatial=r.copy_acc,
                spatiotemporal=copy_accuracy(r.tokens[None], r.mask[None], "spatiotemporal"),
            )
            for part in ("all", "seed0") if s == 0 else ("all",):
                total[part] += n
                for k, acc in accs.items():
                    hits[part][k] += acc * n
    out = {f"page_{k}_acc": h / total["all"] for k, h in hits["all"].items()}
    out |= {f"page_seed0_{k}_acc": h / total["seed0"] for k, h in hits["seed0"].items()}
    return out | {"page_masked_tokens": total["all"], "page_seeds": seeds}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(Path(vimpac.__file__).parent / "weights" / "demo"))
    ap.add_argument("--out", default=None, help="JSON file for the numbers (default: print only)")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=3, help="clip pairs per evaluation batch (the old card's 3)")
    ap.add_argument("--train-store", default=None, help="also evaluate on this token store (the training store)")
    ap.add_argument("--page-seeds", type=int, default=20, help="mask seeds of the page rows (0: no page rows)")
    a = ap.parse_args(argv)
    ckpt = Path(a.checkpoint)
    run = read_run(ckpt)  # training.json (the shipped card) or pretrain_config.json (a run folder)
    model = VimpacForPreTraining.from_pretrained(ckpt).eval()
    tok = load_tokenizer("default")
    frame_size = model.config.token_map[0] * tok.downsample
    if tok.identity != run.tokenizer:
        raise SystemExit(f"the default tokenizer {tok.identity} is not the run's {run.tokenizer}")
    cfg = PretrainConfig(batch_size=a.batch_size, clip_len=model.config.max_clip_len)
    results = {}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        held = heldout_videos(d / "videos")
        sets = {"sample_videos": sample_videos()} | held
        if a.train_store:
            sets = {"training_store": None} | sets
        for name, videos in sets.items():
            if videos is None:
                store = TokenStore(a.train_store, tokenizer=tok)
            else:
                build_store(videos, tok, d / name, fps=run.fps, frame_size=frame_size, progress=False)
                store = TokenStore(d / name, tokenizer=tok)
            torch.manual_seed(0)
            ev = asdict(evaluate_masking(model, store, cfg, batches=a.batches)) | copy_baselines(
                model, store, cfg, a.batches
            )
            assert ev["nn_masked_tokens"] == ev["masked_tokens"], ev  # the same masked tokens as the model's
            results[name] = dict(ev, batches=a.batches)
            print(
                f"{name:18s} model {100 * ev['mask_acc']:5.1f}%  majority {100 * ev['majority_acc']:5.1f}%  "
                f"NN spatial {100 * ev['nn_spatial_acc']:5.1f}%  NN spatiotemporal "
                f"{100 * ev['nn_spatiotemporal_acc']:5.1f}%  "
                f"CL {100 * ev['cl_acc']:5.1f}%  masked tokens {ev['masked_tokens']}",
                flush=True,
            )
        for name, videos in ({"sample_videos": sample_videos()} | held).items() if a.page_seeds else ():
            pg = page_settings(model, tok, videos, a.page_seeds)
            results[name] |= pg
            print(
                f"{name:18s} page defaults ({a.page_seeds} seeds x {len(videos)} videos): model "
                f"{100 * pg['page_model_acc']:5.1f}%  NN spatial {100 * pg['page_spatial_acc']:5.1f}%  "
                f"NN spatiotemporal {100 * pg['page_spatiotemporal_acc']:5.1f}%  "
                f"masked tokens {pg['page_masked_tokens']}; seed 0: model "
                f"{100 * pg['page_seed0_model_acc']:5.1f}%  NN spatial {100 * pg['page_seed0_spatial_acc']:5.1f}%",
                flush=True,
            )
    if a.out:
        write_json(a.out, results)
    return results


if __name__ == "__main__":
    main()
