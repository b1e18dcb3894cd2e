import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def bin_dir():
    "Folder of the console scripts installed beside this interpreter."
    return BIN


def pytest_collection_modifyitems(config, items):
    "Tests marked `gpu` are skipped, with the reason, where no CUDA GPU is visible."
    import torch
    if torch.cuda.is_available(): return
    skip = pytest.mark.skip(reason="gpu: needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords: item.add_marker(skip)
