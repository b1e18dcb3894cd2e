"""The explorer cell of the viz chapter (`explore()`, issue 24) run in JupyterLab and looked at in Debian's headless
Chromium by `tools/explorer_screenshot.py`: its widgets, its accuracy line and both figures drawn, nothing fetched
from outside. Saves the screenshot `explorer.png` (the README's under `make screenshots`)."""

import json, shutil, subprocess, sys
from pathlib import Path
import pytest
from helpers import CHROMIUM, NO_CHROMIUM, screenshot_path

ROOT = Path(__file__).resolve().parents[1]
LAB = shutil.which("jupyter-lab", path=str(Path(sys.executable).parent))


def _explore_cell() -> str:
    """The code of the viz chapter's visible explorer cell: the one that imports `explore` and calls it, so that it
    runs alone in a fresh kernel (the test runs it so)."""
    cells = json.loads((ROOT / "nbs" / "09_viz.ipynb").read_text())["cells"]
    found = [
        "".join(c["source"]).strip()
        for c in cells
        if c["cell_type"] == "code"
        and "".join(c["source"]).strip().startswith("from vimpac.viz import explore\n")
        and "".join(c["source"]).strip().splitlines()[-1].startswith("explore(")
    ]
    assert len(found) == 1, f"the viz chapter should have one visible explore(...) cell, found {found}"
    return found[0]


def test_the_chapter_has_its_explorer_cell_with_saved_output():
    cells = json.loads((ROOT / "nbs" / "09_viz.ipynb").read_text())["cells"]
    cell = next(c for c in cells if "".join(c["source"]).strip() == _explore_cell())
    kinds = {k for o in cell["outputs"] for k in o.get("data", {})}
    assert {"text/html", "application/vnd.jupyter.widget-view+json"} <= kinds, kinds  # a snapshot beside the widget


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
@pytest.mark.skipif(LAB is None, reason="JupyterLab is not installed (pip install -e '.[dev]')")
def test_explorer_cell_in_jupyterlab(tmp_path):
    pytest.importorskip("playwright.sync_api", reason="playwright for Python is not installed")
    out = screenshot_path("explorer.png")
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "explorer_screenshot.py"),
            "--out",
            str(out),
            "--source",
            _explore_cell(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert "mask accuracy: model" in line and "controls" in line, line
    print(line)
