"""What the benchmark scripts share: a device's synchronisation, the median time of repeated calls, peak memory.
Imported as `from bench_utils import ...` (a script's folder is on `sys.path` when it runs)."""

import resource, statistics, time
import torch


# scaled_dot_product_attention's backends as the scripts name them → `torch.nn.attention.SDPBackend` names
SDPA_NAMES = dict(flash="FLASH_ATTENTION", efficient="EFFICIENT_ATTENTION", cudnn="CUDNN_ATTENTION", math="MATH")
BACKENDS = tuple(SDPA_NAMES)


def pin_attention(name: str | None) -> None:
    """Make the model's attention use only the backend `name` (one of `BACKENDS`), or torch's own choice ("torch"),
    in place of the kit's pin (`vimpac.model.attention_backends`, which `row_attention` looks up at each call); None
    keeps the kit's pin. For the comparisons of `--sdpa-backend`: one process per setting."""
    if name is None:
        return
    import vimpac.model as vm

    pick = None if name == "torch" else (SDPA_NAMES[name],)
    vm.attention_backends = lambda device_type, length, head_dim: pick


def device_sync(device):
    "A function that waits for `device`'s queued work: `torch.cuda.synchronize` on CUDA, nothing on a CPU."
    return torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)


def median_seconds(fn, repeats: int, sync=lambda: None, warmup: int = 1) -> float:
    "The median wall time in seconds of `repeats` calls of `fn` (each followed by `sync`), after `warmup` untimed"
    "calls."
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def peak_memory_gb(device) -> float:
    "Peak memory in GB: on CUDA torch's peak allocated on `device`, on a CPU this process's peak resident set size."
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def pretrain_batch(config, videos: int, seed: int = 0, mask_ratio: float = 0.15, pin: bool = False):
    """One pre-training micro-batch of `videos` random clip pairs, a `vimpac.pretrain.MicroBatch` built on the host as
    the loader's collate (`MaskedPairs`) builds it: inputs and labels int64 (2 x videos, T, h, w) in the order
    [c_1..c_n, c'_1..c'_n], each clip with its own block mask (`mask_clip_pairs`, the appendix B.1 block count for
    `mask_ratio`), the masked positions (M,) int64 (`label_positions`) and the [PAD] flag found on the host. The masks
    are drawn from a generator seeded with `seed` alone, the tokens from another (`seed` + 1), so that a seed gives the
    same masks (the same M) whatever the vocabulary. `pin`: tensors in pinned memory, for a `non_blocking` copy."""
    from vimpac.model import label_positions
    from vimpac.pretrain import MicroBatch, PretrainConfig, mask_clip_pairs

    c, T = config, config.max_clip_len
    pairs = torch.randint(
        0, c.vocab_size, (videos, 2, T, *c.token_map), generator=torch.Generator().manual_seed(seed + 1)
    )
    inputs, labels, _ = mask_clip_pairs(
        pairs, c, PretrainConfig(clip_len=T, mask_ratio=mask_ratio), torch.Generator().manual_seed(seed)
    )
    mb = MicroBatch(inputs, labels, label_positions(labels), bool((pairs == c.pad_id).any()), videos)
    return MicroBatch(*(t.pin_memory() if pin and isinstance(t, torch.Tensor) else t for t in mb))


def to_device(batch, device):
    """A `pretrain_batch` (or any `MicroBatch`) on `device` with its masked count, by the loop's own
    `vimpac.pretrain.fetch_step` in one process (tensors copied `non_blocking`, nothing read back)."""
    from types import SimpleNamespace
    from vimpac.pretrain import MicroBatch, fetch_step

    [mb], _ = fetch_step(iter([MicroBatch(*batch)]), 1, SimpleNamespace(device=torch.device(device), world=1))
    return mb


def pretrain_loss_fn(compiled: bool = False, amp_dtype=None, temperature: float = 0.2, alpha: float = 1.0):
    """`loss(forward, micro_batch)`: the pre-training loss, float32 (), of a `to_device` micro-batch, computed by the
    loop's own `vimpac.pretrain.micro_batch_loss` in one process, `forward` being the model or its compiled wrapper,
    run under autocast at `amp_dtype` (None: fp32) as `Engine.forward` runs it. `compiled`: as the loop compiles (no
    [PAD] flag, M marked dynamic)."""
    from vimpac.pretrain import PretrainConfig, micro_batch_loss

    cfg = PretrainConfig(compile=compiled, temperature=temperature, alpha=alpha)

    def loss(forward, mb):
        def autocast_forward(*args, **kwargs):
            with torch.autocast(mb.inputs.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                return forward(*args, **kwargs)

        return micro_batch_loss(autocast_forward, cfg)(mb)[0]

    return loss


def machine_name(device) -> str:
    "The machine a figure was taken on: 'ARCH N cores', with ', GPU NAME' when `device` is a CUDA device."
    import os, platform

    name = f"{platform.machine()} {os.cpu_count()} cores"
    return name + (f", {torch.cuda.get_device_name()}" if torch.device(device).type == "cuda" else "")


def run_workers(items, command, failure, done=lambda item, row: None) -> tuple[list, list]:
    """Runs the worker `command(item)` (an argv list) for each of `items`, each in its own process (its peak memory
    and a CUDA fault stay its own). Returns (rows, failed): the JSON object each worker printed on its last stdout
    line, and the items whose worker exited non-zero, for each of which `failure(item, stderr)` is printed on stderr;
    `done(item, row)` is called after each worker that succeeded."""
    import json, subprocess, sys

    rows, failed = [], []
    for item in items:
        r = subprocess.run(command(item), capture_output=True, text=True)
        if r.returncode:
            failed.append(item)
            print(failure(item, r.stderr), file=sys.stderr)
            continue
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        done(item, rows[-1])
    return rows, failed
