"Running the kit's console scripts from tests: `run_tool(name, *parts)`."

import os, subprocess, sys
from pathlib import Path

BIN = Path(sys.executable).parent  # the console scripts installed beside this interpreter


def run_tool(name: str, *parts, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run the console script `name` (e.g. `"vimpac-tokenize"`) with the arguments `parts`: a string is split at
    spaces (`"--fps 2 --device cpu"`), a path or a number is one argument, any other iterable (a list, a tuple, a
    `map`) is taken item by item. Output is captured as text; `kwargs` go to `subprocess.run` (e.g. `env`)."""
    argv = [str(BIN / name)]
    for p in parts:
        if isinstance(p, str):
            argv += p.split()
        elif isinstance(p, os.PathLike) or not hasattr(p, "__iter__"):
            argv.append(str(p))
        else:
            argv += [str(x) for x in p]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
