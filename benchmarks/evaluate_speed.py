"""Multi-view evaluation speed (§4.2, issue 12 "Speed"): videos/s of `vimpac.evaluate.multiview_scores`, i.e. the
clips of 3 spatial x K temporal crops of every video gathered from its tokens (`view_clips`), sent through the
classifier `--batch-size` clips at a time across videos, and the softmax scores averaged per video. The tokens are
random ids in memory (the store's LMDB reads and decoding are outside this measurement: see tokenize_throughput.py).
Forward FLOPs per clip come from `vimpac.model.model_flops(cfg, T, mask_ratio=0, training=False)`: the backbone's
matmuls (no token head; it counts the small pre-training CLS head, under 0.1% here, instead of the classifier's FC).
Asserts nothing about time.

    python benchmarks/evaluate_speed.py --device cpu --out benchmarks/results/evaluate_cpu.json
    python benchmarks/evaluate_speed.py --device cuda --precision bf16 --out benchmarks/results/evaluate_cuda.json

Settings (each a `--settings` name):
- `cpu`: tiny, T = 5, S = 128 (token map 16 x 16), 3x10 views, timed in full on `--videos` videos.
- `toy`: tiny, T = 5, S = 32 (token map 4 x 4), 3x10 views: the GPU suite's quick CPU run (`bench_gpu.py --quick`).
- `paper`: Small, T = 10, S = 256 (token map 32 x 32), 3x10 views, the paper's fine-tuning size. On a CPU a full
  3x10 pass over one video takes minutes, so there `--paper-views` (default 1x1 on a CPU, 3x10 on a GPU) are timed
  and videos/s at 3x10 is derived from the measured clips/s (the cost is linear in clips at a fixed batch).
"""

import argparse, json, os, platform, sys
import numpy as np
import torch
from bench_utils import device_sync, median_seconds

SETTINGS = {
    "cpu": dict(preset="tiny", clip_len=5, size=128),
    "paper": dict(preset="small", clip_len=10, size=256),
    "toy": dict(preset="tiny", clip_len=5, size=32),
}


def measure(name, a, dev, batch_size):
    from vimpac.model import VimpacConfig, VimpacForVideoClassification, model_flops
    from vimpac.evaluate import multiview_scores, parse_views

    s = SETTINGS[name]
    h = s["size"] // 8
    cfg = VimpacConfig.from_preset(s["preset"], vocab_size=8192, max_clip_len=s["clip_len"], token_map=(h, h))
    model = VimpacForVideoClassification(cfg, num_classes=a.classes).to(dev).eval()
    views = a.paper_views if name == "paper" and a.paper_views else "3x10"
    if name == "paper" and not a.paper_views and dev.type == "cpu":
        views = "1x1"
    crops, k = parse_views(views)
    n_videos = a.videos if name != "paper" or dev.type == "cuda" else 1
    rng = np.random.default_rng(0)
    L = a.frames  # frames per video (20 = 10 s at 2 FPS)
    videos = [{c: rng.integers(0, cfg.vocab_size, (L, h, h), dtype=np.int16) for c in crops} for _ in range(n_videos)]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    sync = device_sync(dev)

    def run(vs):
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            return multiview_scores(model, vs, views, batch_size, dev)

    assert run(videos[:1]).shape == (1, a.classes)  # warm-up: one video
    t = median_seconds(lambda: run(videos), a.repeats, sync, warmup=0)
    clips = n_videos * len(crops) * k
    flops = model_flops(cfg, s["clip_len"], mask_ratio=0.0, training=False)
    res = dict(
        setting=name,
        preset=s["preset"],
        clip_len=s["clip_len"],
        frame_size=s["size"],
        token_map=[h, h],
        views_timed=views,
        videos_timed=n_videos,
        batch_size=batch_size,
        precision=a.precision,
        seconds=t,
        clips_per_s=clips / t,
        videos_per_s_3x10=clips / t / 30,
        derived_from_fewer_views=views != "3x10",
        gflop_per_clip=flops / 1e9,
        achieved_gflop_s=flops * clips / t / 1e9,
        load_average_1min=os.getloadavg()[0],
    )
    print(
        f"{name:6s} {s['preset']:5s} T={s['clip_len']:<2d} S={s['size']:<3d} batch {batch_size:<3d} views timed "
        f"{views:5s} x {n_videos} video(s): "
        f"{clips / t:8.2f} clips/s -> {clips / t / 30:8.3f} videos/s at 3x10"
        f"{' (derived)' if views != '3x10' else ''}; {flops / 1e9:.1f} GFLOP/clip, {flops * clips / t / 1e9:.0f} "
        "GFLOP/s"
    )
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--settings", nargs="+", default=["cpu", "paper"], choices=list(SETTINGS))
    ap.add_argument("--videos", type=int, default=4, help="videos per timed pass (cpu setting, and paper on a GPU)")
    ap.add_argument("--frames", type=int, default=20, help="frames per video (20 = 10 s at 2 FPS)")
    ap.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=[30, 1],
        help="clips per forward pass; the cpu setting runs at each (1 = one view per forward, the loop that "
        "batching replaces), the paper setting at the first",
    )
    ap.add_argument(
        "--paper-views", default=None, help="views timed at the paper setting (default: 1x1 on a CPU, 3x10 on a GPU)"
    )
    ap.add_argument("--classes", type=int, default=101)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    with torch.inference_mode():
        results = [
            measure(n, a, dev, b) for n in a.settings for b in (a.batch_sizes if n != "paper" else a.batch_sizes[:1])
        ]
    machine = dict(
        machine=platform.machine(),
        processor=platform.processor(),
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        device=torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
    )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(machine, args=vars(a), results=results), f, indent=1)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
