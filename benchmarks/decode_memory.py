"""Peak memory of `build_store` with all 12 views on a long video: bounded by a chunk of frames, not by the video.

Makes a long synthetic video with PyAV (default: 10 minutes, 320x240 at 10 FPS, moving noise), then tokenizes it
into a fresh store at 2 FPS, S = 128, `views="all"`, each run in its own process, and records the process's peak
resident memory (ru_maxrss) before and after `build_store`. `--before REV` also runs the kit of an older git revision
(extracted with `git archive` into a temporary folder) for a before/after comparison.

    .venv/bin/python benchmarks/decode_memory.py --before f614fc7 --out benchmarks/results/decode_memory_cpu.json

The tokenizer is a tiny untrained VQ-VAE: memory here is about frames, not the model; its encoder cost is small."""

import argparse, json, os, platform, resource, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_video(path, seconds, width, height, rate):
    "A long H.264 video of moving noise, written frame by frame by the kit's `write_video` (never held whole)."
    import numpy as np
    from vimpac.synthetic import write_video

    rng = np.random.default_rng(0)
    tile = rng.integers(0, 256, (height * 2, width * 2, 3), dtype=np.uint8)

    def frames():
        for i in range(int(seconds * rate)):
            y, x = (3 * i) % height, (5 * i) % width  # a moving picture, so frames differ
            yield tile[y : y + height, x : x + width]

    return write_video(frames(), path, fps=rate, crf=30, options={"preset": "ultrafast"})


def child(a):
    "One measurement, in this (fresh) process: peak RSS before and after build_store, in MiB."
    import torch

    torch.set_num_threads(1)
    from vimpac.store import build_store, TokenStore
    from vimpac.tokenizer import VQVAE, VQVAEConfig
    import vimpac

    torch.manual_seed(0)
    tok = VQVAE(VQVAEConfig(vocab_size=64, channels=(8, 16, 16), code_dim=8, num_res_blocks=1)).eval()
    tok.encode(
        torch.zeros(2, a.size, a.size, 3, dtype=torch.uint8).numpy()
    )  # first call (codebook init) out of the way
    mib = lambda r: r.ru_maxrss / 1024
    before = mib(resource.getrusage(resource.RUSAGE_SELF))
    t = time.perf_counter()
    s = build_store(
        [a.video],
        tok,
        a.store,
        fps=a.fps,
        frame_size=a.size,
        views="all",
        batch_size=a.batch_size,
        workers=a.workers[0],
        progress=False,
    )
    wall = time.perf_counter() - t
    assert len(s.stored) == 1, str(s)
    store = TokenStore(a.store)
    print(
        json.dumps(
            dict(
                kit=str(Path(vimpac.__file__).parent),
                peak_rss_before_mib=round(before, 1),
                peak_rss_mib=round(mib(resource.getrusage(resource.RUSAGE_SELF)), 1),
                peak_rss_workers_mib=round(mib(resource.getrusage(resource.RUSAGE_CHILDREN)), 1),
                frames=store.lengths[0],
                views=len(store.views),
                seconds=round(wall, 1),
            )
        )
    )


def measure(a, video, label, pythonpath, workers, tmp):
    env = os.environ | {"PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    store = Path(tmp) / f"store-{label}-{workers}"
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--video",
        str(video),
        "--store",
        str(store),
        "--fps",
        str(a.fps),
        "--size",
        str(a.size),
        "--batch-size",
        str(a.batch_size),
        "--workers",
        str(workers),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"{label} run failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return dict(label=label, workers=workers, **out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--rate", type=int, default=10, help="source frames per second")
    p.add_argument("--fps", type=float, default=2.0)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=64, help="frames per encoder batch (the chunk)")
    p.add_argument("--workers", type=int, nargs="*", default=[0, 2], help="worker counts to measure (this kit)")
    p.add_argument("--before", default=None, help="git revision of the kit to compare with (workers 0)")
    p.add_argument("--out", default=None, help="JSON file for the results")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--video", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child(a)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        video = make_video(Path(tmp) / "long.mp4", a.minutes * 60, a.width, a.height, a.rate)
        print(
            f"synthetic video: {a.minutes:g} min, {a.width}x{a.height} at {a.rate} FPS, "
            f"{video.stat().st_size / 2**20:.1f} MiB, made in {time.perf_counter() - t:.0f} s"
        )
        runs = []
        if a.before:
            old = Path(tmp) / "before"
            old.mkdir()
            tar = subprocess.run(
                ["git", "-C", str(ROOT), "archive", a.before, "vimpac"], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=tar, check=True)
            runs.append(measure(a, video, f"before ({a.before})", str(old), 0, tmp))
        for w in a.workers:
            runs.append(measure(a, video, "after", str(ROOT), w, tmp))
    print(f"\nbuild_store, views=all (12), {a.fps:g} FPS, S = {a.size}, chunk = batch {a.batch_size} frames")
    print(f"{'kit':<22} {'workers':>7} {'T':>6} {'RSS before':>11} {'peak RSS':>9} {'workers peak':>13} {'time':>7}")
    for r in runs:
        print(
            f"{r['label']:<22} {r['workers']:>7} {r['frames']:>6} {r['peak_rss_before_mib']:>9.0f} M "
            f"{r['peak_rss_mib']:>7.0f} M {r['peak_rss_workers_mib']:>11.0f} M {r['seconds']:>6.0f} s"
        )
    if a.out:
        res = dict(
            machine=f"{platform.machine()}, {os.cpu_count()} cores",
            python=platform.python_version(),
            video=dict(minutes=a.minutes, width=a.width, height=a.height, rate=a.rate),
            settings=dict(fps=a.fps, size=a.size, views="all", batch_size=a.batch_size),
            runs=runs,
        )
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
