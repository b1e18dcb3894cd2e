"""Small helpers shared by the test files (imported as `from helpers import ...`: pytest puts tests/ on the path)."""

import argparse, contextlib, importlib, os, signal, socket, subprocess, tempfile, time
import torch.distributed as dist
import numpy as np
from vimpac.synthetic import write_video
from vimpac.store import build_store
from vimpac.tokenizer import load_tokenizer
from pathlib import Path

# The attention backends and peaks measured on an H100 (benchmarks/sdpa_backends.py, issue 34), which the roofline and
# the memory plan are checked against.
H100_ATTENTION = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "gpu-h100-attention.json"


def run_command(*argv, timeout=300, **kwargs):
    "Runs the command `argv` (each part passed through `str`) with its output captured as text; returns the"
    "`subprocess.CompletedProcess`."
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)


def run_in_process(main, argv, capsys):
    "(exit status, stdout, stderr) of a console script's `main` run in this process on `argv` (each part passed"
    "through `str`), its output read from pytest's `capsys`."
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def error_line(r, code=2):
    "Asserts the finished command `r` exited with `code` (2: a usage or data error) and returns its last stderr line."
    assert r.returncode == code, r.stderr
    return r.stderr.strip().splitlines()[-1]


def run_argv(store, out, *extra, device="cpu", precision="fp32"):
    "`--store STORE --out OUT --device DEVICE [--precision PRECISION] EXTRA...` as strings: how the pre-training and"
    "fine-tuning runs here start (`precision=None`: the command's default)."
    argv = [
        "--store",
        store,
        "--out",
        out,
        "--device",
        device,
        *(["--precision", precision] if precision else []),
        *extra,
    ]
    return [str(a) for a in argv]


def killed_at(cmd, target, env, timeout=300):
    "Starts the command `cmd` (output dropped) and sends it SIGKILL once the file `target` exists (or it has ended, or"
    "`timeout` seconds have passed); returns its exit status (`-signal.SIGKILL` when the kill stopped it)."
    p = subprocess.Popen([str(a) for a in cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while not target.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    return p.returncode


def weights(run):
    "The tensors of the saved model in the run folder `run` (model.safetensors)."
    from safetensors.torch import load_file

    return load_file(str(run / "model.safetensors"))


class RunsCode:
    "An object whose pickle, when loaded, runs `touch TARGET` (a hostile file the loaders must refuse)."

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.target}",))


class _Parsed(Exception):
    "Raised in place of parsing, carrying the parser a console script built."


def parser_of(target: str) -> argparse.ArgumentParser:
    "The option parser the console script `target` (`module:function`, as in pyproject.toml) builds, caught before it"
    "parses anything."
    module, name = target.split(":")
    main = getattr(importlib.import_module(module), name)
    parse = argparse.ArgumentParser.parse_args
    try:
        argparse.ArgumentParser.parse_args = lambda self, *a, **k: (_ for _ in ()).throw(_Parsed(self))
        main([])
    except _Parsed as e:
        return e.args[0]
    finally:
        argparse.ArgumentParser.parse_args = parse
    raise AssertionError(f"{target} returned without parsing its options")


def screenshot_path(name: str) -> Path:
    """Where a browser test saves its screenshot `name`: the README's `images/NAME` under `make screenshots`
    (`VIMPAC_SCREENSHOTS=1`), else a temporary folder, so that `make test` leaves the tracked images alone."""
    if os.environ.get("VIMPAC_SCREENSHOTS") == "1":
        folder = Path(__file__).resolve().parents[1] / "images"
    else:
        folder = Path(tempfile.gettempdir()) / "vimpac-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


CHROMIUM = __import__("shutil").which("chromium") or __import__("shutil").which("chromium-browser")
NO_CHROMIUM = "Debian's chromium is not installed (apt-get install chromium); .ci/run installs it"


def browser_page(viewport=(1400, 1300)):
    """A context manager giving a fresh page of Debian's headless Chromium (`CHROMIUM`, through Playwright) of
    `viewport` (width, height) pixels, closed afterwards; skips the test, saying why, without Playwright for Python.
    Callers mark themselves `skipif(CHROMIUM is None, reason=NO_CHROMIUM)`."""
    import contextlib
    import pytest

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright for Python is not installed")

    @contextlib.contextmanager
    def page():
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            try:
                yield browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            finally:
                browser.close()

    return page()


# ---- toy labelled videos and stores (a class per colour, one frame tells them apart), shared by the test files ----
COLOURS = {"red": (200, 40, 40), "green": (40, 200, 40), "blue": (40, 40, 200)}


def toy_video(path, colour, seed, seconds=3, fps=4, size=32):
    "Noisy frames of one colour with a drifting texture, MPEG-4 in MP4 written by the kit's `write_video`."
    rng = np.random.default_rng(seed)
    base = np.clip(np.array(COLOURS[colour]) + rng.normal(0, 30, (size, size, 3)), 0, 255).astype(np.uint8)
    frames = np.stack([np.roll(base, i, axis=1) for i in range(seconds * fps)])
    return write_video(frames, path, fps=fps, codec="mpeg4")


def toy_store(root, name, per_class, seed0, classes=tuple(COLOURS), views="all", labelled=True):
    (root / name).mkdir()
    vids = {
        toy_video(root / name / f"{c}{i}.mp4", c, seed0 + 10 * i + k): k
        for k, c in enumerate(classes)
        for i in range(per_class)
    }
    out = root / f"{name}.store"
    build_store(
        list(vids),
        load_tokenizer("default"),
        out,
        fps=2,
        frame_size=32,
        views=views,
        progress=False,
        **(dict(labels=vids, classes=list(classes)) if labelled else {}),
    )
    return out


@contextlib.contextmanager
def one_process_gloo(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
