"Running the kit's console scripts from tests: `run_tool(name, *parts)`."

import subprocess, sys
from pathlib import Path

BIN = Path(sys.executable).parent  # the console scripts installed beside this interpreter


def run_tool(name: str, *parts, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run the console script `name` (e.g. `"vimpac-tokenize"`) with the arguments `parts`: a string is split at
    spaces (`"--fps 2 --device cpu"`), a list or tuple is taken item by item, anything else (a path, a number) is
    one argument. Output is captured as text; `kwargs` go to `subprocess.run` (e.g. `env`)."""
    argv = [str(BIN / name)]
    for p in parts:
        if isinstance(p, str):
            argv += p.split()
        elif isinstance(p, (list, tuple)):
            argv += [str(x) for x in p]
        else:
            argv.append(str(p))
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
