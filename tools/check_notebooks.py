"""The chapters' form (issues 14 and 22):
- every function or method in an export cell holds one idea (at most `MAX_FUNCTION_LINES` lines of code), and an
  export cell at most `MAX_CELL_LINES` (a class may be whole in one cell);
- a class grown with `@patch` inside its own notebook has prose (a markdown cell) before each added part;
- every public name a chapter exports is shown: a function or class by `show_doc(name)` in the same notebook, a
  constant by a mention in backticks in the notebook's prose;
- every cell that shows something (a `print` or `display` call, or a last statement that is `show_doc(name)` or a
  bare expression other than a call, such as a figure or a table) has its output saved, so that a reader of the
  notebook or of the docs site sees it (`tools/execute_notebook.py` saves them; `#| gpu` and `#| eval: false` cells
  are exempt).
Lines of code are `statement_lines`: the lines on which a statement begins, so that a call `ruff format` wraps counts
once and docstrings and comments not at all.

    python tools/check_notebooks.py [NOTEBOOK ...]     # default: every chapter in nbs/; exit 1 with one line a problem
"""

from __future__ import annotations
import ast, json, re, sys
from pathlib import Path

MAX_FUNCTION_LINES = 40
MAX_CELL_LINES = 80
ROOT = Path(__file__).resolve().parents[1]


def _cells(nb: Path) -> list[dict]:
    return json.loads(nb.read_text())["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def _is_export(src: str) -> bool:
    return bool(re.match(r"\s*#\|\s*export\b", src))


def _python(src: str) -> str:
    "The cell's Python: directives and shell or magic lines blanked (line numbers kept)."
    return "\n".join("" if line.lstrip().startswith(("#|", "%", "!")) else line for line in src.splitlines())


def _is_patch(node: ast.AST) -> bool:
    "Whether a function is decorated with fastcore's `@patch` (plain or called)."
    return any(
        isinstance(d, ast.Name) and d.id == "patch" or isinstance(d, ast.Call) and getattr(d.func, "id", "") == "patch"
        for d in node.decorator_list
    )


def _patched(node: ast.AST) -> list[str]:
    "The classes a `@patch` function adds to (by the annotation of its first argument)."
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _is_patch(node) or not node.args.args:
        return []
    ann = node.args.args[0].annotation
    return [o.id for o in (ann.elts if isinstance(ann, ast.Tuple) else [ann]) if isinstance(o, ast.Name)]


def _exported_names(srcs: list[str]) -> tuple[set[str], set[str]]:
    "Public (callables, constants) defined at the top level of the export cells."
    calls, consts = set(), set()
    for src in srcs:
        for node in ast.parse(_python(src)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names, into = [node.name], calls
                if _is_patch(node):
                    continue  # a method added to a class shown elsewhere
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names, into = [t.id for t in targets if isinstance(t, ast.Name)], consts
            else:
                continue
            into.update(n for n in names if not n.startswith("_"))
    return calls, consts


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def statement_lines(tree: ast.AST) -> int:
    """Lines of code in `tree`: the lines on which a statement (or a decorator) begins. A call the formatter wraps over
    several lines is one line, a docstring or a comment is none: the measure of code that `ruff format` does not
    change."""
    starts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not _is_docstring(node):
            starts.add(node.lineno)
            starts.update(d.lineno for d in getattr(node, "decorator_list", []))
    return len(starts)


def _long_functions(nb: Path, src: str) -> list[str]:
    "One line per function or method of an export cell of more than `MAX_FUNCTION_LINES` statement lines."
    problems = []
    for node in ast.walk(ast.parse(_python(src))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = statement_lines(node)
            if n > MAX_FUNCTION_LINES:
                problems.append(f"{nb.name}: function {node.name} of {n} lines (at most {MAX_FUNCTION_LINES})")
    return problems


def _split_classes(nb: Path, cells: list[dict]) -> list[str]:
    "One line per `@patch` cell adding to a class of the same notebook with no markdown cell since the class's last"
    "part."
    parts, defined, problems = [], set(), []  # (cell index, class name, patch function name or None)
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not _is_export(_src(cell)):
            continue
        for node in ast.parse(_python(_src(cell))).body:
            if isinstance(node, ast.ClassDef):
                defined.add(node.name)
                parts.append((i, node.name, None))
            parts.extend((i, name, node.name) for name in _patched(node))
    last: dict[str, int] = {}
    for i, name, fn in parts:
        if name not in defined:
            continue  # @patch on a class of another module: allowed
        prev = last.get(name)
        prose = prev is not None and any(c["cell_type"] == "markdown" for c in cells[prev + 1 : i])
        if fn and prev is not None and prev != i and not prose:
            problems.append(
                f"{nb.name}: @patch {fn} adds to {name} with no markdown cell since its previous part "
                f"(cell {prev}, now cell {i})"
            )
        last[name] = i
    return problems


SHOWING_CALLS = ("print", "display")


def _call_name(node: ast.AST) -> str:
    "The name a call statement calls: `f(...)` gives `f`, `a.b(...)` gives `b`, anything else ''."
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return ""


def shows_something(src: str) -> bool:
    """Whether a code cell prints or displays: a top-level `print`/`display` call, or a last statement that is
    `show_doc(...)` or a bare expression other than a call (a figure, a table, a value), not silenced by `;`."""
    if re.search(r"#\|\s*(export|gpu|eval:\s*false)\b", src):
        return False
    code = _python(src)
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return False
    if any(_call_name(node) in SHOWING_CALLS for node in body):
        return True
    last = body[-1] if body else None
    if not isinstance(last, ast.Expr) or code.splitlines()[last.end_lineno - 1].split("#")[0].rstrip().endswith(";"):
        return False
    return _call_name(last) == "show_doc" or not isinstance(last.value, ast.Call)


def _unsaved_outputs(nb: Path, cells: list[dict]) -> list[str]:
    "The cells that show something but were saved without their output."
    problems = []
    for i, c in enumerate(cells):
        if c["cell_type"] == "code" and not c.get("outputs") and shows_something(_src(c)):
            first = next((line for line in _src(c).splitlines() if not line.startswith("#|")), "")
            problems.append(f"{nb.name}: cell {i} shows something but has no saved output: {first[:60]!r}")
    return problems


def check(nb: Path) -> list[str]:
    """One line per problem in `nb`: a long function or export cell, a class split without prose, a name not shown,
    a cell that shows something saved without its output."""
    cells, problems = _cells(nb), []
    code = [_src(c) for c in cells if c["cell_type"] == "code"]
    prose = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    exports = [s for s in code if _is_export(s)]
    for s in exports:
        n = statement_lines(ast.parse(_python(s)))
        if n > MAX_CELL_LINES:
            first = next((line for line in s.splitlines() if line.strip() and not line.startswith("#|")), "")
            problems.append(f"{nb.name}: export cell of {n} lines (at most {MAX_CELL_LINES}): {first[:70]!r}")
        problems += _long_functions(nb, s)
    problems += _split_classes(nb, cells)
    problems += _unsaved_outputs(nb, cells)
    shown = set(re.findall(r"show_doc\(\s*([A-Za-z_]\w*)", "\n".join(s for s in code if not _is_export(s))))
    calls, consts = _exported_names(exports)
    for name in sorted(calls - shown):
        problems.append(f"{nb.name}: {name} is exported but has no show_doc({name})")
    for name in sorted(consts):
        if f"`{name}`" not in prose and name not in shown:
            problems.append(f"{nb.name}: constant {name} is exported but no prose mentions `{name}`")
    return problems


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if p.name != "index.ipynb")


if __name__ == "__main__":
    paths = [Path(a) for a in sys.argv[1:]] or chapters()
    found = [line for p in paths for line in check(p)]
    print(
        "\n".join(found)
        or f"{len(paths)} notebooks: functions <= {MAX_FUNCTION_LINES} lines, export cells <= "
        f"{MAX_CELL_LINES}, no class split without prose, every public name shown, every output saved"
    )
    sys.exit(1 if found else 0)
