"""The GPU suite in one command (issue 13 §2): the `gpu`-marked tests, then the existing benchmarks (model throughput
per layout in bf16 with and without torch.compile, block masks against the loop, tokenizer encode throughput), their
results gathered in benchmarks/results/gpu-<device name>.json and printed as a markdown table. Exit status non-zero
when any part fails.

    python benchmarks/bench_gpu.py                      # on a GPU (make bench-gpu)
    python benchmarks/bench_gpu.py --device cpu --quick # toy sizes on a CPU (make bench-gpu DEVICE=cpu QUICK=1)
"""
import argparse, json, platform, re, subprocess, sys, tempfile, time
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent


def run(name, cmd, out_json=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    res = dict(name=name, ok=r.returncode == 0, seconds=round(time.perf_counter() - t, 1), cmd=" ".join(map(str, cmd)))
    if not res["ok"]: res["error"] = (r.stderr or r.stdout)[-2000:]
    elif out_json is not None and Path(out_json).is_file(): res["result"] = json.loads(Path(out_json).read_text())
    else: res["tail"] = r.stdout.strip().splitlines()[-1:] if r.stdout.strip() else []
    print(f"{'ok  ' if res['ok'] else 'FAIL'} {name} ({res['seconds']} s)", flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="toy sizes (a CPU run in well under a minute)")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    a = ap.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_gpu: error: --device cuda: no CUDA GPU is visible (use --device cpu --quick)", file=sys.stderr); return 2
    gpu = torch.cuda.get_device_name() if a.device.startswith("cuda") else platform.processor() or platform.machine()
    tmp, py = Path(tempfile.mkdtemp()), sys.executable
    prec = ["--precision", "bf16"] if a.device.startswith("cuda") else ["--precision", "fp32"]
    model = ["--preset", "tiny", "--size", "32", "--videos", "2", "--warmup", "1", "--repeats", "1", "--threads", "1"] if a.quick \
        else ["--videos", "64", "--warmup", "3", "--repeats", "10"]
    parts = [run("gpu tests", [py, "-m", "pytest", "-q", "-m", "gpu", str(HERE.parent / "tests")])]
    parts.append(run("model throughput, eager", [py, HERE / "model_throughput.py", "--device", a.device, *prec, *model, "--out", tmp / "m.json"], tmp / "m.json"))
    if not a.quick:
        parts.append(run("model throughput, compiled", [py, HERE / "model_throughput.py", "--device", a.device, *prec, *model, "--compile", "--out", tmp / "mc.json"], tmp / "mc.json"))
        for preset, extra in [("base", []), ("large_half", []), ("small", ["--clip-len", "10", "--size", "256"])]:
            parts.append(run(f"model throughput, {preset} {' '.join(extra)}".strip(), [py, HERE / "model_throughput.py", "--device", a.device, *prec,
                             "--videos", "16", "--warmup", "2", "--repeats", "5", "--preset", preset, *extra, "--out", tmp / f"{preset}.json"], tmp / f"{preset}.json"))
    parts.append(run("block masks vs loop", [py, HERE / "masking_speed.py", "--device", a.device, *(["--repeats", "3", "--loop-repeats", "1", "--threads", "1"] if a.quick else []),
                     "--out", tmp / "mask.json"], tmp / "mask.json"))
    parts.append(run("tokenizer encode", [py, HERE / "tokenize_throughput.py", "--device", a.device, "--parts", "encode",
                     *(["--repeats", "1", "--copies", "1", "--size", "32"] if a.quick else []), "--out", tmp / "tok.json"], tmp / "tok.json"))
    # pytest exits 5 when every test is deselected/skipped off a GPU: not a failure there
    if not parts[0]["ok"] and not a.device.startswith("cuda") and "skipped" in parts[0].get("error", "") + parts[0].get("cmd", ""): parts[0]["ok"] = True
    env = dict(device=gpu, torch=torch.__version__, cuda=torch.version.cuda, quick=a.quick, machine=platform.machine())
    name = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower() + ("-quick" if a.quick else "")
    out = Path(a.out_dir) / f"gpu-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(env=env, parts=parts), indent=1, default=str) + "\n")
    print(f"\n**{gpu}**, torch {env['torch']}, CUDA {env['cuda']}{' (quick, toy sizes)' if a.quick else ''}\n")
    print("| part | ok | seconds | figures |\n|---|---|---|---|")
    for p in parts:
        r = p.get("result") or {}
        fig = "; ".join(f"{row.get('layout', '')} {row.get('videos_per_s', 0):.2f} videos/s" for row in r.get("rows", []) if "videos_per_s" in row) if "rows" in r else ""
        print(f"| {p['name']} | {'yes' if p['ok'] else 'NO'} | {p['seconds']} | {fig} |")
    print(f"\nwritten: {out}")
    return 0 if all(p["ok"] for p in parts) else 1


if __name__ == "__main__":
    sys.exit(main())
