"""What the benchmark scripts share: a device's synchronisation, the median time of repeated calls, peak memory.
Imported as `from bench_utils import ...` (a script's folder is on `sys.path` when it runs)."""
import resource, statistics, time
import torch


def device_sync(device):
    "A function that waits for `device`'s queued work: `torch.cuda.synchronize` on CUDA, nothing on a CPU."
    return torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)


def median_seconds(fn, repeats: int, sync=lambda: None, warmup: int = 1) -> float:
    "The median wall time in seconds of `repeats` calls of `fn` (each followed by `sync`), after `warmup` untimed calls."
    for _ in range(warmup): fn()
    sync()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def peak_memory_gb(device) -> float:
    "Peak memory in GB: on CUDA torch's peak allocated on `device`, on a CPU this process's peak resident set size."
    if torch.device(device).type == "cuda": return torch.cuda.max_memory_allocated(device) / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
