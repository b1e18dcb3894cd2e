"The chapters' form (issue 14): short export cells, every exported name shown. The checker lives in tools/."
import json, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]/"tools"))
import check_notebooks as cn  # noqa: E402


def _nb(tmp_path, cells):
    p = tmp_path/"x.ipynb"
    p.write_text(json.dumps({"cells": [{"cell_type": k, "source": s, "metadata": {}} for k, s in cells]}))
    return p


def test_every_chapter_has_short_export_cells_and_shows_every_name():
    problems = [line for nb in cn.chapters() for line in cn.check(nb)]
    assert not problems, "\n".join(problems)


def test_checker_flags_a_long_cell_a_missing_show_doc_and_an_unmentioned_constant(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(cn.MAX_LINES))
    nb = _nb(tmp_path, [("code", f"#| export\ndef long_one():\n{body}\n"), ("code", "#| export\nLIMIT = 3\n"),
                        ("code", "#| export\ndef shown(): pass\n"), ("code", "show_doc(shown)")])
    problems = cn.check(nb)
    assert len(problems) == 3, problems
    assert "export cell of 41 lines" in problems[0]
    assert "long_one is exported but has no show_doc" in problems[1]
    assert "constant LIMIT" in problems[2]


def test_checker_passes_a_tidy_chapter(tmp_path):
    nb = _nb(tmp_path, [("markdown", "The cap is `LIMIT`."), ("code", "#| export\nLIMIT = 3\ndef f(): pass\n"),
                        ("code", "show_doc(f)\nassert f() is None"), ("code", "#| export\n@patch\ndef g(self: int): pass")])
    assert cn.check(nb) == []
