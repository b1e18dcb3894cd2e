"""Start-up of the console scripts (issue 24): `--help` answers without the heavy libraries (the tokenizer's codebook
library pulls in torch's compiler stack, about 1 s; matplotlib and gradio are imported where a figure or the page is
made), and every option of every script has a help text. The time of `vimpac-pretrain --help` is printed as a
benchmark line, not asserted (`benchmarks/startup.py` times every script)."""

import json, subprocess, sys, time, tomllib
from pathlib import Path
import pytest
from helpers import parser_of

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
HEAVY = ("vector_quantize_pytorch", "einx", "torch._dynamo", "matplotlib.pyplot", "gradio")


def test_importing_the_command_lines_leaves_out_the_heavy_libraries():
    "A fresh interpreter imports every console script's module; none of `HEAVY` is loaded (a check that can fail:"
    "the tokenizer's module imported vector_quantize_pytorch at the top until issue 24)."
    modules = sorted({target.split(":")[0] for target in SCRIPTS.values()})
    code = (
        f"import sys, json\nfor m in {modules!r}: __import__(m)\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def test_the_codebook_library_loads_when_a_tokenizer_is_built():
    "The lazy import still happens where it is needed: building the default VQ-VAE loads vector_quantize_pytorch."
    code = (
        "import sys\nfrom vimpac.tokenizer import VQVAE, VQVAEConfig\n"
        "assert 'vector_quantize_pytorch' not in sys.modules\n"
        "VQVAE(VQVAEConfig())\nprint('vector_quantize_pytorch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_option_has_help(script):
    "Each option and positional argument of the script has a help text (`--help` lists what it does)."
    parser = parser_of(SCRIPTS[script])
    missing = [a.option_strings or [a.dest] for a in parser._actions if not a.help]
    assert missing == [], f"{script}: options without help: {missing}"
    assert parser.prog == script


def test_pretrain_help_as_a_subprocess(capsys):
    "`vimpac-pretrain --help` as a user runs it: exit 0, the usage and the options; its time printed, not asserted."
    exe = Path(sys.executable).with_name("vimpac-pretrain")
    cmd = (
        [str(exe), "--help"]
        if exe.is_file()
        else [sys.executable, "-c", "from vimpac.cli import pretrain_main; pretrain_main()", "--help"]
    )
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    seconds = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: vimpac-pretrain") and "--mask-ratio" in r.stdout and "--store" in r.stdout
    with capsys.disabled():
        print(f"\nbenchmark (printed, not asserted): vimpac-pretrain --help took {seconds:.2f} s on this machine")


@pytest.mark.skipif(not __import__("os").environ.get("PYTEST_XDIST_WORKER"), reason="runs in a pytest-xdist worker")
def test_each_test_worker_runs_one_torch_thread():
    "`make test`'s two workers on two cores take one intra-op thread each (tests/conftest.py): torch is imported"
    "before conftest sets OMP_NUM_THREADS, and workers left at two threads each ran tiny models many times slower."
    import torch

    assert torch.get_num_threads() == 1
