"""The GPU suite in one command (issue 13 §2): the `gpu`-marked tests and notebook cells, then the benchmarks (model
throughput per preset and layout in bf16 with and without torch.compile, the attention backends per row shape
(`sdpa_backends.py`), block masks against the loop, tokenizer encode throughput, a 200-step `vimpac-pretrain` on
the sample store, fine-tuning steps, 3x10-view evaluation), their results gathered in
benchmarks/results/gpu-<device name>.json and printed as a markdown table naming the GPU, torch and CUDA. Exit status
1 when any part fails.

    python benchmarks/bench_gpu.py                      # on a GPU (make bench-gpu)
    python benchmarks/bench_gpu.py --device cpu --quick # toy sizes on a CPU (make bench-gpu DEVICE=cpu QUICK=1)

Every part is one of the scripts beside this one, run as its own process (its peak memory and a CUDA fault stay its
own) through its command line. A GPU run is planned to fit `PLANNED_S` (about 14 minutes) on one H100: each part has a
budget in seconds
(`PARTS`, estimated, see benchmarks/README.md), a part that runs past twice its budget is stopped and fails, and the
table shows the time of each part against its budget. A quick run (`--quick`) has no budgets and writes its JSON
to `$BENCH_OUT` or <temp dir>/vimpac-bench (toy figures are not results to commit).
"""

import argparse, json, os, platform, re, subprocess, sys, tempfile, time
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent
ROOT, BIN = HERE.parent, Path(sys.executable).parent
PLANNED_S = 830  # 13 min 50 s on one H100: issue 13's 9 minutes, plus room for two compiles in the gpu tests and
# in the compiled model part (issue 20: a compile of Small takes about 60-120 s on a GPU), plus the attention check
# (issue 34: 27 s measured on an H100)
COMPILE_S = 120  # one torch.compile of a model's forward and backward on a GPU, at the most


def gpu_notebooks(folder=ROOT / "nbs") -> list[Path]:
    "The notebooks under `folder` with a code cell flagged `#| gpu` (nbdev-test skips them unless run with `--flags"
    "gpu`)."
    return sorted(
        nb
        for nb in Path(folder).rglob("*.ipynb")
        if any(
            l.strip().startswith("#| gpu")
            for c in json.loads(nb.read_text())["cells"]
            if c["cell_type"] == "code"
            for l in ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]).splitlines()
        )
    )


def gpu_test_files() -> list[str]:
    "The test files that hold `gpu`-marked tests (collecting only these keeps the CPU run short)."
    return sorted(str(f) for f in (ROOT / "tests").glob("test_*.py") if "pytest.mark.gpu" in f.read_text())


def parts(device: str, quick: bool, tmp: Path, peak_tflops=None) -> list[dict]:
    """The suite's parts: dict(name, cmd, out (the JSON the part writes, or None), budget_s (planned seconds on one
    H100; None in a quick run))."""
    py, gpu = sys.executable, device.startswith("cuda")
    prec = ["--precision", "bf16" if gpu else "fp32"]
    peak = ["--peak-tflops", str(peak_tflops)] if peak_tflops else []

    def part(name, budget, script, *args):
        "A part: `script` (beside this file) run with `--device DEVICE ARGS --out JSON`, or, with `script` None, the"
        "command `args`."
        out = tmp / (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".json") if script else None
        cmd = [py, HERE / script, "--device", device, *map(str, args), "--out", out] if script else list(args)
        return dict(name=name, cmd=[str(x) for x in cmd], out=out, budget_s=None if quick else budget)

    def sized(toy, full=()):
        "The options `toy` in a quick run, `full` otherwise."
        return [*(toy if quick else full)]

    nbs = gpu_notebooks()
    # the gpu tests compile (vimpac-pretrain --compile: forward and backward) besides their eager runs: two compiles fit
    tests = [py, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", *gpu_test_files()]
    ps = [part("gpu tests", 2 * COMPILE_S, None, *tests)]
    if gpu and nbs:  # nbdev-test takes one path: the notebooks are picked by a regex over their full paths
        cells = ["--flags", "gpu", "--path-re", "(" + "|".join(re.escape(str(nb)) for nb in nbs) + ")$"]
        ps.append(part("gpu notebook cells", 20, None, BIN / "nbdev-test", ROOT / "nbs", *cells))
    size = "tiny T=5 S=32" if quick else "Small T=5 S=128"
    model = sized(
        ["--preset", "tiny", "--size", "32", "--videos", "2", "--warmup", "1", "--repeats", "1", "--threads", "1"],
        ["--videos", "64", "--warmup", "3", "--repeats", "10"],
    )
    ps.append(part(f"model, {size}, eager", 45, "model_throughput.py", *prec, *model))
    if not quick:
        # compiled: the layout of the goal only (each layout is its own process and its own compile, forward and
        # backward, and a recompile where the masked count M first changes): two compiles fit
        compiled = [*prec, *model, "--compile", "--layouts", "T,H|W"]
        ps.append(part("model, Small T=5 S=128, compiled", 2 * COMPILE_S, "model_throughput.py", *compiled))
        one = [*prec, "--layouts", "T,H|W", "--videos", "16", "--warmup", "2", "--repeats", "5"]
        ps += [
            part("model, Base T=5 S=128", 20, "model_throughput.py", *one, "--preset", "base"),
            part("model, Large-Half T=5 S=128", 25, "model_throughput.py", *one, "--preset", "large_half"),
            part("model, Small T=10 S=256", 25, "model_throughput.py", *one, "--clip-len", "10", "--size", "256"),
        ]
    # the attention backends on the kit's row shapes (issue 34; 27 s on an H100): what `attention_backends` pins
    ps.append(part("attention backends", 30, "sdpa_backends.py", *sized(["--quick"])))
    masks = sized(["--repeats", "3", "--loop-repeats", "1", "--nn-fill-repeats", "0", "--threads", "1"])
    ps.append(part("block masks vs loop", 15, "masking_speed.py", *masks))
    encode = ["--parts", "encode", *sized(["--repeats", "1", "--copies", "1", "--size", "32"])]
    ps.append(part("tokenizer encode", 40, "tokenize_throughput.py", *encode))
    ps.append(part("vimpac-pretrain, sample store", 60, "pretrain_speed.py", *peak, *sized(["--quick"])))
    steps = sized(
        ["--cases", "tiny:5:32:2", "--warmup", "1", "--repeats", "1", "--threads", "1"],
        ["--cases", "small:10:256:16", "--warmup", "3", "--repeats", "10"],
    )
    ps.append(part("fine-tuning steps", 30, "finetune_steps.py", *prec, "--accum", "1", *steps))
    views = sized(
        ["--settings", "toy", "--videos", "2", "--repeats", "1", "--threads", "1"],
        ["--settings", "paper", "--videos", "32", "--repeats", "2"],
    )
    ps.append(part("evaluation, 3x10 views", 30, "evaluate_speed.py", *prec, "--batch-sizes", "30", *views))
    return ps


def run(p: dict) -> dict:
    """Run one part (its own process; stopped at twice its budget) and return its record: name, ok, seconds, budget_s,
    cmd, and `result` (the JSON it wrote) or `error` (the end of its output)."""
    t = time.perf_counter()
    try:
        r = subprocess.run(
            p["cmd"], capture_output=True, text=True, cwd=ROOT, timeout=2 * p["budget_s"] if p["budget_s"] else None
        )
        ok, text = r.returncode == 0, r.stderr + r.stdout
        if r.returncode == 5 and "-m" in p["cmd"] and "gpu" in p["cmd"]:
            ok = True  # pytest: every test skipped (no GPU)
    except subprocess.TimeoutExpired as e:
        ok, text = False, f"stopped after {e.timeout:.0f} s (twice the budget)\n{(e.stderr or b'').decode()[-1500:]}"
    res = dict(
        name=p["name"], ok=ok, seconds=round(time.perf_counter() - t, 1), budget_s=p["budget_s"], cmd=" ".join(p["cmd"])
    )
    if not ok:
        res["error"] = text[-2000:]
    elif p["out"] is not None and Path(p["out"]).is_file():
        res["result"] = json.loads(Path(p["out"]).read_text())
    else:
        res["tail"] = text.strip().splitlines()[-1:]
    print(f"{'ok  ' if ok else 'FAIL'} {p['name']} ({res['seconds']} s)", flush=True)
    if not ok:
        print(res["error"], file=sys.stderr)
    return res


def figures(r: dict) -> str:
    "The headline figures of a part's result, for the table."
    x = r.get("result") or {}
    if "fastest" in x:
        won = {}
        for v in x["fastest"].values():
            won[v] = won.get(v, 0) + 1
        return "fastest (shape classes won): " + ", ".join(f"{k} {n}" for k, n in sorted(won.items()))
    if "rows" in x and any("layout" in row for row in x["rows"]):
        return "; ".join(
            f"{row['layout']} {row['videos_per_s']:.1f} videos/s"
            + (f" ({100 * row['mfu']:.0f}% MFU)" if row.get("mfu") else "")
            for row in x["rows"]
        )
    if "rows" in x:
        return "; ".join(
            f"{row['size']} {row['vectorized_ms']:.2f} ms, x{row['speedup']:.0f} the loop" for row in x["rows"]
        )
    if "encode" in x:
        best = {}
        for k, v in x["encode"].items():
            best[k.split(" | ")[0]] = max(v, best.get(k.split(" | ")[0], 0))
        return "; ".join(f"{k} up to {v:.0f} frames/s" for k, v in best.items())
    if "videos_per_s" in x:
        mfu = f", {100 * x['mfu']:.1f}% MFU" if x.get("mfu") else ""
        speed = f"{x['videos_per_s']:.1f} videos/s{mfu}"
        return f"{x['preset']} batch {x['batch_size']}: {speed}, peak {x['peak_mem_gb']:.2f} GB"
    if "results" in x and x["results"] and "clips_per_s" in x["results"][0] and "case" in x["results"][0]:
        return "; ".join(
            f"{row['case']}: {row['clips_per_s']:.1f} videos/s, peak {row['peak_mem_gb']:.2f} GB"
            for row in x["results"]
        )
    if "results" in x:
        return "; ".join(
            f"{row['preset']} T={row['clip_len']} S={row['frame_size']}: {row['videos_per_s_3x10']:.2f} videos/s at "
            "3x10"
            for row in x["results"]
        )
    return " ".join(r.get("tail", [])) if r["ok"] else "failed"


def environment(device: str, quick: bool) -> dict:
    gpu = device.startswith("cuda")
    return dict(
        device=torch.cuda.get_device_name(device) if gpu else platform.processor() or platform.machine(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if gpu else None,
        driver_capability=list(torch.cuda.get_device_capability(device)) if gpu else None,
        cpus=os.cpu_count(),
        machine=platform.machine(),
        python=platform.python_version(),
        quick=quick,
    )


def table(env: dict, results: list[dict], total: float) -> str:
    cuda = (
        f"CUDA {env['cuda']}" + (f", cuDNN {env['cudnn']}" if env["cudnn"] else "")
        if env["cuda"]
        else "no CUDA (a CPU run)"
    )
    head = f"**{env['device']}**, torch {env['torch']}, {cuda}, {env['cpus']} CPU cores" + (
        " (quick: toy sizes)" if env["quick"] else ""
    )
    rows = [
        f"| {r['name']} | {'yes' if r['ok'] else 'NO'} | {r['seconds']} | {r['budget_s'] or '-'} | {figures(r)} |"
        for r in results
    ]
    plan = "" if env["quick"] else f" (planned {PLANNED_S} s)"
    return "\n".join(
        [
            head,
            "",
            "| part | ok | seconds | budget (s) | figures |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"total {total:.0f} s{plan}",
        ]
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="toy sizes (a CPU run in a few minutes at most)")
    ap.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's peak TFLOP/s for the pre-training MFU "
        "(default: a known GPU's dense bf16 peak; on a CPU, a measured matmul rate)",
    )
    ap.add_argument(
        "--out-dir", default=None, help="default: benchmarks/results (quick: $BENCH_OUT or <temp>/vimpac-bench)"
    )
    a = ap.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_gpu: error: --device cuda: no CUDA GPU is visible (use --device cpu --quick)", file=sys.stderr)
        return 2
    env = environment(a.device, a.quick)
    t0, tmp = time.perf_counter(), Path(tempfile.mkdtemp(prefix="vimpac-bench-parts-"))
    results = [run(p) for p in parts(a.device, a.quick, tmp, a.peak_tflops)]
    total = time.perf_counter() - t0
    out_dir = Path(
        a.out_dir
        or (
            os.environ.get("BENCH_OUT") or Path(tempfile.gettempdir()) / "vimpac-bench" if a.quick else HERE / "results"
        )
    )
    name = re.sub(r"[^A-Za-z0-9]+", "-", env["device"]).strip("-").lower() + ("-quick" if a.quick else "")
    out = out_dir / f"gpu-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    md = table(env, results, total)
    out.write_text(
        json.dumps(
            dict(env=env, total_s=round(total, 1), planned_s=None if a.quick else PLANNED_S, parts=results),
            indent=1,
            default=str,
        )
        + "\n"
    )
    print("\n" + md + f"\n\nwritten: {out}")
    if not a.quick and total > PLANNED_S:
        print(f"bench_gpu: warning: the suite took {total:.0f} s, over the {PLANNED_S} s planned", file=sys.stderr)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
