"""The chapters' form (issue 14): every export cell holds one idea (at most `MAX_LINES` lines of code, `#|` directives
not counted) and every public name a chapter exports is shown: a function or class by `show_doc(name)` in the same
notebook, a constant by a mention in backticks in the notebook's prose.

    python tools/check_notebooks.py [NOTEBOOK ...]     # default: every chapter in nbs/; exit 1 with one line a problem
"""
from __future__ import annotations
import ast, json, re, sys
from pathlib import Path

MAX_LINES = 40
ROOT = Path(__file__).resolve().parents[1]

def _cells(nb: Path) -> list[dict]:
    return json.loads(nb.read_text())["cells"]

def _src(cell: dict) -> str:
    return "".join(cell["source"])

def _is_export(src: str) -> bool:
    return bool(re.match(r"\s*#\|\s*export\b", src))

def _code_lines(src: str) -> int:
    return sum(1 for line in src.splitlines() if line.strip() and not line.lstrip().startswith("#|"))

def _exported_names(srcs: list[str]) -> tuple[set[str], set[str]]:
    "Public (callables, constants) defined at the top level of the export cells."
    calls, consts = set(), set()
    for src in srcs:
        body = "\n".join("" if line.lstrip().startswith(("#|", "%", "!")) else line for line in src.splitlines())
        for node in ast.parse(body).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names, into = [node.name], calls
                if any(isinstance(d, ast.Name) and d.id == "patch" or
                       isinstance(d, ast.Call) and getattr(d.func, "id", "") == "patch" for d in node.decorator_list):
                    continue      # a method added to a class shown elsewhere
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names, into = [t.id for t in targets if isinstance(t, ast.Name)], consts
            else:
                continue
            into.update(n for n in names if not n.startswith("_"))
    return calls, consts

def check(nb: Path) -> list[str]:
    "One line per problem in the notebook `nb`: a long export cell, a callable without `show_doc`, an unmentioned constant."
    cells, problems = _cells(nb), []
    code = [_src(c) for c in cells if c["cell_type"] == "code"]
    prose = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    exports = [s for s in code if _is_export(s)]
    for s in exports:
        n = _code_lines(s)
        if n > MAX_LINES:
            first = next((line for line in s.splitlines() if line.strip() and not line.startswith("#|")), "")
            problems.append(f"{nb.name}: export cell of {n} lines (at most {MAX_LINES}): {first[:70]!r}")
    shown = set(re.findall(r"show_doc\(\s*([A-Za-z_]\w*)", "\n".join(s for s in code if not _is_export(s))))
    calls, consts = _exported_names(exports)
    for name in sorted(calls - shown):
        problems.append(f"{nb.name}: {name} is exported but has no show_doc({name})")
    for name in sorted(consts):
        if f"`{name}`" not in prose and name not in shown:
            problems.append(f"{nb.name}: constant {name} is exported but no prose mentions `{name}`")
    return problems

def chapters() -> list[Path]:
    return sorted(p for p in (ROOT/"nbs").glob("*.ipynb") if p.name != "index.ipynb")

if __name__ == "__main__":
    paths = [Path(a) for a in sys.argv[1:]] or chapters()
    found = [line for p in paths for line in check(p)]
    print("\n".join(found) or f"{len(paths)} notebooks: every export cell <= {MAX_LINES} lines, every public name shown")
    sys.exit(1 if found else 0)
