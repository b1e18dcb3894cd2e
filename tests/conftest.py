import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def bin_dir():
    "Folder of the console scripts installed beside this interpreter."
    return BIN


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
