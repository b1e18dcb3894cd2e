"""Pre-training speed through the real command (issue 13 §2): `vimpac-pretrain` for `--steps` steps on the sample
store (the three sample videos, copied `--copies` times so that a batch can hold `--batch-size` videos, tokenized by
the kit's default VQ-VAE at S = `--frame-size`), then videos/s, MFU and peak memory read back from the run's
`metrics.jsonl`. Asserts nothing about time; exits 1 when the run fails or logs no usable record.

    python benchmarks/pretrain_speed.py --device cuda --out benchmarks/results/pretrain_cuda.json   # 200 steps, Small,
    bf16
    python benchmarks/pretrain_speed.py --device cpu --quick                                         # a few steps,
    tiny, S = 32

Steady state: the first `--skip-records` logged records (step 0, which carries the start-up, and the first interval,
which carries the warm-up and any compilation) are left out; the others are averaged by time (`steady_state`).
MFU is the kit's own (`step_record`: videos/s x 2 clips x `model_flops` / peak): against `--peak-tflops`, else a known
GPU's dense bf16 peak (`vimpac.memory.GPU_PEAK_FLOPS`); on a CPU without `--peak-tflops`, against this process's
measured fp32 matmul rate (`matmul_tflops`), which says how close the model comes to the CPU's own best.
Peak memory: the largest `peak_mem_gb` logged on a GPU (allocated by torch); on a CPU the run's peak resident set size.
"""

import argparse, json, platform, resource, shutil, subprocess, sys, tempfile, time
from pathlib import Path
import torch
from bench_utils import device_sync, median_seconds


def sample_store(out, copies: int, frame_size: int, device: str, workers: int = 0) -> Path:
    """The sample store: the three sample videos (`vimpac.video.sample_videos`), each copied `copies` times under its
    own name (real copies: a store keys videos by their resolved path, so links would be one video), tokenized by the
    default VQ-VAE at 2 FPS and `frame_size` into `out`/store. Returns the store folder."""
    from vimpac.video import sample_videos
    from vimpac.tokenizer import load_tokenizer
    from vimpac.store import build_store

    out = Path(out)
    videos = out / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    for c in range(copies):
        for v in sample_videos():
            shutil.copyfile(v, videos / f"{c:03d}-{v.name}")
    build_store(
        [videos],
        load_tokenizer("default", device=device),
        out / "store",
        fps=2,
        frame_size=frame_size,
        device=device,
        workers=workers,
        progress=False,
    )
    return out / "store"


def matmul_tflops(device: str, n: int = 1024, repeats: int = 5) -> float:
    "The median fp32 TFLOP/s of an n x n matmul on `device` (this process's threads): a measured peak for a CPU's MFU."
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    return 2 * n**3 / median_seconds(lambda: a @ b, repeats, device_sync(device)) / 1e12


def steady_state(records: list[dict], skip: int = 2) -> dict:
    """Steady-state figures of `pretrain`'s logged records (each with `step`, `videos_per_s`, optionally `mfu` and
    `peak_mem_gb`). A record covers the steps since the previous record (the first, steps 0..step; a record of a
    skipped bad step restarts the clock too, and its time was spent), so after leaving out the first `skip` records
    (at least one stays), videos/s is the time-weighted mean: sum of steps / sum of (steps / rate), not the mean of
    the rates. MFU, proportional to videos/s in every record, is averaged the same way. Returns dict(steps,
    videos_per_s, mfu (None without), peak_mem_gb (None off a GPU), records). Raises ValueError for no records."""
    if not records:
        raise ValueError("no logged record")
    skip = min(skip, len(records) - 1)
    prev = [-1] + [r["step"] for r in records[:-1]]
    span = [(r["step"] - p, r) for p, r in zip(prev, records)][skip:]
    n = sum(d for d, _ in span)
    mean = lambda k: n / sum(d / r[k] for d, r in span) if all(r.get(k) for _, r in span) else None
    mems = [r["peak_mem_gb"] for r in records if "peak_mem_gb" in r]
    return dict(
        steps=n,
        videos_per_s=mean("videos_per_s"),
        mfu=mean("mfu"),
        peak_mem_gb=max(mems) if mems else None,
        records=len(span),
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="toy sizes: tiny preset, S = 32, 4 steps, batch 2, fp32")
    ap.add_argument("--preset", default=None, help="default: small (tiny with --quick)")
    ap.add_argument("--steps", type=int, default=None, help="default: 200 (4 with --quick)")
    ap.add_argument("--batch-size", type=int, default=None, help="videos per step; default 64 (2 with --quick)")
    ap.add_argument(
        "--copies", type=int, default=None, help="copies of the 3 sample videos; default: enough for a batch"
    )
    ap.add_argument("--frame-size", type=int, default=None, help="S; default 128 (32 with --quick)")
    ap.add_argument("--log-every", type=int, default=None, help="default 20 (1 with --quick)")
    ap.add_argument(
        "--skip-records", type=int, default=None, help="leading records left out; default 2 (1 with --quick)"
    )
    ap.add_argument("--precision", default=None, help="default: bf16 on a GPU, fp32 on a CPU")
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument(
        "--workers", type=int, default=None, help="decode and data-loading processes; default 8 on a GPU, 0 on a CPU"
    )
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    q, gpu = a.quick, a.device.startswith("cuda")
    preset, steps = a.preset or ("tiny" if q else "small"), a.steps or (4 if q else 200)
    batch, size = a.batch_size or (2 if q else 64), a.frame_size or (32 if q else 128)
    log_every, skip = a.log_every or (1 if q else 20), a.skip_records if a.skip_records is not None else (1 if q else 2)
    copies, workers = a.copies or max(1, -(-batch // 3)), a.workers if a.workers is not None else (8 if gpu else 0)
    tmp = Path(tempfile.mkdtemp(prefix="vimpac-pretrain-speed-"))
    try:
        t = time.perf_counter()
        store = sample_store(tmp, copies, size, a.device, workers)
        store_s = time.perf_counter() - t
        peak, peak_source = a.peak_tflops, "--peak-tflops"
        if peak is None and not gpu:
            peak, peak_source = matmul_tflops(a.device), "measured fp32 1024x1024 matmul, this CPU"
        elif peak is None:
            peak_source = "vimpac.memory.GPU_PEAK_FLOPS (dense bf16 datasheet)"
        cmd = [
            str(Path(sys.executable).parent / "vimpac-pretrain"),
            "--store",
            str(store),
            "--out",
            str(tmp / "run"),
            "--device",
            a.device,
            "--preset",
            preset,
            "--steps",
            str(steps),
            "--batch-size",
            str(batch),
            "--log-every",
            str(log_every),
            *"--save-every 0 --keep-last 1 --no-eval --precision".split(),
            a.precision or ("bf16" if gpu else "fp32"),
            "--num-workers",
            str(workers),
        ]
        cmd += ["--peak-tflops", f"{peak:.6g}"] * (peak is not None) + ["--compile"] * a.compile
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        run_s = time.perf_counter() - t
        if r.returncode:
            print(f"pretrain_speed: error: vimpac-pretrain exited {r.returncode}:\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        records = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines()]
        res = steady_state(records, skip)
        if not res["videos_per_s"]:
            print("pretrain_speed: error: no steady-state videos/s in metrics.jsonl", file=sys.stderr)
            return 1
        if res["peak_mem_gb"] is None:
            res["peak_mem_gb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9
        res.update(
            preset=preset,
            clip_len=5,
            frame_size=size,
            batch_size=batch,
            videos_in_store=3 * copies,
            steps_run=steps,
            precision=cmd[cmd.index("--precision") + 1],
            compile=a.compile,
            peak_tflops=peak,
            peak_source=peak_source if peak else None,
            store_s=store_s,
            run_s=run_s,
            device=torch.cuda.get_device_name() if gpu else platform.processor() or platform.machine(),
            torch=torch.__version__,
            cmd=" ".join(cmd[1:]),
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mfu = f"{100 * res['mfu']:.1f}% MFU" if res["mfu"] else "no MFU (no peak)"
    print(
        f"vimpac-pretrain {preset}, T=5, S={size}, batch {batch}, {steps} steps: {res['videos_per_s']:.2f} videos/s "
        f"(steady state over {res['steps']} steps), {mfu}, peak memory {res['peak_mem_gb']:.2f} GB; "
        f"store {store_s:.0f} s, run {run_s:.0f} s"
    )
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
        print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
