"""A speed model of training per preset, for a GPU run to confirm or refute: FLOPs and bytes moved per sample counted
on fake tensors, then videos/s and MFU predicted on an H100 SXM and an A100, eager and compiled, and the memory of a
training step at the default micro-batch.

    .venv/bin/python benchmarks/roofline.py [--presets tiny small base large_half] [--out
    benchmarks/results/roofline.json]

Workloads (`WORKLOADS`): pre-training at T = 5 on a 16 x 16 token map (frame size 128), one sample = one video = two
clips, the step `vimpac-pretrain` runs (`bench_utils.pretrain_loss_fn`: block masks from the host, the loop's loss
and InfoNCE); fine-tuning at T = 10 on 32 x 32 tokens (frame size 256, Table 12), one sample = one clip,
`VimpacForVideoClassification` with 101 classes, forward and backward of its cross-entropy.

What is counted (`count`, one forward and backward of `COUNT_SAMPLES` samples under `FakeTensorMode`: shapes and
dtypes, no values, no memory, seconds per preset):
- FLOPs: `torch.utils.flop_counter.FlopCounterMode` (matmuls and attention; 2 per multiply-add); checked against
  `vimpac.model.model_flops`.
- bytes: every aten op's tensor inputs and outputs (`traffic.EagerBytes`; views, allocations and metadata are free),
  split by `traffic.is_matmul` into matmul-like kernels and the memory-bound rest: what eager mode moves.
- precision: bf16 autocast, the GPU default. Autocast runs on fake CPU tensors with the CPU's autocast policy, and
  `GpuStandIns` adds CUDA's fp32 list (LayerNorm, softmax, the losses run in fp32 under CUDA's autocast; `CUDA_FP32`):
  a tensor autocast makes bf16 counts 2 bytes per element, its casts are counted, and what stays fp32 (the residual
  stream after LayerNorm, the CLS head, the InfoNCE, the losses) counts 4. `--precision fp32` gives the fp32 count.
- attention (`--attention`, `ATTENTION`): each `scaled_dot_product_attention` call is counted as the backend that
  runs it on a GPU: by default the kit's pin per row shape (`vimpac.model.attention_backends`: math for the short
  temporal rows, memory-efficient for the rest, measured fastest on an H100), or one backend for every call. A fused
  backend (flash, memory-efficient, cuDNN) is one kernel (`_FusedAttention`: reads q, k, v and writes the output and
  its log-sum-exp, the reverse in backward) plus the fp32 query-gradient accumulator its backward writes and reads
  (`attention_workspace`: flash pads rows to 128 positions, memory-efficient to 64); math is its own ops (scores,
  softmax, dropout masks), counted as they dispatch. Eager and compiled are predicted with the same backends.
  `--path cpu` counts what the CPU runs instead (then the count is `traffic.py`'s eager count on real tensors).
- fused paths (`--fused`, `FUSED`; none by default): kernels of well-kept libraries that the kit does not use, each
  counted as one kernel in place of the ops it replaces, so that a GPU run can decide whether it pays: the token head's
  linear layer and cross-entropy (`linear_ce`, Liger), residual + dropout + LayerNorm (`add_ln`, flash-attn's
  `layer_norm_fn`), the MLP's GELU and bias gradient in GEMM epilogues (`gelu_epilogue`, cuBLASLt as Transformer
  Engine uses it). `--fused each` predicts each alone and all together. `add_ln` changes eager only: inductor fuses
  that group itself, so the compiled prediction is counted without it.
- compiled: inductor's byte count after fusion cannot run per preset in a test's time, so the memory-bound bytes of
  the compiled step are eager's times a measured ratio, compiled / eager memory-bound bytes, read from a
  `benchmarks/results/traffic_<preset>_cpu.json` written by `traffic.py` (fp32, the preset's own file, else Small's,
  else any); the output names the file and the ratio used. Matmul-like bytes are taken as unchanged. The ratio is
  measured in fp32 with the CPU's fused attention kernel (`traffic.py` sets the attention-probability dropout to 0
  for it, as a GPU's flash kernel applies it inside); applied to the bf16 GPU count it assumes the rest fuses in the
  same proportion.

The time model of one sample on a GPU (`predict`): matmul-like kernels at max(FLOPs / (peak x MATMUL_EFFICIENCY),
bytes / (bandwidth x MEMORY_EFFICIENCY)), plus memory-bound bytes / (bandwidth x MEMORY_EFFICIENCY); FLOPs outside
matmuls, launch overhead, the optimizer step and the data loader are left out (so the prediction is an upper bound of
what that traffic allows). MFU = FLOPs per sample x samples/s / peak. Memory: the saved bytes per sample of this
count (`torch.autograd.graph.saved_tensors_hooks`, each storage once, the parameters' own left out), and the
micro-batch the kit itself plans on an 80 GiB GPU with its predicted peak (`kit_plan`: `vimpac.memory.memory_model`,
which adds the weights, gradients and AdamW moments, a margin and a reserve).
"""

import argparse, contextlib, copy, functools, json, sys
from pathlib import Path
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.flop_counter import FlopCounterMode

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_utils import pretrain_batch, pretrain_loss_fn, to_device  # noqa: E402
from traffic import EagerBytes  # noqa: E402
from vimpac.memory import CUDA_FP32, attention_workspace, call_in_fp32, pinned_attention  # noqa: E402  (the kit's memory plan counts them too)

PRESET_ORDER = ("tiny", "small", "base", "large_half")
# dense bf16 tensor-core peak (FLOP/s) and HBM bandwidth (bytes/s) from the vendors' data sheets
GPUS = {"H100 SXM": dict(peak_flops=989e12, bandwidth=3.35e12), "A100": dict(peak_flops=312e12, bandwidth=2.0e12)}
# Share of the dense peak that this model's bf16 matmuls reach: cuBLAS GEMMs of thousands of rows by 512 to 4096
# columns run at 60-75% of peak on an H100; the short attention rows (5 frames, 16 rows or columns) run far lower
# but hold under 2% of the FLOPs. 0.6 is the round figure below the GEMM range.
MATMUL_EFFICIENCY = 0.6
# Share of the HBM bandwidth that elementwise, copy and reduction kernels reach at these sizes (tens of MB each):
# 70-85% in bandwidth tests on an A100 or H100; 0.75 is the middle.
MEMORY_EFFICIENCY = 0.75
# fp32 weights (4), fp32 gradients (4), AdamW's exp_avg and exp_avg_sq (4 + 4)
OPTIMIZER_BYTES_PER_PARAM = 16
WORKLOADS = {
    "pretrain": dict(clip_len=5, token_map=16, sample="video (2 clips)"),
    "finetune": dict(clip_len=10, token_map=32, num_classes=101, sample="clip"),
}
COUNT_SAMPLES = 2  # samples per counted step (the CLS head's BatchNorm needs 2 clips; InfoNCE 2 videos)


class RooflineError(ValueError):
    "A request the model cannot answer (an unknown preset or workload): its message is one line for the user."


def check_presets(presets) -> list[str]:
    "`presets` as a list of known preset names; raises `RooflineError` naming the known ones for any other."
    from vimpac.model import PRESETS

    bad = [p for p in presets if p not in PRESETS]
    if bad:
        raise RooflineError(f"preset: expected one of {', '.join(PRESETS)}, got {', '.join(map(repr, bad))}")
    return list(presets)


class SavedBytes:
    """`saved_tensors_hooks` that total the bytes autograd saves for backward, each storage once (by
    `untyped_storage()._cdata`, the tensors kept referenced so that no address is reused), leaving out `exclude`d
    storages (the parameters: the kit's memory model counts them, `kit_plan`)."""

    def __init__(self, exclude=()):
        self.seen, self.keep, self.total = {s.untyped_storage()._cdata for s in exclude}, [], 0

    paused = False

    def pack(self, t):
        if self.paused:
            return t
        s = t.untyped_storage()
        if s._cdata not in self.seen:
            self.seen.add(s._cdata)
            self.keep.append(t)
            self.total += s.nbytes()
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


@contextlib.contextmanager
def uncounted(*counters):
    "Pause the counters (`Bytes`, `SavedBytes`) inside the block: the ops a stood-in kernel runs for its values."
    for c in counters:
        c.paused = True
    try:
        yield
    finally:
        for c in counters:
            c.paused = False


class Bytes(EagerBytes):
    "`traffic.EagerBytes` that can be paused (the inside of a fused kernel stood in) and credited a kernel's own bytes."

    paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.paused:
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)

    def add(self, name: str, n: int):
        self.ops[name] = self.ops.get(name, 0) + n


# What each attention backend is counted as (`--attention`): "pinned" is the kit's own choice per row shape
# (`vimpac.model.attention_backends` on CUDA: math for the short temporal rows, else memory-efficient)
ATTENTION = ("pinned", "flash", "efficient", "cudnn", "math")


def backend_of(attention: str, length: int, head_dim: int) -> str:
    "The backend (`ATTENTION` but 'pinned') counted for a call of rows of `length` x `head_dim`."
    return pinned_attention(length, head_dim) if attention == "pinned" else attention


def _nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


class _FusedAttention(torch.autograd.Function):
    """`scaled_dot_product_attention` counted as one fused kernel (flash, memory-efficient or cuDNN attention on a
    GPU): forward reads q, k, v (and the mask) and writes the output and its log-sum-exp (fp32, one per query row);
    backward reads those and the output's gradient and writes dq, dk, dv, and writes and reads its `workspace` bytes
    (`attention_workspace`). The math path computes the values and the FLOPs (FlopCounterMode still counts its
    matmuls); its own ops' bytes and saved tensors are not counted."""

    @staticmethod
    def forward(ctx, q, k, v, mask, dropout_p, moved, saved, workspace=0):
        with uncounted(moved, saved):
            with torch.enable_grad():
                inner = tuple(t.detach().requires_grad_() for t in (q, k, v))
                out = F.scaled_dot_product_attention(*inner, attn_mask=mask, dropout_p=dropout_p)
        ctx.inner, ctx.moved, ctx.mask, ctx.workspace = (*inner, out), moved, mask, workspace
        ctx.lse = q.numel() // q.shape[-1] * 4
        o = out.detach()
        moved.add("_scaled_dot_product_fused_attention", _nbytes(q, k, v, o, mask) + ctx.lse)
        ctx.save_for_backward(q, k, v, o)
        saved.total += ctx.lse
        return o

    @staticmethod
    def backward(ctx, do):
        *inner, out = ctx.inner
        moved = ctx.moved
        with uncounted(moved):
            dq, dk, dv = torch.autograd.grad(out, inner, do)
        moved.add(
            "_scaled_dot_product_fused_attention_backward",
            _nbytes(*ctx.saved_tensors, do, dq, dk, dv, ctx.mask) + ctx.lse + 2 * ctx.workspace,
        )
        return dq, dk, dv, None, None, None, None, None


# The fused paths the roofline can count (`--fused`), each as the kernels of a well-kept library would run it:
# - "linear_ce": the token head's last linear layer and the cross-entropy over the vocabulary as one kernel (Liger's
#   fused linear cross-entropy);
# - "add_ln": each residual + dropout + LayerNorm of the post-LN blocks as one kernel each way (flash-attn's Triton
#   `layer_norm_fn` with `residual` and `dropout_p`);
# - "gelu_epilogue": the MLP's first linear layer with its GELU in the GEMM's epilogue, the GELU's gradient in the
#   epilogue of the GEMM that makes its input's gradient and the bias gradient in the weight-gradient GEMM
#   (cuBLASLt's GELU_AUX_BIAS, DGELU and BGRAD epilogues, as Transformer Engine's fused MLP runs them).
FUSED = ("linear_ce", "add_ln", "gelu_epilogue")


class _FusedLinearCE(torch.autograd.Function):
    """The token head's logits and their cross-entropy counted as one fused kernel, as Liger's fused linear
    cross-entropy runs them: in the forward it reads the rows u (M, D), the vocabulary's weight (V, D), the bias and
    the targets, makes the logits chunk by chunk (each chunk written and read once, bf16: 2 x M x V x 2 bytes) and
    writes the loss, and the gradients du, dW and db, which it keeps for the backward (so they count as saved); the
    backward scales them by the loss's gradient (read and written once). No (M, V) logits are kept for the backward.
    The values and FLOPs: the unfused ops (FlopCounterMode still counts the matmuls); their bytes are not counted."""

    @staticmethod
    def forward(ctx, u, w, b, targets, reduction, moved, saved):
        with uncounted(moved, saved):
            with torch.enable_grad():
                inner = tuple(t.detach().requires_grad_() for t in (u, w, b))
                loss = F.cross_entropy(F.linear(*inner).float(), targets, reduction=reduction)
        ctx.inner, ctx.loss, ctx.moved = inner, loss, moved
        M, V = targets.numel(), w.shape[0]
        grads = 2 * _nbytes(u) + 4 * (w.numel() + b.numel())  # du in u's dtype, dW and db in fp32
        ctx.grads = grads
        moved.add("_fused_linear_cross_entropy", _nbytes(u, w, b, targets) + 4 * (M + 1) + 2 * (2 * M * V) + grads)
        saved.total += grads
        return loss.detach()

    @staticmethod
    def backward(ctx, grad):
        moved = ctx.moved
        with uncounted(moved):
            du, dw, db = torch.autograd.grad(ctx.loss, ctx.inner, grad)
        moved.add("_fused_linear_cross_entropy_backward", 2 * ctx.grads)
        return du, dw, db, None, None, None, None


class _FusedAddNorm(torch.autograd.Function):
    """`layer_norm(x + dropout(h))` of a post-LN block counted as one fused kernel each way, as flash-attn's
    `layer_norm_fn(h, w, b, residual=x, dropout_p=p, residual_in_fp32=True)` runs it: the forward reads h (the
    sublayer's output) and the residual x, writes the sum s (kept for the backward) and the output y, in x's dtype
    (fp32 under CUDA's autocast, as the kit's LayerNorm output: the same numerics), and the row statistics (fp32 mean
    and 1/std); the dropout mask is drawn again in the backward from its seed, not stored. The backward reads dy, s and
    the statistics and writes the gradients of h and x. The values and FLOPs: the unfused ops; their bytes are not
    counted."""

    @staticmethod
    def forward(ctx, h, x, w, b, p, eps, moved, saved):
        with uncounted(moved, saved):
            with torch.enable_grad(), torch.autocast("cpu", enabled=False):
                inner = tuple(t.detach().requires_grad_() for t in (h, x, w, b))
                s = inner[1] + F.dropout(inner[0], p, training=True)
                y = F.layer_norm(s, s.shape[-1:], inner[2], inner[3], eps)
        ctx.inner, ctx.y, ctx.moved = inner, y, moved
        stats = 2 * 4 * (s.numel() // s.shape[-1])  # mean and 1/std per row
        ctx.bytes = _nbytes(s, w, b) + stats  # read again by the backward
        moved.add("_fused_add_layer_norm", _nbytes(h, x, w, b, s, y) + stats)
        saved.total += _nbytes(s) + stats
        return y.detach()

    @staticmethod
    def backward(ctx, dy):
        moved = ctx.moved
        with uncounted(moved):
            dh, dx, dw, db = torch.autograd.grad(ctx.y, ctx.inner, dy)
        moved.add("_fused_add_layer_norm_backward", ctx.bytes + _nbytes(dy, dh, dx, dw, db))
        return dh, dx, dw, db, None, None, None, None


class _LinearGelu(torch.autograd.Function):
    """`gelu(linear(x, W, b))` with the GELU in the GEMM's epilogue (cuBLASLt's GELU_AUX_BIAS): the GEMM is counted as
    it dispatches (its FLOPs, its reads and its write of the pre-activation y, which the epilogue keeps as the
    backward's auxiliary input) and the epilogue's write of the activation is credited to the GEMM (`addmm`), so no
    memory-bound GELU kernel runs. Backward: the GELU's gradient is the epilogue of the GEMM that made the activation's
    gradient (DGELU: its read of y is credited to `mm`), and the bias gradient that of the weight-gradient GEMM
    (BGRAD: the bias gradient's reduction, the `sum` that `addmm`'s backward dispatches, is taken off the count)."""

    @staticmethod
    def forward(ctx, x, w, b, moved, saved):
        with torch.enable_grad():  # W and b themselves: autocast's cast of them is the one cached for other calls
            inner = (x.detach().requires_grad_(), w, b)
            y = F.linear(*inner)  # counted: the GEMM, its casts under autocast, what it saves
            with uncounted(moved, saved):
                a = F.gelu(y)
        ctx.inner, ctx.y, ctx.a, ctx.moved = inner, y, a, moved
        moved.add("addmm", _nbytes(a))  # the epilogue's second write
        saved.total += _nbytes(y)  # the auxiliary pre-activation, kept for the backward
        return a.detach()

    @staticmethod
    def backward(ctx, da):
        moved = ctx.moved
        with uncounted(moved):
            (dy,) = torch.autograd.grad(ctx.a, ctx.y, da)
        moved.add("mm", _nbytes(ctx.y))  # DGELU: the epilogue reads y
        before = moved.ops.get("sum", 0)
        dx, dw, db = torch.autograd.grad(ctx.y, ctx.inner, dy)
        moved.ops["sum"] = before  # BGRAD: the bias gradient comes out of the weight-gradient GEMM
        return dx, dw, db, None, None


class GpuStandIns(TorchFunctionMode):
    """While counting on fake CPU tensors, what a GPU does differently: `fused_attention` counts each
    `scaled_dot_product_attention` as one fused kernel (`_FusedAttention`), `cuda_autocast` runs the functions of
    CUDA's fp32 autocast list (`CUDA_FP32`: LayerNorm, softmax, the losses) in fp32 under autocast. With
    `vocabulary_weight` (the token embedding, whose first V rows the token head's last linear layer reads), that layer
    and the cross-entropy of its logits count as one fused kernel (`_FusedLinearCE`): the logits it returns are
    detached (the mask accuracy's argmax reads them, counted), and the cross-entropy of them, or of their fp32 copy,
    is the fused kernel's loss. With `add_norm`, each `layer_norm(x + dropout(h))` counts as one kernel
    (`_FusedAddNorm`; the dropout's and the add's bytes, counted as they ran, are taken off when their LayerNorm
    comes: a post-LN model, whose sum feeds that LayerNorm only). With `gelu_weights` (the MLPs' first linear
    layers' weights), each of those layers and its GELU count as one GEMM with epilogues (`_LinearGelu`)."""

    def __init__(
        self,
        moved: Bytes,
        saved: "SavedBytes",
        fused_attention: bool = True,
        cuda_autocast: bool = True,
        attention: str = "pinned",
        vocabulary_weight: torch.Tensor | None = None,
        add_norm: bool = False,
        gelu_weights: tuple = (),
    ):
        super().__init__()
        self.moved, self.saved, self.fused, self.cuda = moved, saved, fused_attention, cuda_autocast
        self.attention, self.calls = attention, {}
        self.vocab = None if vocabulary_weight is None else vocabulary_weight.untyped_storage()._cdata
        self.heads = {}  # id of a logits tensor → (u, W, b), the fused kernel's inputs
        self.add_norm, self.pending = add_norm, {}  # id of a dropout's output or of its sum → what fusing it needs
        self.gelu, self.activated = {w.untyped_storage()._cdata for w in gelu_weights}, {}

    def _counted(self, func, args, kwargs):
        "func(*args, **kwargs) and what it added to the count: ({op: bytes}, saved bytes)."
        ops, total = dict(self.moved.ops), self.saved.total
        out = func(*args, **kwargs)
        return (
            out,
            {k: v - ops.get(k, 0) for k, v in self.moved.ops.items() if v != ops.get(k, 0)},
            (self.saved.total - total),
        )

    def _fused_add_norm(self, func, args, kwargs):
        "A dropout, its residual add and their LayerNorm, as `_FusedAddNorm` at the LayerNorm; else None."
        if func is F.dropout:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            out, ops, kept = self._counted(func, args, kwargs)
            self.pending[id(out)] = (out, args[0], None, p, ops, kept)
            return out
        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__) and len(args) == 2 and not kwargs:
            a, b = args
            d = next((t for t in (b, a) if id(t) in self.pending and self.pending[id(t)][2] is None), None)
            if d is None:
                return None
            _, h, _, p, ops, kept = self.pending.pop(id(d))
            out, more, kept_more = self._counted(func, args, kwargs)
            for k, v in more.items():
                ops[k] = ops.get(k, 0) + v
            self.pending[id(out)] = (out, h, a if d is b else b, p, ops, kept + kept_more)
            return out
        if func is F.layer_norm and id(args[0]) in self.pending and self.pending[id(args[0])][2] is not None:
            _, h, x, p, ops, kept = self.pending.pop(id(args[0]))
            for k, v in ops.items():  # the unfused dropout and add, counted as they ran, replaced by the kernel
                self.moved.ops[k] -= v
            self.saved.total -= kept
            w, b = (args[i] if len(args) > i else kwargs.get(n) for i, n in ((2, "weight"), (3, "bias")))
            eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
            return _FusedAddNorm.apply(h, x, w, b, p, eps, self.moved, self.saved)
        return None

    def _linear_gelu(self, func, args, kwargs):
        "An MLP's first linear layer and its GELU, as `_LinearGelu`; else None."
        if func is F.linear and len(args) == 3 and args[1].untyped_storage()._cdata in self.gelu:
            a = _LinearGelu.apply(*args, self.moved, self.saved)
            self.activated[id(a)] = a
            return a
        if func is F.gelu and id(args[0]) in self.activated:
            return self.activated.pop(id(args[0]))  # the epilogue applied it
        return None

    def _fused_head(self, func, args, kwargs):
        "The token head's linear layer, its logits' fp32 copy and their cross-entropy, as `_FusedLinearCE`; else None."
        if func is F.linear and len(args) == 3 and args[1].untyped_storage()._cdata == self.vocab:
            with torch.no_grad():
                with uncounted(self.moved):
                    logits = func(*args)
            self.heads[id(logits)] = (logits, *args)
            return logits
        if func is torch.Tensor.float and id(args[0]) in self.heads:
            with torch.no_grad():
                copy = args[0].float()
            self.heads[id(copy)] = (copy, *self.heads[id(args[0])][1:])
            return copy
        if func is F.cross_entropy and id(args[0]) in self.heads:
            _, u, w, b = self.heads[id(args[0])]
            return _FusedLinearCE.apply(u, w, b, args[1], kwargs.get("reduction", "mean"), self.moved, self.saved)
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.vocab is not None and (fused := self._fused_head(func, args, kwargs)) is not None:
            return fused
        if self.gelu and (fused := self._linear_gelu(func, args, kwargs)) is not None:
            return fused
        if self.add_norm and (fused := self._fused_add_norm(func, args, kwargs)) is not None:
            return fused
        if self.fused and func is F.scaled_dot_product_attention:
            q, k, v, *rest = args
            mask = kwargs.get("attn_mask", rest[0] if rest else None)
            backend = backend_of(self.attention, q.shape[-2], q.shape[-1])
            self.calls[backend] = self.calls.get(backend, 0) + 1
            if backend == "math":  # the math path's own ops, counted as they dispatch (scores, softmax, dropout)
                from torch.nn.attention import SDPBackend, sdpa_kernel

                with sdpa_kernel([SDPBackend.MATH]):
                    return func(*args, **kwargs)
            ws = attention_workspace(backend, q.shape[0], *q.shape[1:])
            return _FusedAttention.apply(q, k, v, mask, kwargs.get("dropout_p", 0.0), self.moved, self.saved, ws)
        if self.cuda and func in CUDA_FP32 and torch.is_autocast_enabled("cpu"):
            return call_in_fp32(func, args, kwargs)
        return func(*args, **kwargs)


def count(
    preset: str,
    workload: str = "pretrain",
    precision: str = "bf16",
    samples: int = COUNT_SAMPLES,
    gpu: bool = True,
    attention: str = "pinned",
    fused: tuple = (),
) -> dict:
    """FLOPs, bytes and saved bytes per sample of one training step (`_count`, which says what each argument and
    figure is), each set of arguments counted once per process (`--fused each` asks for some counts twice: the step
    without `add_ln` for its compiled prediction); a copy, the caller's to change. Raises what `_count` raises."""
    return copy.deepcopy(_count(preset, workload, precision, samples, gpu, attention, tuple(fused)))


@functools.lru_cache(maxsize=None)
def _count(preset: str, workload: str, precision: str, samples: int, gpu: bool, attention: str, fused: tuple) -> dict:
    """FLOPs, bytes and saved bytes per sample of one training step of `preset` on `workload` (`WORKLOADS`), counted on
    fake tensors at `precision` ("bf16": autocast, see the module's docstring; "fp32"). `gpu`: with the GPU's fused
    attention and CUDA's fp32 autocast list stood in (`GpuStandIns`, each attention call as `attention`'s backend,
    `ATTENTION`, and the paths of `fused`, `FUSED`, as one kernel each); False: what the CPU runs (`traffic.py`'s
    count). Returns dict(flops, matmul_bytes, memory_bytes,
    saved_bytes (per sample), params, samples, flops_by_op, bytes_by_op (aten op or stood-in kernel → bytes, most
    first), attention_calls (backend → calls)).
    Raises `RooflineError` for an unknown preset or workload."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from vimpac.model import VimpacConfig, VimpacForPreTraining, VimpacForVideoClassification

    check_presets([preset])
    if workload not in WORKLOADS:
        raise RooflineError(f"workload: expected one of {', '.join(WORKLOADS)}, got {workload!r}")
    unknown = [f for f in fused if f not in FUSED]
    if unknown:
        raise RooflineError(f"fused: expected paths of {', '.join(FUSED)}, got {', '.join(map(repr, unknown))}")
    w, amp = WORKLOADS[workload], torch.bfloat16 if precision == "bf16" else None
    c = VimpacConfig.from_preset(preset, max_clip_len=w["clip_len"], token_map=(w["token_map"],) * 2)
    if "add_ln" in fused and c.norm != "post":
        raise RooflineError(f"fused add_ln: counted for post-LN models only; {preset} is {c.norm}-LN")
    host = pretrain_batch(c, samples) if workload == "pretrain" else None
    with FakeTensorMode() as fm:  # the model's token-id check skips fake tensors (no values)
        if workload == "pretrain":
            model = VimpacForPreTraining(c).train()
            mb = to_device([fm.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in host], "cpu")
            loss_fn = pretrain_loss_fn(amp_dtype=amp)
            forward = lambda: loss_fn(model, mb)  # noqa: E731
        else:
            model = VimpacForVideoClassification(c, w["num_classes"]).train()
            tokens = torch.zeros(samples, w["clip_len"], *c.token_map, dtype=torch.long)
            labels = torch.zeros(samples, dtype=torch.long)

            def forward():
                with torch.autocast("cpu", dtype=amp, enabled=amp is not None):
                    return model(tokens, labels, has_pad=False).loss

        params = list(model.parameters())
        saved, moved = SavedBytes(exclude=params), Bytes()
        vocab = model.backbone.embeddings.token.weight if "linear_ce" in fused and workload == "pretrain" else None
        gelu = tuple(m.fc1.weight for m in model.modules() if hasattr(m, "fc1")) if "gelu_epilogue" in fused else ()
        stand_ins = (
            GpuStandIns(
                moved,
                saved,
                attention=attention,
                vocabulary_weight=vocab,
                add_norm="add_ln" in fused,
                gelu_weights=gelu,
            )
            if gpu
            else contextlib.nullcontext()
        )
        with FlopCounterMode(display=False) as flops, moved:
            with saved.hooks(), stand_ins:
                loss = forward()
            loss.backward()
    split = moved.split()
    return dict(
        flops=flops.get_total_flops() / samples,
        matmul_bytes=split["matmul"] / samples,
        memory_bytes=split["memory"] / samples,
        saved_bytes=saved.total / samples,
        params=sum(p.numel() for p in params),
        samples=samples,
        flops_by_op={str(k): v / samples for k, v in flops.get_flop_counts()["Global"].items()},
        bytes_by_op={k: v / samples for k, v in sorted(moved.ops.items(), key=lambda kv: -kv[1]) if v},
        attention_calls=dict(stand_ins.calls) if gpu else {},
    )


def kit_flops(preset: str, workload: str) -> float | None:
    """The kit's own formula for the FLOPs of a pre-training video (2 x `vimpac.model.model_flops` of a clip at the
    workload's size), the count's cross-check; None for fine-tuning (its formula has the pre-training heads) or a kit
    without it."""
    try:
        from vimpac.model import VimpacConfig, model_flops
    except ImportError:
        return None
    if workload != "pretrain":
        return None
    w = WORKLOADS[workload]
    return 2 * model_flops(
        VimpacConfig.from_preset(preset, max_clip_len=w["clip_len"], token_map=(w["token_map"],) * 2), w["clip_len"]
    )


def compiled_ratios(folder=HERE / "results") -> dict:
    """{preset: (compiled / eager memory-bound bytes, file name, token map, T)} from the `traffic_*.json` files in
    `folder` that have a compiled count; a count with the fused attention kernel (`traffic.py`'s default, the GPU's)
    is preferred to one with the CPU's math attention."""
    out, fused = {}, {}
    for f in sorted(Path(folder).glob("traffic_*.json")):
        r = json.loads(f.read_text())
        if "compiled" in r and r.get("eager", {}).get("memory") and not fused.get(r["preset"]):
            out[r["preset"]] = (
                r["compiled"]["memory"] / r["eager"]["memory"],
                f.name,
                r.get("token_map"),
                r.get("clip_len"),
            )
            fused[r["preset"]] = r.get("attention") == "fused"  # the GPU's attention kernel: preferred
    return out


def pick_ratio(preset: str, ratios: dict) -> tuple[float, str]:
    "The compiled / eager ratio for `preset` (its own, else Small's, else any) and a sentence saying where it is from."
    key = preset if preset in ratios else "small" if "small" in ratios else next(iter(ratios), None)
    if key is None:
        return 1.0, "no traffic_*.json with a compiled count: compiled taken as eager"
    r, name, tm, T = ratios[key]
    return r, f"{r:.3f} from {name} ({key}, {tm}x{tm} tokens, T={T}, fp32 on a CPU)" + (
        "" if key == preset else f", not {preset}'s own"
    )


def predict(flops: float, matmul_bytes: float, memory_bytes: float, gpu: dict) -> dict:
    """Samples/s and MFU of a step that does `flops` matmul FLOPs and moves `matmul_bytes` + `memory_bytes` bytes per
    sample on `gpu` (dict(peak_flops, bandwidth)): see the module's docstring. More bytes never give more samples/s."""
    bw = gpu["bandwidth"] * MEMORY_EFFICIENCY
    t = max(flops / (gpu["peak_flops"] * MATMUL_EFFICIENCY), matmul_bytes / bw) + memory_bytes / bw
    return dict(per_s=1 / t, mfu=flops / t / gpu["peak_flops"], seconds=t)


GPU_BYTES = 80 * 2**30  # an H100 SXM or A100 80 GB


def plan_setup(preset: str, workload: str, checkpointing: bool = False):
    """(make_model, make_inputs, training config, least micro-batch) of `preset` on `workload` (`WORKLOADS`), as
    `pretrain` / `finetune` plan it: the model, the forward's inputs its memory plan is counted on
    (`pretrain_memory_inputs`, `finetune_memory_inputs`), the workload's default config at its T."""
    from vimpac.model import VimpacConfig, VimpacForPreTraining, VimpacForVideoClassification

    w = WORKLOADS[workload]
    c = VimpacConfig.from_preset(
        preset, max_clip_len=w["clip_len"], token_map=(w["token_map"],) * 2, gradient_checkpointing=checkpointing
    )
    if workload == "pretrain":
        from vimpac.pretrain import PretrainConfig, pretrain_memory_inputs

        cfg = PretrainConfig(clip_len=w["clip_len"])
        return (lambda: VimpacForPreTraining(c)), pretrain_memory_inputs(c, cfg), cfg, 2
    from vimpac.finetune import FinetuneConfig, finetune_memory_inputs

    cfg = FinetuneConfig(clip_len=w["clip_len"])
    return (lambda: VimpacForVideoClassification(c, w["num_classes"])), finetune_memory_inputs(c, cfg), cfg, 1


def kit_plan(preset: str, workload: str, precision: str = "bf16", device_bytes: int = GPU_BYTES) -> tuple[int, float]:
    """(micro-batch, predicted peak bytes) that the kit plans for one process on a GPU with `device_bytes` free, at
    the workload's default global batch: `vimpac.memory.memory_model` of the model (fake tensors) and `plan_steps`, as
    `pretrain` / `finetune` do on a GPU (`micro_batch_size="auto"`)."""
    from vimpac.engine import plan_steps
    from vimpac.memory import memory_model

    make_model, make_inputs, cfg, least = plan_setup(preset, workload)
    mm = memory_model(make_model(), make_inputs, torch.bfloat16 if precision == "bf16" else None, cuda=True)
    micro = plan_steps(cfg, 10**6, 1, mm, device_bytes, least=least)[1]
    return micro, mm.peak(micro)


def roofline(
    presets=PRESET_ORDER,
    workloads=tuple(WORKLOADS),
    precision: str = "bf16",
    traffic_dir=HERE / "results",
    gpu_path: bool = True,
    attention: str = "pinned",
    plan: bool = True,
    fused: tuple = (),
) -> list[dict]:
    """One row per (preset, workload): the counts (`count`, with the GPU's stand-ins unless `gpu_path` is False), the
    compiled ratio used, the predictions per GPU (see `predict`) with the `fused` paths (`FUSED`) and, with `plan`,
    the kit's micro-batch on 80 GiB
    (`kit_plan`; None without)."""
    presets, ratios, rows = check_presets(presets), compiled_ratios(traffic_dir), []
    for wl in workloads:
        for p in presets:
            c = count(p, wl, precision, gpu=gpu_path, attention=attention, fused=tuple(fused))
            ratio, source = pick_ratio(p, ratios)
            unfused = c  # what inductor starts from: add_ln is what it fuses already, so compiled counts without it
            if "add_ln" in fused:
                rest = tuple(f for f in fused if f != "add_ln")
                unfused = count(p, wl, precision, gpu=gpu_path, attention=attention, fused=rest)
            c["kit_flops"] = kit_flops(p, wl)
            row = dict(
                preset=p,
                workload=wl,
                sample=WORKLOADS[wl]["sample"],
                precision=precision,
                path="gpu" if gpu_path else "cpu",
                attention=attention if gpu_path else "cpu",
                fused=list(fused),
                **c,
                compiled_memory_bytes=unfused["memory_bytes"] * ratio,
                compiled_ratio=ratio,
                compiled_ratio_source=source,
                **dict(
                    zip(("micro_batch", "memory_at_micro_batch"), kit_plan(p, wl, precision) if plan else (None,) * 2)
                ),
            )
            for g, spec in GPUS.items():
                row[g] = dict(
                    eager=predict(c["flops"], c["matmul_bytes"], c["memory_bytes"], spec),
                    compiled=predict(c["flops"], c["matmul_bytes"], row["compiled_memory_bytes"], spec),
                )
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    "The rows as a markdown table (per sample: GFLOP, GB moved, predicted samples/s and MFU, GiB at the default"
    "micro-batch)."
    gpus = list(GPUS)
    head = (
        ["preset", "workload", "GFLOP", "GB matmul", "GB memory-bound (eager / compiled)"]
        + [f"{g} eager / compiled per s (MFU)" for g in gpus]
        + ["saved GB per sample", "micro-batch on 80 GiB: GiB"]
    )
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        preds = [
            f"{r[g]['eager']['per_s']:.0f} ({100 * r[g]['eager']['mfu']:.0f}%) / {r[g]['compiled']['per_s']:.0f} "
            f"({100 * r[g]['compiled']['mfu']:.0f}%)"
            for g in gpus
        ]
        mem = f"{r['micro_batch']}: {r['memory_at_micro_batch'] / 2**30:.1f}"
        out.append(
            f"| {r['preset']} | {r['workload']} ({r['sample']}) | {r['flops'] / 1e9:.1f} | "
            f"{r['matmul_bytes'] / 1e9:.2f} | "
            f"{r['memory_bytes'] / 1e9:.2f} / {r['compiled_memory_bytes'] / 1e9:.2f} | "
            + " | ".join(preds)
            + f" | {r['saved_bytes'] / 1e9:.2f} | {mem} |"
        )
    return "\n".join(out)


def backend_table(rows_by: dict, gpu: str = "H100 SXM") -> str:
    """{attention backend: `roofline` rows} as one markdown table: per (preset, workload), each backend's predicted
    `gpu` samples/s, eager / compiled (the same backend in both), and its memory-bound GB per sample."""
    names = list(rows_by)
    head = ["preset", "workload (sample)"] + [f"{b}: eager / compiled per s (GB memory-bound)" for b in names]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(rows_by[names[0]]):
        cells = []
        for b in names:
            x = rows_by[b][i]
            cells.append(
                f"{x[gpu]['eager']['per_s']:.0f} / {x[gpu]['compiled']['per_s']:.0f} ({x['memory_bytes'] / 1e9:.2f})"
            )
        out.append(f"| {r['preset']} | {r['workload']} ({r['sample']}) | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESET_ORDER))
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument(
        "--path",
        default="gpu",
        choices=["gpu", "cpu"],
        help="count the GPU's fused attention and CUDA's fp32 autocast list (gpu), or what the CPU runs (cpu)",
    )
    p.add_argument(
        "--attention",
        default="pinned",
        choices=(*ATTENTION, "all"),
        help="the attention backend counted on the gpu path (pinned: the kit's choice per row shape; all: each, in "
        "one table of predictions)",
    )
    p.add_argument(
        "--fused",
        nargs="*",
        default=[],
        choices=(*FUSED, "each"),
        help="fused paths counted as one kernel each on the gpu path (linear_ce: the token head's linear layer and "
        "cross-entropy, as Liger's; add_ln: residual + dropout + LayerNorm, as flash-attn's layer_norm_fn; "
        "gelu_epilogue: the MLP's GELU and bias gradient in cuBLASLt GEMM epilogues; each: every path alone and "
        "all together, in one table of predictions)",
    )
    p.add_argument("--traffic-dir", type=Path, default=HERE / "results", help="where the traffic_*.json files are")
    p.add_argument("--out", type=Path, help="write the rows and the assumptions as JSON")
    a = p.parse_args(argv)
    if a.attention == "all":
        return by_attention(a)
    if "each" in a.fused:
        return by_fused(a)
    try:
        rows = roofline(
            a.presets, a.workloads, a.precision, a.traffic_dir, a.path == "gpu", a.attention, fused=tuple(a.fused)
        )
    except RooflineError as e:
        print(f"roofline: error: {e}", file=sys.stderr)
        return 2
    print(
        f"per sample (pre-training: a video of 2 clips, T=5, 16x16 tokens; fine-tuning: a clip, T=10, 32x32 tokens), "
        f"{a.precision}, {a.path} path, attention {a.attention if a.path == 'gpu' else 'as the CPU runs it'}, "
        f"fused paths: {', '.join(a.fused) or 'none'}; "
        f"matmul efficiency {MATMUL_EFFICIENCY}, memory efficiency {MEMORY_EFFICIENCY}"
    )
    print(table(rows))
    for src in sorted({r["compiled_ratio_source"] for r in rows}):
        print("compiled memory-bound bytes = eager x", src)
    for r in rows:
        if r.get("kit_flops"):
            print(
                f"{r['preset']} {r['workload']}: counted {r['flops'] / 1e9:.1f} GFLOP, vimpac.model.model_flops "
                f"{r['kit_flops'] / 1e9:.1f} ({100 * (r['flops'] / r['kit_flops'] - 1):+.1f}%)"
            )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        run = dict(torch=torch.__version__, precision=a.precision, path=a.path, attention=a.attention, fused=a.fused)
        assumed = dict(gpus=GPUS, matmul_efficiency=MATMUL_EFFICIENCY, memory_efficiency=MEMORY_EFFICIENCY)
        assumed.update(optimizer_bytes_per_param=OPTIMIZER_BYTES_PER_PARAM, workloads=WORKLOADS)
        a.out.write_text(json.dumps({**run, **assumed, "rows": rows}, indent=1) + "\n")
        print("wrote", a.out)
    return 0


def compare(a, variants: dict, title: str, render, key: str) -> int:
    """`roofline` once per variant ({name: keyword arguments of `roofline`}; no memory plan: it does not depend on the
    count's variants), printed under `title` as one table (`render`), and written to `a.out` under `key`."""
    try:
        rows_by = {
            n: roofline(a.presets, a.workloads, a.precision, a.traffic_dir, True, plan=False, **kw)
            for n, kw in variants.items()
        }
    except RooflineError as e:
        print(f"roofline: error: {e}", file=sys.stderr)
        return 2
    print(title)
    print(render(rows_by))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        keep = ("preset", "workload", "memory_bytes", "matmul_bytes", "saved_bytes", "compiled_memory_bytes", *GPUS)
        rows = {n: [{k: r[k] for k in keep} for r in rs] for n, rs in rows_by.items()}
        a.out.write_text(json.dumps({"torch": torch.__version__, "precision": a.precision, key: rows}, indent=1) + "\n")
        print("wrote", a.out)
    return 0


def by_attention(a) -> int:
    "`--attention all`: `roofline` once per backend."
    title = f"predicted H100 SXM samples/s per attention backend, {a.precision}, per sample as in the main table"
    return compare(a, {b: dict(attention=b) for b in ATTENTION}, title, backend_table, "by_attention")


def fused_table(rows_by: dict, gpu: str = "H100 SXM") -> str:
    """{fused paths ("none" first, then names joined by " + "): `roofline` rows} as one markdown table: per (preset,
    workload), the predicted `gpu` samples/s eager and compiled as now, then with each set of paths (the change in
    percent), and the memory-bound GB and saved MB per sample as now and with the last set."""
    names = list(rows_by)
    base, last = rows_by[names[0]], rows_by[names[-1]]
    label = {n: "all" if " + " in n else n for n in names[1:]}
    head = ["preset", "workload (sample)", "as now: eager / compiled per s"]
    head += [f"{label[n]}: eager / compiled" for n in names[1:]]
    head += [f"memory-bound GB: as now → {label[names[-1]]}", f"saved MB: as now → {label[names[-1]]}"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def change(x, b):
        pct = 100 * (x / b - 1)
        return f"{x:.0f} ({pct:+.0f}%)" if abs(pct) >= 0.5 else f"{x:.0f}"

    for i, r in enumerate(base):
        e, c = r[gpu]["eager"]["per_s"], r[gpu]["compiled"]["per_s"]
        cells = [f"{e:.0f} / {c:.0f}"]
        for n in names[1:]:
            x = rows_by[n][i][gpu]
            cells.append(f"{change(x['eager']['per_s'], e)} / {change(x['compiled']['per_s'], c)}")
        cells.append(f"{r['memory_bytes'] / 1e9:.2f} → {last[i]['memory_bytes'] / 1e9:.2f}")
        cells.append(f"{r['saved_bytes'] / 1e6:.0f} → {last[i]['saved_bytes'] / 1e6:.0f}")
        out.append(f"| {r['preset']} | {r['workload']} ({r['sample']}) | " + " | ".join(cells) + " |")
    return "\n".join(out)


def by_fused(a) -> int:
    "`--fused each`: `roofline` as now, with each fused path alone, and with them all."
    variants = {
        " + ".join(f) or "none": dict(attention=a.attention, fused=f) for f in [(), *((f,) for f in FUSED), FUSED]
    }
    title = f"predicted H100 SXM samples/s per fused path, {a.precision}, attention {a.attention}, per sample as above"
    return compare(a, variants, title, fused_table, "by_fused")


if __name__ == "__main__":
    sys.exit(main())
