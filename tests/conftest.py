import os
import sys
from pathlib import Path
import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` / `make check` run two workers on two cores (issue 33)
    # One OpenMP thread a worker, for its torch and for the processes it starts: two workers of two threads each
    # on two cores make tiny models many times slower while their threads wait on each other.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # torch is imported before this file (pyproject's filterwarnings names a vimpac warning, and vimpac imports
    # torch), so the variable above no longer sets this process's own pool: set it here. Left at 2, each worker's
    # OpenMP threads spin-wait on the other worker's core (a 26 s test took 750 s beside other work).
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def bin_dir():
    "Folder of the console scripts installed beside this interpreter."
    return BIN


def _texture_video(path, seed, seconds=2, fps=8, size=40):
    "A small moving random texture, MPEG-4 (in the container of `path`'s extension), written by the kit; returns"
    "`path`."
    import numpy as np
    from vimpac.synthetic import write_video

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    base = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    frames = np.stack([np.roll(base, 2 * i, axis=1) for i in range(seconds * fps)])
    return write_video(frames, path, fps=fps, codec="mpeg4")


@pytest.fixture(scope="session")
def texture_video():
    "`texture_video(path, seed, seconds=2, fps=8, size=40)`: writes a small moving random texture video (MPEG-4) at"
    "`path`."
    return _texture_video


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's tests (`pytestmark = pytest.mark.usefixtures("one_thread")`): tiny models run
    many times slower when OpenMP threads wait on a busy shared CPU."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def pytest_collection_modifyitems(config, items):
    "Tests marked `gpu` are skipped, with the reason, where no CUDA GPU is visible."
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="gpu: needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def labelled(tmp_path_factory):
    "A labelled toy store, built once for the session: 3 classes x 2 videos, centre view, 4 x 4 token maps (read only)."
    from helpers import toy_store
    from vimpac.store import TokenStore

    return TokenStore(toy_store(tmp_path_factory.mktemp("toy"), "train", 2, 0, views="center"))


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory):
    "Two copies of the three sample videos (6 videos) at 2 FPS, frame size 32 (4 x 4 token maps), built once (read"
    "only)."
    import shutil
    from vimpac.store import build_store
    from vimpac.tokenizer import load_tokenizer
    from vimpac.video import sample_videos

    d = tmp_path_factory.mktemp("videos")
    for copy in range(2):
        for v in sample_videos():
            shutil.copy(v, d / f"{copy}-{v.name}")
    out = tmp_path_factory.mktemp("store") / "store"
    build_store([d], load_tokenizer("default"), out, fps=2, frame_size=32, progress=False)
    return out
