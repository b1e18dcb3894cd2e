"""The engine's GPU-only logic, on CPU stand-ins (issue 20): torch's fused AdamW runs on a CPU (torch >= 2.4), so the
fused path of a GPU run (`Engine(fused=True)`, `update_async`'s device-side skip, the fp16 `GradScaler`) is exercised
here; `GlobalBatchNorm1d`'s all-reduce path in a one-process gloo group, op by op, for host reads; the MFU peak of
GPUs by name; fine-tuning's host reads; the torch floor."""

import re, sys
from pathlib import Path
import pytest
import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
import vimpac.engine as E
from helpers import one_process_gloo
from vimpac.engine import (
    Engine,
    GlobalBatchNorm1d,
    Run,
    TrainConfig,
    batchnorm_sync,
    start_run,
    sync_batchnorm,
)
from vimpac.checkpoints import latest_checkpoint
from vimpac.memory import peak_flops_for
from vimpac.model import VimpacConfig, VimpacForVideoClassification

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py

MC = VimpacConfig.from_preset("tiny", vocab_size=32, token_map=(4, 4), max_clip_len=3, dropout=0.1)
TOKS, Y = torch.randint(0, 32, (8, 3, 4, 4), generator=torch.Generator().manual_seed(0)), torch.arange(8) % 3


def fresh():
    torch.manual_seed(0)
    return VimpacForVideoClassification(MC, 3)


def loss_fn(eng):
    def f(mb):
        o = eng.forward(*mb)
        return o.loss, torch.stack([o.loss.detach() * len(mb[1]), (o.logits.argmax(-1) == mb[1]).sum()])

    return f


def train(eng, start, stop):
    "Steps [start, stop) on the one batch through `update_async` (the loops' one step method); a checkpoint each step."
    for step in range(start, stop):
        stats = eng.accumulate([(TOKS, Y)], loss_fn(eng))
        eng.update_async(stats)
        eng.save(step + 1, "test-checkpoint")


def cpu_run(out, use_scaler=False):
    "A one-process CPU `Run`; with `use_scaler` its engine gets an enabled CPU `GradScaler` (the fp16 path's)."
    r = start_run(out, False, "cpu", "fp32")
    return Run(r.rank, r.world, r.device, None, use_scaler, r.out)


@pytest.mark.parametrize("written_fused,resumed_fused", [(False, True), (True, False)])
def test_resume_across_optimizer_implementations(tmp_path, written_fused, resumed_fused):
    """A checkpoint of a non-fused AdamW (every CPU run) resumed by a fused engine (a GPU's) steps, and the reverse;
    both end where the uninterrupted run ends (fused and non-fused AdamW agree to ~1e-7). On main the fused engine's
    first step raised `AssertionError: Expected grad_scale and found_inf to be None` (the restored param groups said
    fused=None)."""
    cfg = TrainConfig(lr=1e-3, save_every=1, keep_last=1, batch_size=8)
    full = Engine(fresh(), cfg, 5, cpu_run(tmp_path / "full"), fused=written_fused)
    full.restore()
    train(full, 0, 5)
    part = Engine(fresh(), cfg, 5, cpu_run(tmp_path / "part"), fused=written_fused)
    part.restore()
    train(part, 0, 3)
    _, state = latest_checkpoint(tmp_path / "part", "test-checkpoint", "a test checkpoint")
    assert [g["fused"] for g in state["optimizer"]["param_groups"]] == [True if written_fused else None] * 2
    m = fresh()
    m.load_state_dict(state["model"])
    again = Engine(m, cfg, 5, cpu_run(tmp_path / "again"), fused=resumed_fused)
    assert again.restore(state) == 3 and again.fused is resumed_fused
    assert [g["fused"] for g in again.opt.param_groups] == [True if resumed_fused else None] * 2  # its own kernel
    train(again, 3, 5)
    assert all(int(s["step"]) == 5 for s in again.opt.state.values())
    for a, b in zip(full.model.parameters(), again.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_grad_scaler_fused_step_after_nonfused_checkpoint(tmp_path):
    """The fp16 path: an enabled `GradScaler` ("cpu" here, "cuda" on a GPU) and a fused AdamW restored from a non-fused
    checkpoint step without the assertion, through `update_async`."""
    cfg = TrainConfig(lr=1e-3, save_every=1, keep_last=1, batch_size=8)
    writer = Engine(fresh(), cfg, 4, cpu_run(tmp_path / "w", use_scaler=True), fused=False)
    writer.restore()
    train(writer, 0, 2)
    _, state = latest_checkpoint(tmp_path / "w", "test-checkpoint", "a test checkpoint")
    assert state["scaler"] and state["scaler"]["scale"] > 1
    m = fresh()
    m.load_state_dict(state["model"])
    eng = Engine(m, cfg, 4, cpu_run(None, use_scaler=True), fused=True)
    assert eng.scaler.is_enabled() and eng.restore(state) == 2
    before = [p.detach().clone() for p in eng.model.parameters()]
    train(eng, 2, 3)
    assert all(int(s["step"]) == 3 for s in eng.opt.state.values())  # the step was taken
    assert any(not torch.equal(a, b) for a, b in zip(before, eng.model.parameters()))
    assert all(torch.isfinite(p).all() for p in eng.model.parameters())


def test_update_is_deprecated_and_still_steps():
    """`Engine.update` (the step that read everything at once) warns `VimpacDeprecationWarning` for one release and
    still takes the step `update_async` takes, reading it as `settle` does: the same weights bit for bit."""
    from vimpac.utils import VimpacDeprecationWarning

    cfg = TrainConfig(lr=1e-3, batch_size=8)
    old, new = (Engine(fresh(), cfg, 4, cpu_run(None)) for _ in range(2))
    got = {}
    for eng in (old, new):  # one after the other: each draws its dropout from its seed
        eng.restore()
        for step in range(2):
            stats = eng.accumulate([(TOKS, Y)], loss_fn(eng))
            if eng is old:
                with pytest.warns(VimpacDeprecationWarning, match="Engine.update is deprecated"):
                    st, finite, norm, lr = eng.update(stats)
                got.setdefault(eng, []).append((st.cpu(), finite, norm, lr))
            else:
                ((_, st, finite, norm, lr),) = eng.settle([(step, *eng.update_async(stats))])
                got.setdefault(eng, []).append((st, finite, norm, lr))
    for (a, fa, na, la), (b, fb, nb, lb) in zip(got[old], got[new]):
        assert torch.equal(a, b) and fa and fb and isinstance(na, float) and na == nb and la == lb
    for a, b in zip(old.model.parameters(), new.model.parameters()):
        assert torch.equal(a, b)
    nan = old.accumulate([(TOKS, Y)], lambda mb: (old.forward(*mb).loss * float("nan"), torch.full((2,), float("nan"))))
    with pytest.warns(VimpacDeprecationWarning):
        assert old.update(nan)[1] is False and old.bad == 1


def test_nothing_in_the_kit_calls_update():
    "The deprecated `Engine.update` is called by no module, notebook, benchmark or tool of the kit (only its own test)."
    hits = []
    for p in [
        *ROOT.glob("vimpac/*.py"),
        *ROOT.glob("nbs/*.ipynb"),
        *ROOT.glob("benchmarks/*.py"),
        *ROOT.glob("tools/*.py"),
    ]:
        text = p.read_text()
        for m in re.finditer(r"\b(eng|engine|one|acc|ref|full|part|again|self|old_way)\.update\(", text):
            hits.append(f"{p.name}: {text[max(0, m.start() - 30) : m.end()]!r}")
    allowed = [h for h in hits if "old_way.update(" in h]  # the chapter's own check that it warns
    assert hits == allowed, hits


# --- GlobalBatchNorm1d: no host read, on every device

FORBIDDEN = (
    "aten.nonzero",
    "aten._local_scalar_dense",
    "aten.item",
    "aten.is_nonzero",
    "aten.masked_select",
    "aten.equal",
)


class OpLog(TorchDispatchMode):
    "Every aten op dispatched, and the host reads among them (a boolean-mask index included)."

    def __init__(self):
        super().__init__()
        self.ops, self.reads = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket if hasattr(func, "overloadpacket") else func)
        self.ops.append(name)
        flat = [a for x in args for a in (x if isinstance(x, (list, tuple)) else [x])]
        masked = name.startswith(("aten.index", "aten.index_put")) and any(
            isinstance(a, torch.Tensor) and a.dtype == torch.bool for a in flat
        )
        if name in FORBIDDEN or masked:
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


class _WorldOfTwo:
    "`torch.distributed` as `vimpac.engine` sees it, but a world of 2: GlobalBatchNorm1d takes its all-reduce path."

    def __getattr__(self, k):
        return getattr(dist, k)

    @staticmethod
    def get_world_size(group=None):
        return 2


def test_oplog_sees_a_boolean_mask():
    "The op log catches what torch's SyncBatchNorm does (`count_all[mask]`), so that its silence below means something."
    x = torch.arange(4.0)
    with OpLog() as log:
        x[x > 1]
    assert log.reads


def test_global_batchnorm_reads_nothing_on_host(monkeypatch):
    """Forward and backward of `GlobalBatchNorm1d`'s all-reduce path (a one-process gloo group): no nonzero, no
    scalar read, no boolean-mask index; its output and input gradient are BatchNorm1d's."""
    monkeypatch.setattr(E, "dist", _WorldOfTwo())
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    ref_bn = torch.nn.BatchNorm1d(8)
    with torch.no_grad():
        ref_bn.weight.uniform_(0.5, 1.5)
        ref_bn.bias.uniform_(-1, 1)
    bn = GlobalBatchNorm1d(8)
    bn.load_state_dict(ref_bn.state_dict())
    xr, xg = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref = ref_bn(xr)
    ref.pow(2).sum().backward()
    with one_process_gloo(monkeypatch):
        with OpLog() as log:
            y = bn(xg)
            y.pow(2).sum().backward()
    assert any("allreduce" in op for op in log.ops), "the all-reduce path did not run"
    assert log.reads == [], log.reads
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xg.grad, xr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(bn.running_mean, ref_bn.running_mean)
    torch.testing.assert_close(bn.running_var, ref_bn.running_var)


def test_global_batchnorm_bf16_statistics_in_float32(monkeypatch):
    "bf16 input (autocast on a GPU): the statistics in float32, the output in bf16, as cuDNN's BatchNorm does."
    monkeypatch.setattr(E, "dist", _WorldOfTwo())
    x = 100 + torch.randn(64, 4, generator=torch.Generator().manual_seed(1))  # a mean that bf16 sums would lose
    bn = GlobalBatchNorm1d(4)
    with one_process_gloo(monkeypatch):
        y = bn(x.bfloat16())
    assert y.dtype == torch.bfloat16
    ref = torch.nn.functional.batch_norm(x.bfloat16().float(), None, None, training=True)
    torch.testing.assert_close(y.float(), ref, rtol=0, atol=2e-2)


def test_sync_batchnorm_is_global_on_cuda_too():
    "`batchnorm_sync` is GlobalBatchNorm1d for every device type (torch's SyncBatchNorm syncs the host every step)."
    assert batchnorm_sync("cuda") is GlobalBatchNorm1d and batchnorm_sync("cpu") is GlobalBatchNorm1d
    head = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8))
    keys = list(head.state_dict())
    sync_batchnorm(head, torch.device("cuda"))  # the module stays where it is (the CPU here)
    assert type(head[1]) is GlobalBatchNorm1d and list(head.state_dict()) == keys


# --- MFU peaks


@pytest.mark.parametrize(
    "name,tflops",
    [
        ("NVIDIA H100 80GB HBM3", 989),
        ("NVIDIA H100 SXM5 80GB", 989),
        ("NVIDIA H100 PCIe", 756),
        ("NVIDIA H100 NVL", 835),
        ("NVIDIA H200", 989),
        ("NVIDIA GH200 480GB", 989),
        ("NVIDIA A100-SXM4-80GB", 312),
        ("NVIDIA A100-PCIE-40GB", 312),
        ("NVIDIA A100 80GB PCIe", 312),
        ("NVIDIA L40S", 362),
        ("NVIDIA L4", 121),
        ("NVIDIA A10", 125),
        ("Tesla V100-SXM2-16GB", 125),
        ("NVIDIA L40", None),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_peak_flops_for_device_names(name, tflops):
    "The most specific entry wins (H100 PCIe / NVL before H100), keys match whole words only (L40 is not an L4)."
    assert peak_flops_for(name) == (None if tflops is None else tflops * 1e12)


# --- fine-tuning reads the device at log and checkpoint steps only


def test_finetune_reads_at_log_and_checkpoint_steps_only(labelled, tmp_path, monkeypatch):
    """`finetune` steps through `update_async` (never `update`, which reads every step) and reads the pending steps
    with `settle` at log steps (every 3, the last) and checkpoint steps (every 4): 7 steps are read in 4 reads."""
    from vimpac.finetune import finetune, FinetuneConfig

    def refuse(*a, **k):
        raise AssertionError("Engine.update reads the device every step")

    monkeypatch.setattr(E.Engine, "update", refuse)
    reads, settle = [], E.Engine.settle

    def spy(self, pending):
        reads.append([p[0] for p in pending])
        yield from settle(self, pending)

    monkeypatch.setattr(E.Engine, "settle", spy)
    cfg = FinetuneConfig(steps=7, batch_size=6, clip_len=4, lr=1e-3, log_every=3, save_every=4)
    _, hist = finetune(labelled, "tiny", cfg, device="cpu", out=tmp_path / "run", progress=False)
    assert reads == [[0], [1, 2, 3], [4, 5, 6]], reads
    assert [r["step"] for r in hist] == [0, 3, 6]


def test_clip_accuracy_reads_the_device_once(labelled, monkeypatch):
    "`clip_accuracy` counts its hits on the device and reads them once, not once per batch."
    import vimpac.finetune as F

    reads = []
    for name in ("cpu", "item", "tolist", "__float__", "__int__", "__bool__"):
        orig = getattr(torch.Tensor, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            code = sys._getframe(1).f_code  # the collate's [PAD] flag is read on the host, before the device
            if code.co_filename == F.__file__ and code.co_name != "_collate":
                reads.append(_name)
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, wrapped)
    model = F.finetune_model(labelled, "tiny", clip_len=4)
    acc = F.clip_accuracy(model, labelled, 4, batch_size=2)  # 6 videos: 3 batches
    assert acc == pytest.approx(1 / 3) and reads == ["item"], reads


# --- the torch floor


def test_torch_floor_has_safe_globals():
    """pyproject's torch floor is at least 2.5: `load_torch_file` (every checkpoint and model load) opens
    `torch.serialization.safe_globals`, which torch 2.5 introduced; under 2.4 every load failed."""
    text = (ROOT / "pyproject.toml").read_text()
    floor = re.search(r'"torch>=([0-9.]+)', text)
    assert floor, "pyproject.toml: no torch>= floor"
    assert tuple(int(p) for p in floor.group(1).split(".")[:2]) >= (2, 5), floor.group(0)
    assert "safe_globals" in (ROOT / "vimpac" / "utils.py").read_text() and hasattr(torch.serialization, "safe_globals")


def test_training_runs_ask_for_expandable_segments(monkeypatch):
    """A training run on CUDA sets `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` before CUDA is initialised
    (run here with a CPU stand-in: CUDA reported uninitialised); the user's own setting, an initialised CUDA or a CPU
    device leave it alone; `start_run` asks for it with the run's device."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert not E.expandable_segments(torch.device("cpu")) and "PYTORCH_CUDA_ALLOC_CONF" not in E.os.environ
    assert E.expandable_segments(torch.device("cuda"))
    assert E.os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    assert not E.expandable_segments(torch.device("cuda"))
    assert E.os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:128"
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert not E.expandable_segments(torch.device("cuda"))
    asked = []
    monkeypatch.setattr(E, "expandable_segments", lambda device: asked.append(device))
    start_run(None, False, "cpu", "fp32")
    assert asked == [torch.device("cpu")]


def test_tf32_precision_turns_on_tf32_matmuls(monkeypatch):
    """`--precision tf32` (issue 34: fp32 runs used full-fp32 matmuls on a GPU) keeps fp32 tensors and turns on TF32
    for matmuls and cuDNN: `start_run` on a CPU stand-in (the GPU's precision check answered as on an H100). Every
    other precision leaves the setting alone."""
    monkeypatch.setattr(E, "resolve_precision", lambda precision, dev: (None, False))
    torch.backends.cuda.matmul.allow_tf32 = False  # not monkeypatch: this module's settings are no attributes
    try:
        start_run(None, False, "cpu", "fp32")
        assert not torch.backends.cuda.matmul.allow_tf32
        run = start_run(None, False, "cpu", "tf32")
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert run.amp_dtype is None and not run.use_scaler
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def test_cpu_checkpoint_resumed_on_a_gpu_seeds_each_process_generator(tmp_path, monkeypatch):
    """CPU→GPU resume through a CPU stand-in (issue 34): a checkpoint written by a CPU run (plain AdamW, no CUDA
    generator state) restored by a fused engine whose run is on CUDA, the CUDA generator's calls recorded. The fused
    AdamW takes the saved moments, the CPU generator its saved state, and the CUDA generator a seed derived from the
    run's seed, the process and the step: another for each process of the resumed run, the same on a second resume.
    Then a checkpoint of one process resumed by two: each process its own stream. On main the CUDA generator was
    left as it was (every process of a resumed GPU run drew the same dropout masks), and a checkpoint of another
    process count gave every process the first process's state."""
    import dataclasses

    cfg = TrainConfig(lr=1e-3, save_every=1, keep_last=1, batch_size=8, seed=7)
    writer = Engine(fresh(), cfg, 4, cpu_run(tmp_path / "w"), fused=False)
    writer.restore()
    train(writer, 0, 2)
    _, state = latest_checkpoint(tmp_path / "w", "test-checkpoint", "a test checkpoint")
    assert [r["cuda"] for r in state["rng"]] == [None]
    cuda = []
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda s: cuda.append(("seed", s)))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, d=None: cuda.append(("state", s)))

    def resume(rank=0, world=1):
        eng = Engine(fresh(), cfg, 4, cpu_run(None), fused=True)  # a GPU's AdamW kernel
        eng.run = dataclasses.replace(eng.run, rank=rank, world=world, device=torch.device("cuda"))
        step = eng.restore(state)
        return step, eng, torch.get_rng_state()

    step, eng, cpu_state = resume()
    assert step == 2 and eng.fused and torch.equal(cpu_state, state["rng"][0]["torch"])
    assert all(int(s["step"]) == 2 for s in eng.opt.state.values())
    resume()
    state["rng"] = state["rng"] * 2  # the same checkpoint as if written by two processes: rank 1 takes the second
    resume(rank=1, world=2)
    seeds = [s for kind, s in cuda]
    assert [kind for kind, _ in cuda] == ["seed"] * 3 and seeds[0] == seeds[1] != seeds[2], cuda
    state["rng"] = state["rng"][:1]  # one process's checkpoint, resumed by two
    streams = [resume(rank, 2)[2] for rank in (0, 1)]
    assert not torch.equal(*streams) and not any(torch.equal(s, state["rng"][0]["torch"]) for s in streams)
