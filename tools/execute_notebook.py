"""Execute a chapter in place so its outputs are saved (figures and tables for readers and the docs site), skipping
the cells nbdev does not run (`#| eval: false`). Run from the repository root:

    python tools/execute_notebook.py nbs/10_demo.ipynb [...]     # then nbdev-clean
"""

import sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient


def execute(path: Path, timeout: int = 1800) -> None:
    nb = nbformat.read(path, as_version=4)
    skipped = {}
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and "#| eval: false" in c.source:
            skipped[i] = c.source
            c.source = ""
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    for i, s in skipped.items():
        nb.cells[i].source = s
        nb.cells[i].outputs = []
        nb.cells[i].execution_count = None
    nbformat.write(nb, path)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        execute(Path(p))
        print(f"executed {p}")
