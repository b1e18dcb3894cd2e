import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def bin_dir():
    "Folder of the console scripts installed beside this interpreter."
    return BIN
