"""Tokenization throughput: decoding alone (by worker count), encoding alone (by batch size), and end to end, for the
kit's default VQ-VAE and DALL-E's dVAE architecture. Prints a table and writes JSON; asserts nothing about time.

    python benchmarks/tokenize_throughput.py [--device cpu|cuda] [--repeats 3] [--out benchmarks/results/NAME.json]

The dVAE is timed at the official size (n_hid 256, 2 blocks per group, V = 8192) with random weights: its speed does
not depend on the weight values, and no official file is needed. Figures are medians over repeats, in frames/s
(sampled frames of the centre view at S = 128). On CUDA, encoding is also timed under bf16 / fp16 autocast and with
channels_last.
"""

import argparse, json, os, sys, shutil, tempfile
from pathlib import Path
import torch
from vimpac.video import CENTER_VIEW, sample_videos, read_views
from vimpac.tokenizer import load_tokenizer, DalleTokenizer, DalleEncoder, DalleDecoder
from vimpac.store import build_store, DecodeVideos
from bench_utils import device_sync, machine_name, median_seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--copies", type=int, default=4, help="times the sample-video list is repeated for decoding")
    ap.add_argument("--fps", type=float, default=8.0)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--out", default=None)
    ap.add_argument("--parts", default="decode,encode,e2e", help="comma-separated subset of decode,encode,e2e")
    a = ap.parse_args(argv)
    dev = torch.device(a.device)
    sync = device_sync(dev)
    res = dict(
        machine=machine_name(dev),
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        fps=a.fps,
        size=a.size,
        decode={},
        encode={},
        end_to_end={},
    )
    videos = sample_videos() * a.copies

    parts = a.parts.split(",")
    # decoding alone, by worker count
    for workers in [0, 1, 2, 4] if "decode" in parts else []:
        if workers > (os.cpu_count() or 1) * 2:
            continue
        ds = DecodeVideos([(str(i), v, v.name) for i, v in enumerate(videos)], a.fps, a.size, [CENTER_VIEW], 64)
        n = sum(len(read_views(v, a.fps, a.size)["1x-center"]) for v in sample_videos()) * a.copies

        def run():
            for _ in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, collate_fn=lambda x: x):
                pass

        t = median_seconds(run, a.repeats)
        res["decode"][workers] = n / t
        print(f"decode   workers={workers}: {n / t:8.1f} frames/s")

    frames = torch.from_numpy(read_views(sample_videos()[1], a.fps, a.size)["1x-center"])
    torch.manual_seed(0)
    toks = {
        "default VQ-VAE": load_tokenizer("default", device=dev),
        "DALL-E dVAE": DalleTokenizer(DalleEncoder(), DalleDecoder()).to(dev),
    }
    for name, tok in toks.items() if "encode" in parts else []:
        sizes = [8, 32, 64] if name == "default VQ-VAE" else ([1, 4, 8] if dev.type == "cpu" else [8, 32, 64])
        for bs in sizes:
            x = frames[:bs].repeat(-(-bs // len(frames)), 1, 1, 1)[:bs].to(dev)
            variants = {"fp32": (None, False)}
            if dev.type == "cuda":
                variants.update(
                    {
                        "bf16": (torch.bfloat16, False),
                        "fp16": (torch.float16, False),
                        "fp32+channels_last": (None, True),
                    }
                )
            for vname, (dtype, cl) in variants.items():
                if cl:
                    tok.to(memory_format=torch.channels_last)

                def enc():
                    with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
                        tok.encode(x)

                t = median_seconds(enc, a.repeats, sync)
                res["encode"][f"{name} | batch {bs} | {vname}"] = bs / t
                print(f"encode   {name:15s} batch={bs:3d} {vname:18s}: {bs / t:8.1f} frames/s")
                if cl:
                    tok.to(memory_format=torch.contiguous_format)

    # end to end: decode workers + encode + LMDB writes, into a fresh store each time
    for name, tok in toks.items() if "e2e" in parts else []:
        vids = sample_videos() * (a.copies if name == "default VQ-VAE" or dev.type == "cuda" else 1)
        n = sum(len(read_views(v, a.fps, a.size)["1x-center"]) for v in vids)
        stage = Path(
            tempfile.mkdtemp()
        )  # real copies: a store keys videos by resolved path, so symlinks would be deduplicated
        paths = []
        for i, v in enumerate(vids):
            p = stage / f"v{i}{v.suffix}"
            shutil.copyfile(v, p)
            paths.append(p)
        for workers in [0, 2]:

            def e2e():
                with tempfile.TemporaryDirectory() as d:
                    s = build_store(
                        paths,
                        tok,
                        Path(d) / "store",
                        fps=a.fps,
                        frame_size=a.size,
                        batch_size=32,
                        workers=workers,
                        progress=False,
                    )
                    assert len(s.stored) == len(vids), (len(s.stored), len(vids))

            t = median_seconds(e2e, max(1, a.repeats - 1), sync)
            res["end_to_end"][f"{name} | workers {workers}"] = n / t
            print(f"end2end  {name:15s} workers={workers}: {n / t:8.1f} frames/s")

    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
