"""Start-up time of the console scripts: each script's `--help` in a fresh process (the import of its module and the
parsing), beside the floors that no change to the kit can remove (the interpreter alone, `import torch`). With
`--before CHECKOUT`, the same commands run with another checkout's package (e.g. the commit before the lazy imports)
side by side, interleaved, and the ratio of the medians is printed. Asserts nothing about time.

    python benchmarks/startup.py [--repeats 5] [--before OLD_CHECKOUT] [--out benchmarks/results/startup_cpu.json]
"""

import argparse, json, os, platform, statistics, subprocess, sys, time, tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commands() -> dict:
    "name -> the Python source a fresh interpreter runs: the floors, then each console script with `--help`."
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    cmds = {"python (interpreter alone)": "pass", "import torch": "import torch"}
    for name, target in sorted(scripts.items()):
        module, fn = target.split(":")
        cmds[f"{name} --help"] = f"import sys\nfrom {module} import {fn}\nsys.argv[0] = {name!r}\n{fn}(['--help'])"
    return cmds


def seconds(source: str, checkout: Path) -> float:
    "Wall-clock seconds of a fresh interpreter running `source` with the package of `checkout` first on its path."
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", source], cwd=checkout, env=env, capture_output=True, text=True)
    t = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"startup: {source!r} failed in {checkout}: {r.stderr.strip().splitlines()[-1]}")
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each command (the median is reported)")
    ap.add_argument("--before", type=Path, default=None, help="another checkout timed side by side")
    ap.add_argument("--out", default=None, help="JSON file of the figures")
    a = ap.parse_args(argv)
    checkouts = {"now": ROOT} | ({"before": a.before.resolve()} if a.before else {})
    rows = []
    print(f"{'command':34s} " + " ".join(f"{k + ' s':>9s}" for k in checkouts) + ("  ratio" if a.before else ""))
    for name, source in commands().items():
        times = {k: [] for k in checkouts}
        for _ in range(a.repeats):  # interleaved: a busy spell hits both
            for k, path in checkouts.items():
                times[k].append(seconds(source, path))
        med = {k: statistics.median(v) for k, v in times.items()}
        row = dict(command=name, **{f"{k}_s": round(v, 3) for k, v in med.items()})
        line = f"{name:34s} " + " ".join(f"{v:9.2f}" for v in med.values())
        if a.before:
            row["before_over_now"] = round(med["before"] / med["now"], 2)
            line += f"  x{row['before_over_now']:.2f}"
        rows.append(row)
        print(line)
    res = dict(machine=f"{platform.machine()} {os.cpu_count()} cores", python=platform.python_version(), rows=rows)
    res.update(repeats=a.repeats, before=str(a.before) if a.before else None)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
