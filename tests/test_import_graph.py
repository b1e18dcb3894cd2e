"""The package's import graph (issue 22), read with `ast` from `vimpac/*.py` (never imported): no private name imported
across modules, no import of a module from a later stage (chapter order in nbs/), no cycle among module-level imports.
The graph code lives in tools/code_stats.py, which also prints the whole picture."""

import functools
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("code_stats", ROOT / "tools" / "code_stats.py")
cs = sys.modules.setdefault("code_stats", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(cs)


@functools.cache  # one parse of the package for every check (issue 33: 26.5 s when each test parsed it again)
def _problems():
    return cs.check_imports(ROOT / "vimpac", ROOT / "nbs")


@functools.cache
def _imports() -> tuple:
    return tuple(cs.imports(ROOT / "vimpac"))


def test_no_private_name_is_imported_across_modules():
    problems = _problems()["private"]
    assert not problems, "\n".join(problems)


def test_no_module_imports_one_from_a_later_stage():
    problems = _problems()["later"]
    assert not problems, "\n".join(problems)


def test_the_module_level_import_graph_has_no_cycle():
    problems = _problems()["cycles"]
    assert not problems, "\n".join(problems)


def test_stages_follow_the_chapters_by_file_name():
    stage = cs.stages(ROOT / "nbs")
    assert set(cs.modules(ROOT / "vimpac")) <= set(stage), "every module has a chapter"
    assert stage["masking"] < stage["model"] < stage["engine"] < stage["pretrain"] < stage["cli"]


def _fake(tmp_path, sources: dict[str, str]):
    "A tiny package `fake` with one chapter a module, in the order given, and its modules' sources."
    pkg, nbs = tmp_path / "fake", tmp_path / "nbs"
    pkg.mkdir()
    nbs.mkdir()
    (pkg / "__init__.py").write_text("")
    for i, (name, src) in enumerate(sources.items()):
        cells = [{"cell_type": "code", "source": [f"#| default_exp {name}"], "metadata": {}}]
        (nbs / f"{i:02d}_{name}.ipynb").write_text(json.dumps({"cells": cells}))
        (pkg / f"{name}.py").write_text(src)
    return cs.check_imports(pkg, nbs, package="fake")


def test_the_checker_passes_a_tidy_package(tmp_path):
    found = _fake(
        tmp_path,
        {
            "a": "X = 1\n",
            "b": "from .a import X\nimport fake.a\n",
            "c": "from . import a, b\nfrom fake.b import X as Y\ndef f():\n    from .b import X\n",
        },
    )
    assert found == {"private": [], "later": [], "cycles": []}


def test_the_checker_flags_private_names_at_module_level_and_in_functions(tmp_path):
    found = _fake(
        tmp_path,
        {
            "a": "_X = 1\n__version__ = 2\n",
            "b": "from .a import __version__\nfrom .a import _X\ndef f():\n    from fake.a import _X\n",
        },
    )
    assert found["private"] == [
        "b.py:2: imports the private name _X from a",
        "b.py:4: imports the private name _X from a",
    ]
    assert found["later"] == [] and found["cycles"] == []


def test_the_checker_flags_an_import_from_a_later_stage(tmp_path):
    found = _fake(tmp_path, {"a": "def f():\n    from .b import Y\n", "b": "Y = 1\n", "c": "import fake.d\n", "d": ""})
    assert found["later"] == [
        "a.py:2: imports Y from b, a later stage (1 > 0) (inside a function)",
        "c.py:1: imports d from d, a later stage (3 > 2)",
    ]
    assert found["cycles"] == [], "an import inside a function makes no module-level cycle"


def test_the_checker_flags_a_cycle_with_its_lines(tmp_path):
    found = _fake(tmp_path, {"a": "X = 1\nfrom . import c\n", "b": "from .a import X\n", "c": "\n\nfrom .b import X\n"})
    assert found["cycles"] == ["import cycle: a.py:2 imports c -> c.py:3 imports b -> b.py:1 imports a"]
    assert found["later"] == ["a.py:2: imports c from c, a later stage (2 > 0)"]


def _private_uses(path: Path) -> list[str]:
    """The package's private names (`_x`, not dunders) that the script `path` imports (`from vimpac.m import _x`) or
    reaches through an imported module (`import vimpac.m as M` ... `M._x`)."""
    import ast

    tree, found, modules = ast.parse(path.read_text()), [], set()
    private = lambda n: n.startswith("_") and not n.startswith("__")  # noqa: E731
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vimpac":
            found += [f"{node.module}.{a.name}" for a in node.names if private(a.name)]
            modules |= {a.asname or a.name for a in node.names if node.module == "vimpac"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name.startswith("vimpac.") and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            found += [f"{node.value.id}.{node.attr}"] if private(node.attr) else []
    return [f"{path.relative_to(ROOT)}: {name}" for name in found]


def test_no_test_or_benchmark_uses_a_private_name_of_the_package():
    "What tests and benchmarks call is public (issue 33): a private name is free to change, a test of it is not."
    scripts = sorted(
        [*(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tools").glob("*.py")]
    )
    problems = [p for s in scripts for p in _private_uses(s)]
    assert not problems, "\n".join(problems)


def test_the_private_name_check_sees_both_forms(tmp_path):
    script = tmp_path / "t.py"
    script.write_text(
        "from vimpac.pretrain import _loss_fn, pretrain\nimport vimpac.demo as D\nD._page(1)\nD.__name__\n"
    )
    rel = ROOT / "tests" / "t_tmp_check.py"
    rel.write_text(script.read_text())
    try:
        assert [p.split(": ")[1] for p in _private_uses(rel)] == ["vimpac.pretrain._loss_fn", "D._page"]
    finally:
        rel.unlink()


def _targets_of(module: str) -> set[str]:
    "The package modules that `module` imports, at module level or inside a function."
    return {i.target for i in _imports() if i.module == module}


def test_the_stages_do_not_import_the_command_line_nor_inference_scoring():
    "Issue 33: the experiments sit below the CLI (its stages' functions live in their chapters), and reconstruction"
    "reads run folders through `vimpac.runs`, not through evaluation."
    assert "cli" not in _targets_of("experiments")
    assert "evaluate" not in _targets_of("inference")
    users_of_cli = sorted(m for m in cs.modules(ROOT / "vimpac") if "cli" in _targets_of(m))
    assert users_of_cli == []


def test_the_cli_holds_only_parsers_and_entry_points():
    "Every public function of `vimpac/cli.py` parses options (`*_parser`, `parse_*`, the option-to-config helpers) or"
    "is a console script's body (`*_main`, and `*_args`, what a papermill run notebook calls with parsed options)."
    import ast

    tree = ast.parse((ROOT / "vimpac" / "cli.py").read_text())
    public = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    helpers = {"model_spec", "finetune_config", "print_run_summary"}
    others = [
        n
        for n in public
        if not n.endswith(("_parser", "_main", "_args")) and not n.startswith("parse_") and n not in helpers
    ]
    assert others == [], f"cli.py defines stage functions: {others}"
    assert {n for n in public if n.endswith("_main")} >= {"tokenize_main", "pretrain_main", "evaluate_main"}
