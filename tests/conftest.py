import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def bin_dir():
    "Folder of the console scripts installed beside this interpreter."
    return BIN


def _texture_video(path, seed, seconds=2, fps=8, size=40):
    "A small moving random texture, MPEG-4 (in the container of `path`'s extension), written with PyAV; returns `path`."
    import av, numpy as np
    path = Path(path); path.parent.mkdir(parents=True, exist_ok=True)
    base = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=fps); s.width = s.height = size; s.pix_fmt = "yuv420p"
        for i in range(seconds * fps):
            for p in s.encode(av.VideoFrame.from_ndarray(np.roll(base, 2 * i, axis=1), format="rgb24")): c.mux(p)
        for p in s.encode(): c.mux(p)
    return path


@pytest.fixture(scope="session")
def texture_video():
    "`texture_video(path, seed, seconds=2, fps=8, size=40)`: writes a small moving random texture video (MPEG-4) at `path`."
    return _texture_video


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's tests (`pytestmark = pytest.mark.usefixtures("one_thread")`): tiny models run
    many times slower when OpenMP threads wait on a busy shared CPU."""
    import torch
    n = torch.get_num_threads(); torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def pytest_collection_modifyitems(config, items):
    "Tests marked `gpu` are skipped, with the reason, where no CUDA GPU is visible."
    import torch
    if torch.cuda.is_available(): return
    skip = pytest.mark.skip(reason="gpu: needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords: item.add_marker(skip)
