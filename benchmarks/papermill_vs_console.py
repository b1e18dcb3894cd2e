"""Pre-training speed through papermill (`nbs/runs/pretrain.ipynb`) against the console tool (`vimpac-pretrain`),
the same run side by side: one store, the same options, the two launched in turns (A B A B ...) so that both see the
same machine load; each run's rate is its `run_summary.json` median videos/s (`vimpac.engine.MetricsLog.summary`).

    .venv/bin/python benchmarks/papermill_vs_console.py [--rounds 3] [--steps 60] [--out FILE.json]

Prints each round's two rates, the medians and the ratio papermill / console (the issue's bar: within 20%), with the
device, threads and torch version each run recorded. The store: the bundled sample videos at 64 px, 2 FPS."""

import argparse, json, statistics, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def console(store: Path, out: Path, steps: int, batch: int) -> dict:
    cmd = [
        BIN / "vimpac-pretrain",
        "--store",
        store,
        "--out",
        out,
        "--steps",
        steps,
        "--batch-size",
        batch,
        "--no-eval",
    ]
    subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True)
    return json.loads((out / "run_summary.json").read_text())


def notebook(store: Path, out: Path, steps: int, batch: int) -> dict:
    cmd = [BIN / "papermill", ROOT / "nbs/runs/pretrain.ipynb", out.with_suffix(".ipynb"), "-p", "store", store]
    cmd += ["-p", "out", out, "-p", "steps", steps, "-p", "batch_size", batch, "-p", "log_every", 10]
    subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True)
    return json.loads((out / "model" / "run_summary.json").read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=3)
    ap.add_argument("--out", default=None, help="a JSON file for the results")
    a = ap.parse_args(argv)
    from vimpac.store import tokenize_videos
    from vimpac.video import sample_videos

    tmp = Path(tempfile.mkdtemp(prefix="vimpac-pm-"))
    tokenize_videos(sample_videos(), tmp / "store", fps=2.0, frame_size=64, progress=False)
    rows = []
    for r in range(a.rounds):
        c = console(tmp / "store", tmp / f"console{r}", a.steps, a.batch_size)
        n = notebook(tmp / "store", tmp / f"notebook{r}", a.steps, a.batch_size)
        rows.append(dict(round=r, console=c, papermill=n))
        print(
            f"round {r}: console {c['videos_per_s']:.2f} videos/s ({c['threads']} threads), "
            f"papermill {n['videos_per_s']:.2f} videos/s ({n['threads']} threads)",
            flush=True,
        )
    med = {k: statistics.median(row[k]["videos_per_s"] for row in rows) for k in ("console", "papermill")}
    ratio = med["papermill"] / med["console"]
    env = {k: rows[0]["console"][k] for k in ("device", "device_name", "torch", "python")}
    print(f"median videos/s: console {med['console']:.2f}, papermill {med['papermill']:.2f}; ratio {ratio:.2f} ({env})")
    if a.out:
        Path(a.out).write_text(json.dumps(dict(rounds=rows, median=med, ratio=ratio, env=env), indent=1))


if __name__ == "__main__":
    main()
