"""The documentation tooling (tools/build_docs.py): README.md is what nbs/index.ipynb makes, and the site check finds
broken pages (missing images, dead links, error outputs). `make docs` builds the real site; these are its checks."""

import functools, html, http.server, importlib.util, json, os, re, subprocess, sys, threading
from pathlib import Path

import pytest
from helpers import CHROMIUM, NO_CHROMIUM, browser_page, screenshot_path

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
        "index.html: link to viz.html#x, an anchor viz.html does not have",
        "viz.html: image images/gone.png is missing",
        "viz.html: link to nowhere.html, which is not a page",
    ], problems
    (docs / "runs" / "p.html").write_text('<a href="../viz.html#y">v</a><h2 id="here">h</h2><a href="#there">t</a>')
    assert "runs/p.html: link to #there, an anchor this page does not have" in bd.check_site(proc)
    assert "runs/p.html: link to ../viz.html#y, an anchor ../viz.html does not have" in bd.check_site(proc)
    assert not any("#x" in p for p in bd.check_site(proc, anchors_too=False))  # Quarto's pages: not checked
    (docs / "runs" / "p.html").write_text('<a href="../viz.html#x">v</a><h2 id="here">h</h2><a href="#here">t</a>')
    (docs / "viz.html").write_text('<a href="index.html">home</a><h3 id="x">x</h3>')
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


# ---- the built site (nbconvert): one build for the tests below ----
REPO = re.search(r'^Repository = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1].rstrip("/")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as `make docs` builds it without Quarto (`--html`), into a temporary folder; or, when `make test` has
    just built it so (`VIMPAC_DOCS_SITE`, set by the Makefile only where no `quarto` renders), that site: one build."""
    built = os.environ.get("VIMPAC_DOCS_SITE")
    if built:
        assert (Path(built) / "search_index.js").is_file(), f"VIMPAC_DOCS_SITE={built}: no site built there"
        return Path(built)
    out = tmp_path_factory.mktemp("site") / "_docs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_docs.py"), "--html", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return out


def pages(site):
    return {str(p.relative_to(site)): p.read_text() for p in sorted(site.rglob("*.html")) if "mathjax" not in p.parts}


def ids(text):
    return set(re.findall(r'\sid="([^"]+)"', text))


def search_index(site):
    text = (site / "search_index.js").read_text()
    assert text.startswith("window.VIMPAC_SEARCH_INDEX = ")
    return json.loads(text.split("=", 1)[1].strip().rstrip(";"))


@pytest.mark.slow
def test_search_index_holds_api_names_and_headings_and_every_result_lands(site):
    index = search_index(site)
    by = {(e["u"], e["h"]): e for e in index}
    api = by["model.html#vimpacforpretraining", "VimpacForPreTraining"]
    assert api["k"] == "api" and api["p"] == "Model" and "Backbone + token head" in api["t"], api
    method = by["model.html#vimpacforpretraining", "VimpacForPreTraining.forward"]  # no entry of its own: the class's
    assert method["k"] == "api" and method["p"] == "vimpac.model"
    assert by["model.html#config-and-presets", "Config and presets"]["k"] == "section"
    assert by["index.html", "vimpac"]["k"] == "page"
    # a name documented in a cell with a second show_doc (before, only a cell's last value showed)
    assert by["utils.html#vimpacdeprecationwarning", "VimpacDeprecationWarning"]["k"] == "api"
    # each name once: a second show_doc of a name (in a test cell) once gave it two entries
    heads = [e["h"] for e in index if e["k"] == "api" and e["p"] != "API index"]
    assert heads.count("PreTrainingOutput") == 1, [e for e in index if e["h"] == "PreTrainingOutput"]
    twice = sorted({h for h in heads if heads.count(h) > 1 and "." not in h})
    assert not twice, twice
    all_pages = pages(site)
    for e in index:  # every result goes to a page of the site, and to an anchor that page has
        page, _, anchor = e["u"].partition("#")
        assert page in all_pages, e
        assert not anchor or anchor in ids(all_pages[page]), e
    assert (site / "search.js").is_file()
    for name, text in all_pages.items():  # a search box on every page, with the script that serves it
        up = "../" * name.count("/")
        assert '<input id="search" type="search"' in text and '<div id="search-results">' in text, name
        assert f'<script src="{up}search.js" data-root="{up}"></script>' in text, name


@pytest.mark.slow
def test_api_index_links_every_public_name_to_its_entry_and_source(site):
    api = (site / "api.html").read_text()
    model = (site / "model.html").read_text()
    row = re.search(r'<tr id="vimpac\.model\.VimpacForPreTraining">(.*?)</tr>', api, re.S)
    assert row, "vimpac.model.VimpacForPreTraining is not in the API index"
    assert '<a href="model.html#vimpacforpretraining">VimpacForPreTraining</a>' in row[1]
    assert 'id="vimpacforpretraining"' in model
    src = re.search(r'<a href="([^"]+)" class="source-link">source</a>', row[1])[1]
    assert src.startswith(f"{REPO}/blob/main/vimpac/model.py#L"), src
    line = (ROOT / "vimpac" / "model.py").read_text().splitlines()[int(src.rsplit("#L", 1)[1]) - 1]
    assert line.startswith("class VimpacForPreTraining"), line
    import vimpac._modidx as modidx

    public = [
        full
        for mod, syms in modidx.d["syms"].items()
        for full in syms
        if not any(p.startswith("_") for p in full[len(mod) + 1 :].split("."))
    ]
    rows = re.findall(r'<tr id="([^"]+)">', api)
    assert sorted(rows) == sorted(public)
    assert '<a href="api.html" class="here">API index</a>' in api


@pytest.mark.slow
def test_previous_next_links_follow_the_sidebar(site):
    all_pages = pages(site)
    nav = re.search(r"<nav>(.*?)</nav>", all_pages["index.html"], re.S)[1]
    order = re.findall(r'<a href="([^"]+\.html)"', nav)[1:]  # the first is the title's link home
    assert order[0] == "index.html" and order[-1] == "api.html" and sorted(order) == sorted(all_pages)
    for i, name in enumerate(order):
        text, up = all_pages[name], "../" * name.count("/")
        pager = re.search(r'<div class="pager">(.*?)</div>', text, re.S)[1]
        prev = re.search(r'<a class="prev" href="([^"]+)"', pager)
        nxt = re.search(r'<a class="next" href="([^"]+)"', pager)
        assert (prev[1] if prev else None) == (up + order[i - 1] if i else None), name
        assert (nxt[1] if nxt else None) == (up + order[i + 1] if i + 1 < len(order) else None), name


@pytest.mark.slow
def test_every_page_has_its_contents(site):
    for name, text in pages(site).items():
        main = re.search(r"<main>(.*)</main>", text, re.S)[1]
        heads = re.findall(r'<h([23])[^>]*\sid="([^"]+)"', main)
        toc = re.search(r'<aside class="toc">(.*?)</aside>', text, re.S)
        if not heads:
            assert toc is None, name
            continue
        assert toc, f"{name} has headings but no contents"
        links = re.findall(r'<a href="#([^"]+)" class="l([23])">', toc[1])
        unesc = lambda pairs: [(html.unescape(i), level) for i, level in pairs]
        assert unesc(links) == unesc((i, level) for level, i in heads), name
    assert len(re.findall(r'class="l3"', (site / "model.html").read_text())) > 20


@pytest.mark.slow
def test_source_links_point_at_the_repository_named_in_pyproject(site):
    n = 0
    for name, text in pages(site).items():
        for href in re.findall(r'<a href="([^"]+)"[^>]*class="source-link"', text):
            assert href.startswith(f"{REPO}/blob/main/vimpac/"), (name, href)
            path, line = href[len(f"{REPO}/blob/main/") :].split("#L")
            src = (ROOT / path).read_text().splitlines()[int(line) - 1]
            assert re.match(r"\s*(@|def |class |async def )", src), (name, href, src)
            n += 1
        for href in re.findall(r'href="(https?://github\.com/[^"]*)"', text):
            # the repository, or the authors' original code that the official-checkpoints chapter cites
            assert href.startswith(REPO + "/") or href.startswith("https://github.com/airsplay/vimpac"), (name, href)
        assert not re.search(r"example\.(com|org)|fastai/nbdev|your[-_]?(user|org|repo)", text, re.I), name
        assert "#LNone" not in text, name  # nbdev 3.3's line for a name imported from another module
    assert n > 300


@pytest.mark.slow
def test_mathjax_fonts_are_served(site):
    "Every file a page's MathJax configuration names (its script, the fonts its styles point at) is in the site."
    if not (site / "mathjax").is_dir():
        pytest.skip("jupyter-server-mathjax is not installed (make docs installs it): the formulas show as TeX")
    text = (site / "losses.html").read_text()
    config = re.search(r'<script type="text/x-mathjax-config">(.*?)</script>', text, re.S)[1]
    urls = re.findall(r"url\('([^']+)'\)", config)
    assert len(urls) == len(bd.MATHJAX_TEX_FONTS) and "about:blank" not in config
    for u in urls + ["mathjax/MathJax.js", "mathjax/config/TeX-AMS-MML_HTMLorMML-full.js"]:
        assert (site / u).is_file(), f"{u} is not in the site"
    assert (site / "mathjax/jax/output/HTML-CSS/fonts/STIX-Web/fontdata.js").is_file()


def serve(folder):
    "A local HTTP server of `folder` on a free port of the loopback interface; returns (server, its base URL)."

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/"


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_browser_formulas_load_every_file_and_search_finds(site):
    """In headless Chromium: the losses page typesets its formulas with no request failing (no 404, no font left
    out) and none going outside the site; typing in the search box lists results, the first the `mask_loss` entry, and
    Enter goes there. The screenshot of the search in use is docs.png, the README's under `make screenshots` (taken
    only where the formulas are typeset: with jupyter-server-mathjax installed)."""
    math = (site / "mathjax").is_dir()
    srv, base = serve(site)
    try:
        with browser_page(viewport=(1400, 900)) as page:
            bad, urls = [], []
            page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            page.on("requestfailed", lambda r: bad.append(f"failed {r.url}"))
            page.on("request", lambda r: urls.append(r.url))
            page.goto(base + "losses.html", wait_until="networkidle")
            if math:
                page.wait_for_function(
                    "() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
                    " && document.querySelectorAll('.MathJax').length > 3",
                    timeout=30_000,
                )
                page.wait_for_load_state("networkidle")
                assert any("STIXMathJax_" in u for u in urls), "no MathJax font was loaded"
            page.fill("#search", "mask loss")
            page.locator("#search-results.open a").first.wait_for(state="visible", timeout=10_000)
            hrefs = page.eval_on_selector_all("#search-results a", "els => els.map(e => e.getAttribute('href'))")
            assert hrefs[0] == "losses.html#mask_loss" and len(hrefs) >= 5, hrefs
            assert bad == [], bad
            outside = [u for u in urls if not u.startswith((base, "data:"))]
            assert not outside, f"the page fetched from outside: {outside[:5]}"
            if math:  # the README's picture shows the formulas typeset, not their TeX
                page.screenshot(path=str(screenshot_path("docs.png")))
            page.keyboard.press("Enter")
            page.wait_for_url("**/losses.html#mask_loss")
            page.goto(base + "runs/pretrain.html", wait_until="networkidle")  # a page one folder down
            page.fill("#search", "VimpacForPreTraining")
            page.locator("#search-results.open a").first.wait_for(state="visible", timeout=10_000)
            first = page.eval_on_selector("#search-results a", "e => e.getAttribute('href')")
            assert first == "../model.html#vimpacforpretraining", first
            assert bad == [], bad
    finally:
        srv.shutdown()
