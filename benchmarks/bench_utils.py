"""What the benchmark scripts share: a device's synchronisation, the median time of repeated calls, peak memory.
Imported as `from bench_utils import ...` (a script's folder is on `sys.path` when it runs)."""

import resource, statistics, time
import torch


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


def forward_params(model) -> set:
    """The parameter names of `model.forward` (of the module itself, not a compiled wrapper): what the kit in use takes,
    so that a script runs against older kits too (before `label_positions`, `num_masked` or `has_pad`)."""
    import inspect

    return set(inspect.signature(getattr(model, "_orig_mod", model).forward).parameters)


def pretrain_batch(config, videos: int, seed: int = 0, mask_ratio: float = 0.15, pin: bool = False) -> tuple:
    """One pre-training micro-batch of `videos` random clip pairs, built on the host as `vimpac-pretrain`'s loader
    builds it (`vimpac.pretrain._MaskedPairs`): (inputs, labels, label positions, has [PAD], videos), inputs and labels
    int64 (2 x videos, T, h, w) in the order [c_1..c_n, c'_1..c'_n] with each clip's own block mask (`mask_clip_pairs`,
    the appendix B.1 block count for `mask_ratio`), positions the flat indices (M,) int64 of the masked tokens, has
    [PAD]
    a Python bool found on the host. The masks are drawn from a generator seeded with `seed` alone, the tokens from
    another (`seed` + 1), so that a seed gives the same masks (the same M) whatever the vocabulary. `pin`: in pinned
    memory, for `to_device(..., non_blocking)`."""
    from vimpac.pretrain import PretrainConfig, mask_clip_pairs

    c, T = config, config.max_clip_len
    pairs = torch.randint(
        0, c.vocab_size, (videos, 2, T, *c.token_map), generator=torch.Generator().manual_seed(seed + 1)
    )
    inputs, labels, _ = mask_clip_pairs(
        pairs, c, PretrainConfig(clip_len=T, mask_ratio=mask_ratio), torch.Generator().manual_seed(seed)
    )
    positions = (labels.flatten() != -100).nonzero().squeeze(1)  # `vimpac.model.label_positions`, on the host
    batch = (inputs, labels, positions)
    if pin:
        batch = tuple(t.pin_memory() for t in batch)
    return (*batch, bool((pairs == c.pad_id).any()), videos)


def to_device(batch: tuple, device) -> tuple:
    """A `pretrain_batch` moved to `device` as `vimpac.pretrain._masked_step` moves it (tensors `non_blocking`, nothing
    read back), with n_masked, the masked count as a float tensor on `device`, appended."""
    inputs, labels, positions, has_pad, m = batch
    moved = tuple(t.to(device, non_blocking=True) for t in (inputs, labels, positions))
    return (*moved, has_pad, m, torch.full((), float(len(positions)), device=device))


def pretrain_loss_fn(model, compiled: bool = False, amp_dtype=None, temperature: float = 0.2, alpha: float = 1.0):
    """`loss(forward, micro_batch)`: the pre-training loss of a `to_device` micro-batch as `vimpac.pretrain._loss_fn`
    computes it in one process, `forward` being `model` or its compiled wrapper, run under autocast at `amp_dtype`
    (None: fp32), the losses outside it. The model gets the masked count, the label positions and the host's [PAD]
    flag where its `forward` takes them (`forward_params`; compiled: no flag, and M marked dynamic, as the loop does);
    the InfoNCE is `info_nce_distributed`'s sum over the batch divided by the videos (the loop's; `info_nce` on kits
    without it). Returns a scalar float32 tensor."""
    from vimpac.losses import pretraining_loss

    try:
        from vimpac.losses import info_nce_distributed as nce_fn

        per_video = True
    except ImportError:
        from vimpac.losses import info_nce as nce_fn

        per_video = False
    params = forward_params(model)

    def loss(forward, mb):
        inputs, labels, positions, has_pad, m, n_masked = mb
        kw = {}
        if "num_masked" in params:
            kw["num_masked"] = n_masked
        if "label_positions" in params:
            if compiled:
                torch._dynamo.mark_dynamic(positions, 0)
            kw["label_positions"] = positions
        if "has_pad" in params:
            kw["has_pad"] = None if compiled else has_pad
        dev = inputs.device.type
        with torch.autocast(dev, dtype=amp_dtype, enabled=amp_dtype is not None):
            o = forward(inputs, labels, **kw)
        if "loss" in o:
            l_mask = o["loss"]
        else:  # kits whose model returned logits and targets only
            from vimpac.losses import mask_loss

            l_mask = mask_loss(o["logits"], o["targets"])[0]
        nce = nce_fn(o["features"][:m], o["features"][m:], temperature)[0]
        return pretraining_loss(l_mask, nce / m if per_video else nce, alpha, temperature)

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
