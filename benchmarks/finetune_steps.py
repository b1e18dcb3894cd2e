"""Fine-tuning step throughput (issue 12, Speed): one optimizer step of `vimpac.finetune`'s path on the shared engine
(`Engine.accumulate` over micro-batches of the classification model's own loss, then `Engine.update_async`: clip, AdamW,
schedule), on random tokens, in clips/s. Prints step time, FLOPs per clip (forward + backward of the backbone,
`model_flops` without the pre-training heads' share is within 1%) and peak memory. Asserts nothing about time.

    python benchmarks/finetune_steps.py --device cpu [--out benchmarks/results/finetune_cpu.json]
    python benchmarks/finetune_steps.py --device cuda --precision bf16 --cases small:10:256:16 [--out ...]

A case is PRESET:T:S:MICRO (micro-batch clips per forward); `--accum` micro-batches make one step. Each case runs in
its own subprocess so that peak memory (CPU: peak resident set size; GPU: peak allocated) is its own. Figures are
medians over `--repeats` timed steps after `--warmup` steps. A fine-tuning step holds one clip per video, so clips/s
is videos/s. Exits 1 when a case fails.
"""

import argparse, json, platform, sys
import torch
from bench_utils import BACKENDS, device_sync, median_seconds, peak_memory_gb, run_workers, pin_attention


def worker(a):
    from vimpac.model import VimpacConfig, VimpacForVideoClassification, model_flops
    from vimpac.engine import TrainConfig, Engine, start_run

    if a.threads:
        torch.set_num_threads(a.threads)
    pin_attention(a.sdpa_backend)
    preset, T, S, micro = a.case.split(":")
    T, S, micro = int(T), int(S), int(micro)
    cfg = VimpacConfig.from_preset(
        preset, max_clip_len=T, token_map=(S // 8, S // 8), gradient_checkpointing=a.checkpointing
    )
    run = start_run(None, False, a.device, a.precision)
    eng = Engine(
        VimpacForVideoClassification(cfg, 101),
        TrainConfig(lr=1e-4, precision=a.precision, compile=a.compile, gradient_checkpointing=a.checkpointing),
        10**6,
        run,
    )
    g = torch.Generator(device=run.device).manual_seed(0)
    G = micro * a.accum
    batches = [
        (
            torch.randint(0, cfg.vocab_size, (micro, T, S // 8, S // 8), device=run.device, generator=g),
            torch.randint(0, 101, (micro,), device=run.device, generator=g),
        )
        for _ in range(a.accum)
    ]

    def loss_fn(mb):
        o = eng.forward(*mb)
        return o.loss * (len(mb[1]) / G), torch.stack([o.loss.detach() * len(mb[1])])

    # the loop's step: update_async reads nothing on the host (finetune settles at log steps only)
    step, sync = lambda: eng.update_async(eng.accumulate(batches, loss_fn)), device_sync(run.device)
    for _ in range(a.warmup):
        step()
    sync()
    if run.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t = median_seconds(step, a.repeats, sync, warmup=0)
    flops = model_flops(cfg, T, mask_ratio=0.0)
    print(
        json.dumps(
            dict(
                case=a.case,
                checkpointing=a.checkpointing,
                sdpa_backend=a.sdpa_backend,
                accum=a.accum,
                clips_per_step=G,
                step_s=t,
                clips_per_s=G / t,
                flops_per_clip=flops,
                achieved_flops=flops * G / t,
                peak_mem_gb=peak_memory_gb(run.device),
                reserved_gb=torch.cuda.max_memory_reserved(run.device) / 1e9 if run.device.type == "cuda" else None,
            )
        )
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="auto", choices="auto fp32 bf16 fp16".split())
    p.add_argument("--cases", nargs="+", default="tiny:10:128:4 tiny:10:256:2 small:10:128:2 small:10:256:1".split())
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument(
        "--sdpa-backend",
        default=None,
        choices=[*BACKENDS, "torch"],
        help="attention backend in place of the kit's pin (torch: torch's own choice)",
    )
    p.add_argument("--out", default=None)
    p.add_argument("--case", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.case:
        return worker(a)
    options = [
        x
        for k in ("device", "precision", "accum", "warmup", "repeats", "threads")
        for x in (f"--{k}", str(getattr(a, k)))
    ]
    options += ["--compile"] * a.compile + ["--checkpointing"] * a.checkpointing
    options += ["--sdpa-backend", a.sdpa_backend] if a.sdpa_backend else []

    def show(case, x):
        print(
            f"{case:>16}  {x['clips_per_step']:3d} clips/step  {x['step_s']:8.2f} s/step  {x['clips_per_s']:8.2f} "
            "clips/s  "
            f"{x['achieved_flops'] / 1e9:8.1f} GFLOP/s  {x['peak_mem_gb']:.2f} GB"
        )

    rows, failed = run_workers(
        a.cases,
        lambda case: [sys.executable, __file__, "--case", case, *options],
        lambda case, err: f"{case}: failed: {(err.strip().splitlines() or ['no output'])[-1]}",
        show,
    )
    if a.out:
        meta = dict(
            machine=platform.machine(),
            processor=platform.processor(),
            torch=torch.__version__,
            threads=a.threads or torch.get_num_threads(),
            device=a.device,
            precision=a.precision,
        )
        json.dump(dict(meta=meta, results=rows, failed=failed), open(a.out, "w"), indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
