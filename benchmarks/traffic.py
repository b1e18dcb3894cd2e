"""Bytes moved per pre-training video, measured on this machine: eager (every aten op reads its tensor inputs and
writes its outputs; views are free) and compiled (inductor's own count of the bytes its kernels read and write,
`GraphLowering.count_bytes`, after fusion). Each split into matmul-like kernels (mm, addmm, bmm, attention,
embedding) and the memory-bound rest (copies, concatenations, casts, LayerNorm, GELU, dropout, residual adds,
reductions). The step is the pre-training objective as `pretrain` runs it: block-masked clip pairs with the labelled
positions and the [PAD] flag from the host, forward and backward of the token loss and the InfoNCE.

    .venv/bin/python benchmarks/traffic.py --preset tiny --token-map 8 --videos 2 --out
    benchmarks/results/traffic_cpu.json

Run it on two commits (a worktree of the older one on PYTHONPATH) to see what a change to the model saved.
"""

import argparse, json, logging, os, sys, time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # a cached graph skips the codegen that counts
import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_utils import pretrain_batch, pretrain_loss_fn, to_device  # noqa: E402

VIEWS = {
    "view",
    "_unsafe_view",
    "permute",
    "expand",
    "slice",
    "select",
    "unbind",
    "t",
    "transpose",
    "split",
    "split_with_sizes",
    "detach",
    "alias",
    "unsqueeze",
    "squeeze",
    "as_strided",
    "unflatten",
    "_reshape_alias",
    "empty",
    "empty_like",
    "new_empty",
    "empty_strided",
}
MATMUL = ("mm", "addmm", "bmm", "baddbmm", "embedding", "embedding_dense_backward", "_scaled_dot_product")


def is_matmul(name: str) -> bool:
    "Whether an aten op (or inductor extern kernel) name is a matmul-like kernel: the compute-bound part."
    base = name.rsplit(".", 2)[-2] if name.startswith("torch.ops.aten.") else name.split(".")[-1]
    return base in MATMUL or base.startswith("_scaled_dot_product")


class EagerBytes(TorchDispatchMode):
    "Sums, per aten op, the bytes of its tensor inputs and outputs (views, allocations and metadata queries cost"

    "nothing)."

    def __init__(self):
        super().__init__()
        self.ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        if name not in VIEWS and outs:  # no tensor out: metadata (a fake tensor's `device`, sizes), no traffic
            leaves = pytree.tree_leaves((args, kwargs, out))
            n = sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))
            self.ops[name] = self.ops.get(name, 0) + n
        return out

    def split(self) -> dict:
        mm = sum(v for k, v in self.ops.items() if is_matmul(k))
        return dict(matmul=mm, memory=sum(self.ops.values()) - mm)


def make_step(preset: str, token_map: int, clip_len: int, videos: int, seed: int = 0, fused_attention: bool = True):
    """(model, step function) of the pre-training objective on random clip pairs masked on the host as the loader
    masks them: `step(m)` runs forward and backward of `bench_utils.pretrain_loss_fn` (the loop's loss) with `m`, the
    model or its compiled wrapper. `fused_attention`: the attention-probability dropout set to 0, so that the CPU runs
    its fused (flash) attention kernel, as a GPU does whose flash kernel applies that dropout inside at no traffic;
    with the preset's dropout the CPU takes SDPA's math path and moves the L x L probabilities."""
    from vimpac.model import VimpacConfig, VimpacForPreTraining

    torch.manual_seed(seed)
    c = VimpacConfig.from_preset(preset, vocab_size=8192, token_map=(token_map, token_map), max_clip_len=clip_len)
    model = VimpacForPreTraining(c).train()
    if fused_attention:
        for m in model.modules():
            if hasattr(m, "attn_drop"):
                m.attn_drop = 0.0
    mb = to_device(pretrain_batch(c, videos, seed), "cpu")
    loss = pretrain_loss_fn()

    def step(m):
        loss(m, mb).backward()

    return model, step


def compiled_bytes(model, step, fullgraph: bool = True) -> dict:
    "Inductor's count of the bytes read and written by the kernels of the compiled forward and backward."
    import torch._inductor.metrics as metrics

    torch._dynamo.reset()
    metrics.reset()
    torch._logging.set_logs(inductor_metrics=True)  # makes inductor count bytes as it generates code
    # counted, not printed: a logger's filter drops its records before any handler or parent sees them (torch resets
    # the artifact logger's handlers and propagation when inductor is imported and when logs are set)
    quiet, drop = logging.getLogger("torch._inductor.compile_fx.__inductor_metrics"), (lambda record: False)
    quiet.addFilter(drop)
    try:
        step(torch.compile(model, fullgraph=fullgraph))
    finally:
        torch._logging.set_logs()
        quiet.removeFilter(drop)
    out = dict(matmul=0, memory=0)
    for node, n4 in metrics.nodes_num_elem:  # (scheduler node, bytes // 4)
        name = getattr(node.node, "python_kernel_name", None) or "" if type(node).__name__.startswith("Extern") else ""
        out["matmul" if name and is_matmul(name) else "memory"] += 4 * n4
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--token-map", type=int, default=8, help="h = w of the token map (16: S = 128)")
    p.add_argument("--clip-len", type=int, default=5)
    p.add_argument("--videos", type=int, default=2, help="clip pairs per step")
    p.add_argument("--no-compile", action="store_true", help="eager count only")
    p.add_argument(
        "--graph-breaks", action="store_true", help="compile without fullgraph (for kits older than issue 20)"
    )
    p.add_argument(
        "--math-attention",
        action="store_true",
        help="keep the preset's attention dropout: the CPU then "
        "runs SDPA's math path (L x L probabilities in memory), which no GPU run takes",
    )
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, step = make_step(a.preset, a.token_map, a.clip_len, a.videos, fused_attention=not a.math_attention)
    step(model)  # warm-up (lazy init)
    model.zero_grad()
    with EagerBytes() as e:
        step(model)
    res = {k: getattr(a, k) for k in ("preset", "token_map", "clip_len", "videos")}  # the workload, then the figures
    res.update(
        torch=torch.__version__,
        attention="math" if a.math_attention else "fused",
        eager={k: v / a.videos for k, v in e.split().items()},
        eager_top={k: v / a.videos for k, v in sorted(e.ops.items(), key=lambda kv: -kv[1])[:12]},
    )
    if not a.no_compile:
        t = time.perf_counter()
        res["compiled"] = {k: v / a.videos for k, v in compiled_bytes(model, step, not a.graph_breaks).items()}
        res["compile_s"] = round(time.perf_counter() - t, 1)
    print(
        f"bytes per pre-training video, {a.preset}, T = {a.clip_len}, {a.token_map} x {a.token_map} tokens, fp32 on "
        "the CPU, "
        f"{res['attention']} attention"
    )
    print("| | matmul-like | memory-bound | total |\n|---|---|---|---|")
    for k in ("eager", "compiled"):
        if k in res:
            r = res[k]
            print(
                f"| {k} | {r['matmul'] / 1e6:.1f} MB | {r['memory'] / 1e6:.1f} MB | "
                f"{(r['matmul'] + r['memory']) / 1e6:.1f} MB |"
            )
    if "compiled" in res:
        print(f"memory-bound bytes, compiled / eager: {res['compiled']['memory'] / res['eager']['memory']:.2f}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
