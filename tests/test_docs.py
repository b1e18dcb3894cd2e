"""The documentation tooling (tools/build_docs.py): README.md is what nbs/index.ipynb makes, and the site check finds
broken pages (missing images, dead links, error outputs). `make docs` builds the real site; these are its checks."""

import importlib.util, json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_docs", ROOT / "tools" / "build_docs.py")
bd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bd)


def test_readme_is_generated_from_index():
    assert (ROOT / "README.md").read_text() == bd.readme_text(), "run `make readme` after editing nbs/index.ipynb"
    assert "](../images/" not in bd.readme_text() and "](images/explorer.png)" in bd.readme_text()


def test_page_names_follow_nbdev(tmp_path):
    assert bd.page_name(tmp_path / "00a_utils.ipynb", tmp_path) == "utils.html"
    assert bd.page_name(tmp_path / "runs" / "pretrain.ipynb", tmp_path) == "runs/pretrain.html"


def test_check_site_finds_broken_pages(tmp_path, monkeypatch):
    docs, proc = tmp_path / "_docs", tmp_path / "_proc"
    (docs / "images").mkdir(parents=True)
    (docs / "runs").mkdir()
    proc.mkdir()
    (docs / "images" / "ok.png").write_bytes(b"\x89PNG")
    (docs / "index.html").write_text(
        '<img src="images/ok.png"><img src="data:image/png;base64,AA=="><a href="viz.html#x">v</a>'
    )
    (docs / "viz.html").write_text(
        '<img src="images/gone.png"><a href="index.html">home</a><a href="nowhere.html">x</a>'
    )
    (docs / "runs" / "p.html").write_text('<img src="../images/ok.png"><a href="../viz.html">v</a>')
    nb = dict(
        cells=[
            dict(
                cell_type="code",
                source="1/0",
                outputs=[dict(output_type="error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])],
            )
        ]
    )
    (proc / "bad.ipynb").write_text(json.dumps(nb))
    monkeypatch.setattr(bd, "DOCS", docs)
    problems = bd.check_site(proc)
    assert problems == [
        "bad.ipynb: cell 0 shows an error output (ZeroDivisionError: division by zero)",
        "viz.html: image images/gone.png is missing",
        "viz.html: link to nowhere.html, which is not a page",
    ], problems
    (docs / "viz.html").write_text('<a href="index.html">home</a>')
    (proc / "bad.ipynb").unlink()
    assert bd.check_site(proc) == []


def test_pages_typeset_formulas_with_the_sites_own_mathjax(tmp_path, monkeypatch):
    "The nbconvert pages load MathJax from the site (no outside call); a page whose script is missing is broken."
    docs, proc = tmp_path / "_docs", tmp_path / "_proc"
    (docs / "runs").mkdir(parents=True)
    proc.mkdir()
    head = bd.mathjax_head("../")
    assert "http" not in head and 'src="../mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"' in head
    (docs / "runs" / "p.html").write_text(f"<head>{head}</head><p>$x^2$</p>")
    monkeypatch.setattr(bd, "DOCS", docs)
    assert bd.check_site(proc) == ["runs/p.html: script ../mathjax/MathJax.js is missing"]
    (docs / "mathjax").mkdir()
    (docs / "mathjax" / "MathJax.js").write_text("")
    assert bd.check_site(proc) == []
    mj = bd.mathjax_dir()  # what `make docs` copies, when jupyter-server-mathjax is installed
    assert mj is None or (mj / "config" / "TeX-AMS-MML_HTMLorMML-full.js").is_file()


def test_a_widget_output_shows_its_static_snapshot_on_a_page():
    "A page has no kernel: an output with a widget view and an HTML snapshot (the explorer's) keeps the snapshot only;"
    "an output with a widget view alone is left as it is."
    snap = {"application/vnd.jupyter.widget-view+json": {"model_id": "x"}, "text/html": "<p>snapshot</p>"}
    bare = {"application/vnd.jupyter.widget-view+json": {"model_id": "y"}, "text/plain": "VBox()"}
    cell = dict(
        cell_type="code",
        metadata={},
        source="explore()",
        outputs=[
            dict(output_type="execute_result", data=dict(snap), metadata={}),
            dict(output_type="display_data", data=dict(bare), metadata={}),
        ],
    )
    nb = bd._clean(dict(cells=[cell]), 0)
    first, second = nb["cells"][0]["outputs"]
    assert first["data"] == {"text/html": "<p>snapshot</p>"}
    assert second["data"] == bare
