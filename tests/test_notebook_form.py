"""The chapters' form (issues 14, 22): short functions and cells, whole classes, every exported name shown, every
output saved (tools/check_notebooks.py)."""

import json, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import check_notebooks as cn  # noqa: E402


SAVED = [{"output_type": "stream", "name": "stdout", "text": ["saved\n"]}]


def _nb(tmp_path, cells):
    "A notebook of `(kind, source)` or `(kind, source, outputs)` cells; a code cell's outputs default to `SAVED`."
    p = tmp_path / "x.ipynb"
    cells = [
        {"cell_type": c[0], "source": c[1], "metadata": {}}
        | ({"outputs": c[2] if len(c) > 2 else SAVED} if c[0] == "code" else {})
        for c in cells
    ]
    p.write_text(json.dumps({"cells": cells}))
    return p


def test_every_chapter_has_short_functions_whole_classes_and_shows_every_name():
    problems = [line for nb in cn.chapters() for line in cn.check(nb)]
    assert not problems, "\n".join(problems)


def test_checker_flags_a_long_function_a_missing_show_doc_and_an_unmentioned_constant(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(cn.MAX_FUNCTION_LINES))
    nb = _nb(
        tmp_path,
        [
            ("code", f"#| export\ndef long_one():\n{body}\n"),
            ("code", "#| export\nLIMIT = 3\n"),
            ("code", "#| export\ndef shown(): pass\n"),
            ("code", "show_doc(shown)"),
        ],
    )
    problems = cn.check(nb)
    assert len(problems) == 3, problems
    assert "function long_one of 41 lines (at most 40)" in problems[0]
    assert "long_one is exported but has no show_doc" in problems[1]
    assert "constant LIMIT" in problems[2]


def test_checker_flags_a_long_method_and_a_long_cell_but_not_a_long_class(tmp_path):
    def method(name, n):
        return f"    def {name}(self):\n" + "\n".join(f"        x{i} = {i}" for i in range(n - 1))

    whole = f"#| export\nclass Big:\n{method('a', 39)}\n{method('b', 39)}\n"  # 80 lines: a whole class is fine
    long_method = f"#| export\nclass Odd:\n{method('c', 41)}\n"
    long_cell = f"#| export\nclass Huge:\n{method('a', 40)}\n{method('b', 40)}\n"  # 81 lines
    nb = _nb(
        tmp_path,
        [
            ("code", whole),
            ("code", long_method),
            ("code", long_cell),
            ("code", "show_doc(Big)\nshow_doc(Odd)\nshow_doc(Huge)"),
        ],
    )
    problems = cn.check(nb)
    assert problems == [
        f"x.ipynb: function c of 41 lines (at most {cn.MAX_FUNCTION_LINES})",
        f"x.ipynb: export cell of 81 lines (at most {cn.MAX_CELL_LINES}): 'class Huge:'",
    ], problems


def test_checker_flags_a_class_split_by_patch_without_prose(tmp_path):
    nb = _nb(
        tmp_path,
        [
            ("code", "#| export\nclass A:\n    pass\n"),
            ("code", "#| export\n@patch\ndef f(self: A): pass\n@patch\ndef g(self: A): pass\n"),
            ("markdown", "Now `h`, explained."),
            ("code", "#| export\n@patch\ndef h(self: A): pass\n"),
            ("code", "#| export\n@patch\ndef k(self: A): pass\n"),
            ("code", "#| export\n@patch\ndef m(self: Path): pass\n"),
            ("code", "show_doc(A)"),
        ],
    )
    problems = cn.check(nb)
    assert problems == [
        "x.ipynb: @patch f adds to A with no markdown cell since its previous part (cell 0, now cell 1)",
        "x.ipynb: @patch k adds to A with no markdown cell since its previous part (cell 3, now cell 4)",
    ]


def test_checker_passes_a_tidy_chapter(tmp_path):
    nb = _nb(
        tmp_path,
        [
            ("markdown", "The cap is `LIMIT`."),
            ("code", "#| export\nLIMIT = 3\ndef f(): pass\n"),
            ("code", "show_doc(f)\nassert f() is None"),
            ("code", "#| export\n@patch\ndef g(self: int): pass"),
        ],
    )
    assert cn.check(nb) == []


def test_checker_counts_neither_a_functions_docstring_nor_its_comments(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(cn.MAX_FUNCTION_LINES - 1))
    doc = '    """A docstring\n' + "    of many lines\n" * 20 + '    """\n    # a comment\n'
    nb = _nb(tmp_path, [("code", f"#| export\ndef documented():\n{doc}{body}\n"), ("code", "show_doc(documented)")])
    assert cn.check(nb) == []
    nb = _nb(
        tmp_path,
        [
            ("code", f"#| export\ndef documented():\n{doc}{body}\n    y = 1\n    z = 2\n"),
            ("code", "show_doc(documented)"),
        ],
    )
    assert cn.check(nb) == [f"x.ipynb: function documented of 42 lines (at most {cn.MAX_FUNCTION_LINES})"]


def test_checker_flags_a_showing_cell_saved_without_output(tmp_path):
    showing = [
        "show_doc(f)",
        "print(1)",
        "x = 1\nx",
        "fig, ax = 1, 2\nfig  # the figure",
        "for i in range(2):\n    pass\nprint(i)",
    ]
    silent = [
        "x = 1",
        "test_eq(1, 1)",
        "m.eval();",
        "x.eval();  # quiet",
        "#| gpu\nprint(1)",
        "#| eval: false\nx",
        "#| export\nx = 1\nx",
        "torch.set_num_threads(2)",
    ]
    nb = _nb(tmp_path, [("code", s, []) for s in showing + silent] + [("code", "print(2)")])
    problems = cn.check(nb)
    flagged = [int(line.split("cell ")[1].split()[0]) for line in problems if "no saved output" in line]
    assert flagged == list(range(len(showing))), problems
    assert all(cn.shows_something(s) for s in showing) and not any(cn.shows_something(s) for s in silent)
