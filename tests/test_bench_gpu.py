"""`make bench-gpu` on a fresh GPU box (issue 20 §7): budgets that fit two compiles, an install path with only what the
suite needs (not the dev extra, not dall-e; the system's CUDA torch kept), and a stale CPU venv refused with one line
(benchmarks/bench_env.py, its logic checked with stand-ins for the venv's torch and nvidia-smi)."""

import json, os, re, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_env  # noqa: E402 (benchmarks/ is not a package)
import bench_gpu  # noqa: E402


def test_budgets_fit_two_compiles_and_the_plan(tmp_path, monkeypatch):
    """With a `#| gpu` notebook present (its part added), the parts' budgets sum to at most `PLANNED_S`; the gpu tests
    and the compiled model part each leave room for two compiles; the compiled part times the goal's layout."""
    monkeypatch.setattr(bench_gpu, "gpu_notebooks", lambda folder=None: [tmp_path / "a.ipynb"])
    ps = bench_gpu.parts("cuda", False, tmp_path)
    names = [p["name"] for p in ps]
    assert "gpu notebook cells" in names
    assert sum(p["budget_s"] for p in ps) <= bench_gpu.PLANNED_S
    by = {p["name"]: p for p in ps}
    compiled = next(p for n, p in by.items() if "compiled" in n)
    assert by["gpu tests"]["budget_s"] >= 2 * bench_gpu.COMPILE_S and compiled["budget_s"] >= 2 * bench_gpu.COMPILE_S
    assert bench_gpu.COMPILE_S >= 120  # a compile of Small on a GPU: 60-120 s
    assert "--compile" in compiled["cmd"] and compiled["cmd"][compiled["cmd"].index("--layouts") + 1] == "T,H|W"


def _dry_run(*args):
    if shutil.which("make") is None:
        pytest.skip("no `make` on this machine")
    r = subprocess.run(
        [*"make -n -B --no-print-directory -C".split(), str(ROOT), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_bench_gpu_installs_only_what_the_suite_needs(tmp_path):
    """`make -n -B bench-gpu` (every step printed, nothing run) into a venv that is not there: the check of a stale venv
    first, a venv that sees the system's torch, the kit with the `bench` extra; never the dev extra nor dall-e. The
    `bench` extra holds neither Gradio nor Playwright."""
    venv = tmp_path / "venv"
    out = _dry_run("bench-gpu", f"VENV={venv}")
    lines = [line for line in out.splitlines() if line.strip()]
    assert "bench_env.py" in lines[0] and f"--venv {venv}" in lines[0]
    assert "--system-site-packages" in out and '-e ".[bench]"' in out
    assert ".[dev]" not in out and "dall-e" not in out and "dall_e" not in out
    assert "benchmarks/bench_gpu.py --device cuda" in lines[-1]
    quick = _dry_run("bench-gpu", f"VENV={venv}", "DEVICE=cpu", "QUICK=1")
    assert "bench_gpu.py --device cpu --quick" in quick and ".[dev]" not in quick
    bench = re.search(r"^bench = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(
        1
    )  # no tomllib on 3.10
    assert '"pytest' in bench and not any(x in bench.lower() for x in ("gradio", "playwright", "dall"))


@pytest.mark.parametrize(
    "exists, cuda, version, gpu, device, refused",
    [
        (True, None, "2.13.0+cpu", True, "cuda", True),  # the stale CPU venv on a GPU box
        (True, None, "2.13.0+cpu", True, "cuda:1", True),
        (True, "12.4", "2.5.1+cu124", True, "cuda", False),  # a venv with a CUDA torch
        (True, None, "2.13.0+cpu", False, "cuda", False),  # no GPU seen: bench_gpu.py says so itself
        (True, None, "2.13.0+cpu", True, "cpu", False),  # a CPU run asked for (make test's quick run)
        (False, None, None, True, "cuda", False),  # no venv yet: the install path makes one
        (True, None, None, True, "cuda", False),  # a venv without torch: the install path adds one
    ],
)
def test_stale_venv_logic(exists, cuda, version, gpu, device, refused):
    msg = bench_env.stale_venv_message(exists, cuda, version, gpu, device)
    assert (msg is not None) == refused
    if refused:
        assert "\n" not in msg and "make clean-venv" in msg and version in msg


def test_stale_venv_refused_with_one_line(tmp_path, monkeypatch, capsys):
    """bench_env.py's command line against a venv whose python is a stand-in printing a CPU torch's version, with
    nvidia-smi seeing a GPU: exit 1 and one line; with a CUDA torch: exit 0 and nothing printed."""
    py = tmp_path / "venv" / "bin" / "python"
    py.parent.mkdir(parents=True)

    def fake_torch(version, cuda):
        py.write_text(f"#!/bin/sh\nprintf '{version}\\n{cuda}\\n'\n")
        py.chmod(0o755)

    monkeypatch.setattr(bench_env, "gpu_seen", lambda: True)
    fake_torch("2.13.0+cpu", "None")
    assert bench_env.venv_torch(py) == ("2.13.0+cpu", None)
    assert bench_env.main(["--venv", str(py.parent.parent), "--device", "cuda"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CPU-only torch (2.13.0+cpu)" in err and "make clean-venv" in err
    fake_torch("2.5.1+cu124", "12.4")
    assert bench_env.main(["--venv", str(py.parent.parent), "--device", "cuda"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(bench_env, "gpu_seen", lambda: False)
    fake_torch("2.13.0+cpu", "None")
    assert bench_env.main(["--venv", str(py.parent.parent)]) == 0


@pytest.mark.slow
def test_quick_suite_passes_on_this_cpu(tmp_path):
    """`make bench-gpu DEVICE=cpu QUICK=1`: the GPU suite at toy sizes on the CPU (CI has no GPU), through the target
    a GPU box runs. Every part passes, and the results file says so part by part. (A test, not a step of `make test`
    after pytest: the test workers run it beside other tests, instead of one core running it alone.)"""
    if shutil.which("make") is None:
        pytest.skip("no `make` on this machine")
    cmd = ["make", "--no-print-directory", "-C", str(ROOT), "bench-gpu", "DEVICE=cpu", "QUICK=1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "BENCH_OUT": str(tmp_path)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    (written,) = tmp_path.glob("gpu-*-quick.json")
    parts = json.loads(written.read_text())["parts"]
    assert len(parts) >= 8 and all(p["ok"] for p in parts), [(p["name"], p["ok"]) for p in parts]
    assert {"gpu tests", "attention backends", "fine-tuning steps"} <= {p["name"] for p in parts}
