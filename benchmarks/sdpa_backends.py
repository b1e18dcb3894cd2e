"""The one-minute attention check (issue 34): each `scaled_dot_product_attention` backend (flash, efficient, cuDNN,
math) timed forward and forward + backward on the kit's own row shapes, with and without the [PAD] key mask, and
the workspace each one's backward takes. Asserts nothing about time.

    python benchmarks/sdpa_backends.py --device cuda [--out benchmarks/results/sdpa-<gpu>.json]   # about a minute
    python benchmarks/sdpa_backends.py --device cpu --quick                                      # toy sizes

A shape class is one kind of row of the T,H|W layout (§3.3): the temporal rows (T + 1 positions with [CLS], all
heads) and the spatial rows (h + 1 positions, half the heads each for H and for W; H and W have one shape). The cases
are Small and Large-Half at the pre-training size (T 5, frame size 128: a 16 x 16 token map, `--pretrain-clips`
clips a call) and the fine-tuning size (T 10, frame size 256: 32 x 32, `--finetune-clips`). Each call goes through
`vimpac.model.row_attention` (its chunking included) in bf16 on a GPU (fp32 on a CPU), with the presets' attention
dropout in the backward timing, as training runs it. A backend that cannot take a shape (flash takes no mask; no
efficient or cuDNN kernel on a CPU) is recorded with its reason, not timed.

Figures: the median of `--repeats` calls after `--warmup`, in microseconds per clip (all calls of one layer);
`extra_mib`: peak memory of forward + backward above its inputs, output and input gradients (GPU only), the
backend's own workspace. The fastest backend per shape class and mask is what the model should pin.
"""

import argparse, json, platform, sys, warnings
import torch
from bench_utils import BACKENDS, SDPA_NAMES, device_sync, median_seconds, machine_name

WORKLOADS = {"pretrain": (5, 16), "finetune": (10, 32)}  # (T, token map side)


def shape_classes(preset: str, workload: str, clips: int) -> list[dict]:
    """The row shapes of one micro-batch of `clips` clips of `preset` at `workload`'s size: dict(rows (kind),
    R (rows a call), heads, length (positions, [CLS] included), head_dim, calls (calls of this shape a layer))."""
    from vimpac.model import VimpacConfig

    c = VimpacConfig.from_preset(preset)
    T, side = WORKLOADS[workload]
    return [
        dict(rows="temporal", R=clips * side * side, heads=c.num_heads, length=T + 1, head_dim=c.head_dim, calls=1),
        dict(rows="spatial", R=clips * T * side, heads=c.num_heads // 2, length=side + 1, head_dim=c.head_dim, calls=2),
    ]


def time_one(shape: dict, backend: str, masked: bool, device, dtype, dropout: float, warmup: int, repeats: int):
    """One backend on one shape: dict(fwd_us, fwd_bwd_us (per call), extra_mib) or dict(error=reason)."""
    from vimpac.model import row_attention

    R, n, L, d = shape["R"], shape["heads"], shape["length"], shape["head_dim"]
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(R, n, L, d, device=device, dtype=dtype, generator=g).requires_grad_() for _ in range(3))
    mask = None
    if masked:  # the [PAD] key mask as the model builds it: (R, 1, 1, L), [CLS] always kept, a few keys dropped
        mask = torch.rand(R, 1, 1, L, device=device, generator=g) > 0.1
        mask[..., 0] = True
    grad = torch.randn_like(q)
    sync = device_sync(device)

    pin = (SDPA_NAMES[backend],)

    def fwd():
        with torch.no_grad():
            row_attention(q, k, v, mask, 0.0, backends=pin)

    def fwd_bwd():
        row_attention(q, k, v, mask, dropout, backends=pin).backward(grad)
        q.grad = k.grad = v.grad = None

    try:
        fwd_bwd()
        sync()
    except RuntimeError as e:  # "No available kernel", a shape or mask the backend refuses
        return dict(error=str(e).strip().splitlines()[0][:200])
    res = dict(
        fwd_us=1e6 * median_seconds(fwd, repeats, sync, warmup),
        fwd_bwd_us=1e6 * median_seconds(fwd_bwd, repeats, sync, warmup),
    )
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fwd_bwd()
        sync()
        # above the inputs: the output and the three input gradients (4 x q's bytes) are not the backend's own
        res["extra_mib"] = (torch.cuda.max_memory_allocated(device) - base - 4 * q.numel() * q.element_size()) / 2**20
    return res


def run(device: str, quick: bool, pretrain_clips: int, finetune_clips: int, warmup: int, repeats: int) -> list[dict]:
    "Every (preset, workload, shape class, mask, backend) row, timed."
    from vimpac.model import VimpacConfig

    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    presets = ("tiny",) if quick else ("small", "large_half")
    clips = dict(pretrain=pretrain_clips, finetune=finetune_clips)
    rows = []
    for preset in presets:
        dropout = VimpacConfig.from_preset(preset).dropout
        for workload in WORKLOADS:
            for shape in shape_classes(preset, workload, clips[workload]):
                for masked in (False, True):
                    for backend in BACKENDS:
                        r = time_one(shape, backend, masked, device, dtype, dropout, warmup, repeats)
                        per = clips[workload] / shape["calls"]  # microseconds per clip, all calls of the layer
                        r = {k: v / per if k.endswith("_us") else v for k, v in r.items()}
                        rows.append(
                            dict(preset=preset, workload=workload, masked=masked, backend=backend, **shape, **r)
                        )
                        figures = r.get("error") or f"fwd {r['fwd_us']:8.2f}  fwd+bwd {r['fwd_bwd_us']:8.2f} us/clip"
                        print(
                            f"{preset:10s} {workload:8s} {shape['rows']:8s} L={shape['length']:2d} "
                            f"{'mask' if masked else '    '} {backend:9s} {figures}",
                            flush=True,
                        )
    return rows


def best(rows: list[dict]) -> dict:
    "The fastest backend (forward + backward) per (preset, workload, rows, masked), as 'preset/workload/rows/mask'."
    out = {}
    for r in rows:
        if "error" in r:
            continue
        key = f"{r['preset']}/{r['workload']}/{r['rows']}/{'mask' if r['masked'] else 'nomask'}"
        if key not in out or r["fwd_bwd_us"] < out[key][1]:
            out[key] = (r["backend"], r["fwd_bwd_us"])
    return {k: v[0] for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="the tiny preset at 4 clips a call (a CPU run in seconds)")
    ap.add_argument("--pretrain-clips", type=int, default=64)
    ap.add_argument("--finetune-clips", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*(kernel|fused kernels).*")  # the refusals are recorded per row
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("sdpa_backends: error: --device cuda: no CUDA GPU is visible (use --device cpu --quick)", file=sys.stderr)
        return 2
    pc, fc = (4, 4) if a.quick else (a.pretrain_clips, a.finetune_clips)
    print(f"{machine_name(a.device)}, torch {torch.__version__}")
    rows = run(a.device, a.quick, pc, fc, 1 if a.quick else a.warmup, 1 if a.quick else a.repeats)
    fastest = best(rows)
    for k, v in fastest.items():
        print(f"fastest {k}: {v}")
    if a.out:
        meta = dict(
            machine=machine_name(a.device),
            torch=torch.__version__,
            cuda=torch.version.cuda,
            python=platform.python_version(),
            args=vars(a),
        )
        with open(a.out, "w") as f:
            json.dump(dict(meta=meta, rows=rows, fastest=fastest), f, indent=1)
        print("wrote", a.out)
    return 0 if fastest else 1


if __name__ == "__main__":
    sys.exit(main())
