"""Block-mask generation speed: `vimpac.masking.block_mask` (vectorized over the batch and the blocks) against a
plain per-sample, per-block loop like the authors' code (`mask_3d` in airsplay/vimpac: Python `random` draws and one
slice assignment per block), run on the same device. Also times `nearest_neighbour_fill`. Prints a table and writes
JSON; asserts nothing about time.

    python benchmarks/masking_speed.py --device cpu --threads 1 [--out benchmarks/results/masking_cpu.json]
    python benchmarks/masking_speed.py --device cuda [--out benchmarks/results/masking_cuda.json]

Sizes: pre-training (1024, 5, 16, 16) with 5 blocks, fine-tuning (1024, 10, 32, 32) with 7 blocks (Table 10's choices,
appendix B.1).
Figures are medians over repeats, in milliseconds per batch; the speed-up is the ratio of the two medians, measured
side by side in one run.
"""

import argparse, json, sys, random
import torch
from bench_utils import device_sync, machine_name, median_seconds
from vimpac.masking import block_mask, iid_mask, nearest_neighbour_fill

SIZES = {"pre-training": ((1024, 5, 16, 16), 5), "fine-tuning": ((1024, 10, 32, 32), 7)}


def loop_block_mask(shape, num_blocks, device):
    "The reference: one sample and one block at a time, as the paper's code does."
    b, l, h, w = shape
    mask = torch.zeros(shape, dtype=torch.bool, device=device)
    for i in range(b):
        for _ in range(num_blocks):
            lt, lh, lw = random.randint(1, l * 2 // 3), random.randint(1, h // 2), random.randint(1, w // 2)
            t0, h0, w0 = random.randint(0, l - lt), random.randint(0, h - lh), random.randint(0, w - lw)
            mask[i, t0 : t0 + lt, h0 : h0 + lh, w0 : w0 + lw] = True
    return mask


def median_ms(fn, repeats, sync):
    "Milliseconds: the median of `repeats` calls after one warm-up (`bench_utils.median_seconds`)."
    return 1e3 * median_seconds(fn, repeats, sync)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU)")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--loop-repeats", type=int, default=5)
    ap.add_argument(
        "--nn-fill-repeats",
        type=int,
        default=None,
        help="repeats of nearest_neighbour_fill (default: max(3, repeats // 4); 0 leaves it out)",
    )
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    sync = device_sync(dev)
    res = dict(
        machine=machine_name(dev),
        torch=torch.__version__,
        device=str(dev),
        threads=torch.get_num_threads(),
        rows=[],
    )
    g = torch.Generator(device=dev).manual_seed(0)
    random.seed(0)
    print(f"{res['machine']}, torch {res['torch']}, device {dev}, {res['threads']} threads")
    print(f"{'size':13s} {'shape':>20s} {'blocks':>6s} {'loop ms':>9s} {'vectorized ms':>14s} {'speed-up':>9s}")
    for name, (shape, k) in SIZES.items():
        t_loop = median_ms(lambda: loop_block_mask(shape, k, dev), a.loop_repeats, sync)
        t_vec = median_ms(lambda: block_mask(shape, k, generator=g), a.repeats, sync)
        row = dict(size=name, shape=shape, blocks=k, loop_ms=t_loop, vectorized_ms=t_vec, speedup=t_loop / t_vec)
        res["rows"].append(row)
        print(f"{name:13s} {str(shape):>20s} {k:6d} {t_loop:9.2f} {t_vec:14.3f} {t_loop / t_vec:8.1f}x")
    # nearest-neighbour fill on one pre-training batch of random codes (the worst case for copying)
    shape, k = SIZES["pre-training"]
    toks = torch.randint(0, 1024, shape, generator=g, device=dev)
    res["nn_fill_ms"] = {}
    nn_repeats = max(3, a.repeats // 4) if a.nn_fill_repeats is None else a.nn_fill_repeats
    cases = (
        [("block 15%", block_mask(shape, k, generator=g)), ("i.i.d. 15%", iid_mask(shape, 0.15, generator=g))]
        if nn_repeats
        else []
    )
    for kind, m in cases:
        for mode in ("spatial", "spatiotemporal"):
            t = median_ms(lambda: nearest_neighbour_fill(toks, m, mode), nn_repeats, sync)
            res["nn_fill_ms"][f"{kind}, {mode}"] = t
            print(f"nearest_neighbour_fill {kind:10s} {mode:15s} batch {shape}: {t:8.2f} ms")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
