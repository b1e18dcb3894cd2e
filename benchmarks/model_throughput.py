"""Pre-training throughput of the VIMPAC model per layout (Table 14): forward + backward of the full objective
(block-masked mask-then-predict + InfoNCE over the two clips of each video) on random tokens, in videos/s, where one
video is 2 clips of T x h x w tokens. The step is the one `vimpac-pretrain` runs (`bench_utils.pretrain_loss_fn`):
micro-batches block-masked on the host with their masked positions and [PAD] flag, as the loader builds them
(two batches in turn, so M changes between steps), moved `non_blocking`; the forward under autocast with the masked
count, the positions and the flag; the InfoNCE of the loop; compiled (`--compile`) as the engine compiles (one graph,
M dynamic, no [PAD] flag). The optimizer step is not in it. Prints FLOPs per video (`vimpac.model.model_flops`),
peak memory and, on a GPU, MFU. Asserts nothing about time.

    python benchmarks/model_throughput.py --device cpu --videos 2 [--out benchmarks/results/model_cpu.json]
    python benchmarks/model_throughput.py --device cuda --videos 64 --precision bf16 [--compile] [--out ...]

Each layout runs in its own subprocess, so that peak memory (CPU: peak resident set size; GPU: peak allocated) is
its own. Figures are medians over `--repeats` timed steps after `--warmup` steps. The paper's Table 14 (one V100,
Small, T = 5, S = 128): TxHxW 12.6, T,HxW 20.0, T,H,W 26.4, T,H|W 32.0 videos/s.
"""

import argparse, json, sys
import torch
from bench_utils import (
    device_sync,
    median_seconds,
    peak_memory_gb,
    pretrain_batch,
    pretrain_loss_fn,
    to_device,
    machine_name,
    run_workers,
    pin_attention,
    BACKENDS,
)

PAPER = {"TxHxW": 12.6, "T,HxW": 20.0, "T,H,W": 26.4, "T,H|W": 32.0}


def worker(a):
    from vimpac.model import VimpacConfig, VimpacForPreTraining, model_flops
    from vimpac.memory import peak_flops

    if a.threads:
        torch.set_num_threads(a.threads)
    pin_attention(a.sdpa_backend)
    dev = torch.device(a.device)
    cfg = VimpacConfig.from_preset(
        a.preset,
        layout=a.layout,
        max_clip_len=a.clip_len,
        token_map=(a.size // 8, a.size // 8),
        gradient_checkpointing=a.checkpointing,
    )
    model = VimpacForPreTraining(cfg).to(dev).train()
    step_model = torch.compile(model, fullgraph=True) if a.compile else model  # the engine's compile: one graph
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    loss_fn = pretrain_loss_fn(compiled=a.compile, amp_dtype=dtype)
    # the loader's micro-batches, masked on the host (two, so that M changes from step to step as in training)
    host = [pretrain_batch(cfg, a.videos, seed=i, pin=dev.type == "cuda") for i in range(2)]
    sync, n = device_sync(dev), [0]

    def step():
        mb = to_device(host[n[0] % len(host)], dev)
        n[0] += 1
        loss_fn(step_model, mb).backward()
        model.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t = median_seconds(step, a.repeats, sync, warmup=0)
    flops = 2 * model_flops(cfg, a.clip_len)  # per video: 2 clips
    res = dict(
        layout=a.layout,
        sdpa_backend=a.sdpa_backend,
        videos_per_s=a.videos / t,
        step_s=t,
        flops_per_video=flops,
        achieved_flops=flops * a.videos / t,
        peak_mem_gb=peak_memory_gb(dev),
        reserved_gb=torch.cuda.max_memory_reserved(dev) / 1e9 if dev.type == "cuda" else None,
    )
    if dev.type == "cuda":
        peak = peak_flops(dev)
        res["mfu"] = res["achieved_flops"] / peak if peak else None
    print(json.dumps(res))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(x) for x in argv]
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--layout", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--videos", type=int, default=2, help="videos (clip pairs) per step")
    ap.add_argument("--clip-len", type=int, default=5)
    ap.add_argument("--size", type=int, default=128, help="frame size S (token map S/8)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--sdpa-backend",
        default=None,
        choices=[*BACKENDS, "torch"],
        help="attention backend in place of the kit's pin (torch: torch's own choice)",
    )
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--layouts", nargs="+", default=list(PAPER), choices=list(PAPER), help="layouts to time (default: all)"
    )
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.layout:
        return worker(a)
    layouts = a.layouts
    machine = machine_name(a.device)
    print(
        f"{machine}, torch {torch.__version__}, {a.preset}, T={a.clip_len}, S={a.size}, {a.videos} videos/step, "
        f"{a.precision}{', compiled' if a.compile else ''}{', ' + a.sdpa_backend if a.sdpa_backend else ''}"
    )
    options = [x for x in argv if x not in ("--out", "--layouts") and not x.endswith(".json") and x not in PAPER]
    rows, failed = run_workers(
        layouts,
        lambda layout: [sys.executable, __file__, "--layout", layout, *options],
        lambda layout, err: f"{layout}: failed\n{err[-2000:]}",
    )
    if not rows:
        return 1
    ref = next((r for r in rows if r["layout"] == "T,H|W"), rows[-1])
    print(
        f"{'layout':7s} {'videos/s':>9s} {'GFLOP/video':>12s} {'TFLOP/s':>8s} {'MFU':>6s} {'peak GB':>8s} "
        f"{'ratio to ' + ref['layout']:>15s} {'paper ratio':>12s}"
    )
    for r in rows:
        r["ratio"] = r["videos_per_s"] / ref["videos_per_s"]
        r["paper_ratio"] = PAPER[r["layout"]] / PAPER[ref["layout"]]
        mfu = f"{100 * r['mfu']:5.1f}%" if r.get("mfu") else "    -"
        print(
            f"{r['layout']:7s} {r['videos_per_s']:9.2f} {r['flops_per_video'] / 1e9:12.1f} "
            f"{r['achieved_flops'] / 1e12:8.3f} "
            f"{mfu:>6s} {r['peak_mem_gb']:8.2f} {r['ratio']:15.2f} {r['paper_ratio']:12.2f}"
        )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(
                dict(
                    machine=machine, torch=torch.__version__, args=vars(a), rows=rows, failed=failed, paper_v100=PAPER
                ),
                f,
                indent=1,
            )
        print("wrote", a.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
