"""No host-device synchronisation in pre-training's steady state (issue 20 §4): the loop's own pieces (the loader's
collate `MaskedPairs` with pinned memory, `fetch_step`, `Engine.accumulate` of `micro_batch_loss`,
`Engine.update_async`)
run a few steps on CUDA under `torch.cuda.set_sync_debug_mode("error")` after a warm-up, so that any host read is an
error (`gpu`-marked: a GPU run proves it). The same steps run on the CPU with the GPU's choices stood in (the fused
AdamW, the device-side token check), with a dispatch-mode check that nothing is read back on the host."""

import contextlib
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
import vimpac.model as vm
from vimpac.model import VimpacConfig, VimpacForPreTraining
from vimpac.engine import Engine, Run
from vimpac.pretrain import MaskedPairs, MicroBatch, PretrainConfig, fetch_step, micro_batch_loss

HOST_READS = {"_local_scalar_dense", "item", "is_nonzero", "nonzero"}


class NoHostReads(TorchDispatchMode):
    "Raises on any aten op that reads a device value back on the host (the CPU stand-in of the sync debug mode)."

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in HOST_READS:
            raise RuntimeError(f"host read in the steady state: {func}")
        return func(*args, **(kwargs or {}))


def _micro_batch(c, seed: int, pad: bool, pin: bool):
    "One loader micro-batch of 4 clip pairs (with [PAD] frames in one when `pad`), collated as the loader collates it."
    g = torch.Generator().manual_seed(seed)
    pairs = torch.randint(0, c.vocab_size, (4, 2, 3, 4, 4), generator=g)
    if pad:
        pairs[0, :, 2:] = c.pad_id
    mb = MaskedPairs(c, PretrainConfig(clip_len=3, batch_size=4))(list(zip(pairs, torch.rand(4, 2, 2, 6, generator=g))))
    return MicroBatch(*(t.pin_memory() if pin and isinstance(t, torch.Tensor) else t for t in mb))


def steady_state_steps(
    device,
    steps: int = 3,
    warmup: int = 2,
    amp_dtype=None,
    use_scaler: bool = False,
    compile: bool = False,
    fused: bool | None = None,
    check=contextlib.nullcontext,
) -> list:
    """`warmup` then `steps` pre-training steps of `tiny` (4 x 4 tokens, T = 3, 4 clip pairs a step) on `device` as
    `vimpac.pretrain.pretrain`'s loop runs them between two reads of the device: the masked count M changes every
    step and every other micro-batch holds [PAD]. The timed steps run inside `check()` (the sync debug mode on CUDA);
    the device is read (`Engine.settle`) after it. Returns the settled records (step, stats, finite, grad_norm, lr)."""
    dev = torch.device(device)
    c = VimpacConfig.from_preset("tiny", vocab_size=64, token_map=(4, 4), max_clip_len=3)
    cfg = PretrainConfig(clip_len=3, batch_size=4, steps=warmup + steps, compile=compile)
    torch.manual_seed(0)
    run = Run(0, 1, dev, amp_dtype, use_scaler, None)
    eng = Engine(VimpacForPreTraining(c), cfg, warmup + steps, run, fused=fused)
    loss_fn = micro_batch_loss(eng.forward, cfg)
    batches = iter([_micro_batch(c, i, pad=i % 2 == 1, pin=dev.type == "cuda") for i in range(warmup + steps)])
    pending = []

    def step(i):
        mbs, n_masked = fetch_step(batches, 1, run)
        pending.append((i, *eng.update_async(eng.accumulate(mbs, loss_fn)), n_masked))

    for i in range(warmup):
        step(i)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    with check():
        for i in range(warmup, warmup + steps):
            step(i)
    return list(eng.settle(pending))


@contextlib.contextmanager
def cuda_sync_is_an_error():
    "`torch.cuda.set_sync_debug_mode('error')` for the block: a synchronising CUDA call raises."
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(0)


def _one_hot_as_on_cuda(t, num_classes=-1):
    "`F.one_hot` as CUDA runs it with `num_classes` given: no check of the classes on the host (a CPU reads min and"
    "max)."
    return torch.zeros(*t.shape, num_classes, dtype=torch.long, device=t.device).scatter_(-1, t.unsqueeze(-1), 1)


def test_steady_state_reads_nothing_on_the_cpu_stand_in(monkeypatch):
    """On the CPU with the GPU's choices (the fused AdamW, whose `found_inf` skips a bad step on the device; the token
    check as a device-side assert; `F.one_hot` of the InfoNCE without the CPU's host check of its classes): no op of
    the steady-state steps reads a value back on the host, and the records
    settled afterwards are finite steps with changing masked counts."""
    monkeypatch.setattr(vm, "_refuse_any", lambda bad, message: torch._assert_async(~bad.any()))
    monkeypatch.setattr(F, "one_hot", _one_hot_as_on_cuda)
    recs = steady_state_steps("cpu", fused=True, check=NoHostReads)
    assert [r[0] for r in recs] == [0, 1, 2, 3, 4]
    assert all(r[2] for r in recs) and all(r[3] > 0 for r in recs)
    assert len({float(r[5]) for r in recs}) > 1  # n_masked: M changed between steps


def test_cpu_stand_in_catches_a_host_read(monkeypatch):
    "The stand-in is not blind: with the non-fused AdamW (which reads the skip flag on the host) it raises."
    monkeypatch.setattr(vm, "_refuse_any", lambda bad, message: torch._assert_async(~bad.any()))
    with pytest.raises(RuntimeError, match="host read"):
        steady_state_steps("cpu", fused=False, check=NoHostReads)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "amp_dtype, use_scaler, compile",
    [(torch.bfloat16, False, False), (torch.float16, True, False), (torch.bfloat16, False, True)],
    ids=["bf16", "fp16-scaler", "bf16-compiled"],
)
def test_steady_state_has_no_host_sync_on_cuda(amp_dtype, use_scaler, compile):
    """On CUDA, after 2 warm-up steps (lazy initialisation, cuBLAS workspaces, the compile), 3 steps under
    `set_sync_debug_mode("error")`: any host-device synchronisation in the loop raises. The settled steps are finite."""
    torch._dynamo.reset()
    recs = steady_state_steps(
        "cuda", amp_dtype=amp_dtype, use_scaler=use_scaler, compile=compile, check=cuda_sync_is_an_error
    )
    assert [r[0] for r in recs] == [0, 1, 2, 3, 4]
    assert all(r[3] == r[3] for r in recs)  # gradient norms read back (NaN would be a bad step)
    assert use_scaler or all(r[2] for r in recs)  # fp16's first steps may be skipped by the scaler
