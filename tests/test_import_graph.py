"""The package's import graph (issue 22), read with `ast` from `vimpac/*.py` (never imported): no private name imported
across modules, no import of a module from a later stage (chapter order in nbs/), no cycle among module-level imports.
The graph code lives in tools/code_stats.py, which also prints the whole picture."""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("code_stats", ROOT / "tools" / "code_stats.py")
cs = sys.modules.setdefault("code_stats", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(cs)


def _problems():
    return cs.check_imports(ROOT / "vimpac", ROOT / "nbs")


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
