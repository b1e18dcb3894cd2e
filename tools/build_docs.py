"""Build the documentation site from the notebooks (`make docs`), and README.md from `nbs/index.ipynb` (`make readme`).

    python tools/build_docs.py                 # the site, into _docs/ (fails on a broken page)
    python tools/build_docs.py --html --out DIR   # with nbconvert even where Quarto is installed, into DIR
    python tools/build_docs.py --readme        # write README.md from nbs/index.ipynb
    python tools/build_docs.py --readme --check   # exit 1 when README.md is not what nbs/index.ipynb makes

The notebooks are processed by nbdev's own doc pipeline (`nbdev.serve.proc_nbs` into `_proc/`: directives, hidden
cells, `show_doc` rendered by running the exported code). Changes to nbdev's defaults, all for the docs only:
- cells run at build time are the exported ones, `show_doc` calls and cells of imports alone; nbdev would also run
  any cell that *contains* an import or a `show_doc`, which here would train models and write figures relative to
  the wrong folder (a `show_doc` beside other code runs alone, and a cell of several `show_doc` calls displays each:
  a cell shows only its last value, and the others' entries were missing from the pages);
  Every other cell shows the output saved in the notebook (the figures are saved outputs);
- show_doc's "source" links are nbdev's (the repository is pyproject.toml's [project.urls] Repository, which
  nbdev-export writes into vimpac/_modidx.py), with the line found for a name imported from another module too
  (nbdev 3.3 wrote `#LNone` there);
- the pages are rendered by Quarto (`nbdev-docs`'s renderer) when `quarto` is on the PATH (the `docs` extra,
  `pip install -e '.[docs]'`, brings it where the `quarto-cli` package can download its binary), else by nbconvert
  into plain HTML pages with a sidebar, so that the site builds offline. Their formulas are typeset by MathJax 2,
  served from the site itself (`_docs/mathjax/`, copied from the `jupyter-server-mathjax` package's static files, which
  `make docs` installs without its dependencies): the pages make no outside call. Without that package the formulas
  show as TeX, and the build says so. The package ships only the STIX-Web fonts, so the @font-face rules that
  MathJax's combined configuration writes for its TeX fonts are pointed at STIX-Web files (see MATHJAX_TEX_FONTS).
The nbconvert site also has, on every page, a sidebar in the notebooks' order, a search box (`search.js`, a small
script of this file, searches `search_index.js`: the pages' sections, with their headings, text and API names, as
JSON written at build time; it loads from a file:// page too, and calls nothing outside the site), the page's
contents (its h2 and h3 headings) and previous/next links in the sidebar's order; and an API index (`api.html`) of
every public name in `vimpac._modidx` with links to its entry and its source. Headings' ids are in lower case, as
Quarto writes them, so that nbdev's links to `page.html#name` land; a link to a name that has no entry on its page (a
private helper, a method without a `show_doc`) goes to its class's entry, else to its source.
A page is broken, and the build exits 1 naming it, when processing a notebook raises, a saved output is an error, an
image or script it loads is missing, or a link goes to no page or (nbconvert's pages) to an anchor the page lacks.
"""

from __future__ import annotations
import argparse, ast, html, importlib.util, json, os, re, shutil, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS, DOCS, PROC = ROOT / "nbs", ROOT / "_docs", ROOT / "_proc"
try:  # nbdev's links to other pages start with pyproject's Documentation URL
    import tomllib

    SITE = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Documentation"].rstrip("/") + "/"
except (ImportError, KeyError):
    SITE = "https://vimpac.github.io/vimpac/"


# ---- README.md from nbs/index.ipynb ----
def readme_text(index: Path = NBS / "index.ipynb") -> str:
    "README.md's text: the markdown cells of `index` joined by blank lines, with image paths made relative to the root."
    nb = json.loads(index.read_text())
    cells = ["".join(c["source"]).strip("\n") for c in nb["cells"] if c["cell_type"] == "markdown"]
    return "\n\n".join(cells).replace("](../images/", "](images/").replace('src="../images/', 'src="images/') + "\n"


def readme(check: bool) -> int:
    text, path = readme_text(), ROOT / "README.md"
    if check:
        if path.read_text() != text:
            print(
                "README.md differs from what nbs/index.ipynb makes: edit nbs/index.ipynb, then run `make readme`",
                file=sys.stderr,
            )
            return 1
        print("README.md is in step with nbs/index.ipynb")
        return 0
    path.write_text(text)
    print(f"wrote {path.relative_to(ROOT)} from nbs/index.ipynb")
    return 0


# ---- processing with nbdev ----
SHOW_ALL = "from IPython.display import display"


def _docs_eval(cell):
    "Which cells nbdev runs for the docs: exported code, `show_doc` calls and cells of imports alone (see above)."
    from nbdev.processors import cell_lang, _show_docs

    if cell_lang(cell) != "python" or cell.cell_type != "code" or not cell.source:
        return None
    d = cell.directives_
    if d.get("eval", "").lower() == "false":
        return None
    if d.keys() & {"export", "exports", "exporti", "exec_doc"}:
        return True
    trees = cell.parsed_()
    if not trees:
        return None
    if all(isinstance(t, (ast.Import, ast.ImportFrom)) for t in trees):
        return True
    if _show_docs(trees):  # run the `show_doc` lines alone (the page hides this cell's input anyway), beside test
        # code or not; with several, each is displayed (a cell shows only its last value: the others' entries were lost)
        calls = [ast.get_source_segment(cell.source, t) for t in _show_docs(trees)]
        if len(calls) > 1:
            calls = [SHOW_ALL] + [f"display({c})" for c in calls]
        lines = [l for l in cell.source.splitlines() if l.startswith("#|")] + calls
        cell.source = "\n".join(lines)
        return True
    return None


def _source_link(self, sym):
    """nbdev's `NbdevLookup.code` (show_doc's "source" link), with the line found for a name imported from another
    module too: show_doc names it in full (`vimpac.checkpoints.latest_checkpoint` on the pre-training page), which
    nbdev 3.3 looks up among the module's short names, writing `#LNone`. A name with no line links the file."""
    from nbdev.doclinks import _lineno

    res = self[sym]
    if not isinstance(res, tuple):
        return None
    _, py, gh = res
    mod = py.removesuffix(".py").replace("/", ".")
    line = _lineno(sym[len(mod) + 1 :] if sym.startswith(mod + ".") else sym, py)
    return f"{gh}#L{line}" if line else gh


def process() -> Path:
    "Run nbdev's doc processors over nbs/ into _proc/ (cwd nbs/, as for nbdev-test). Returns _proc's notebook folder."
    import nbdev.processors, nbdev.doclinks
    from nbdev.serve import proc_nbs
    from nbdev.quarto import refresh_quarto_yml, nbdev_sidebar

    nbdev.processors._do_eval = _docs_eval
    nbdev.doclinks.NbdevLookup.code = _source_link
    os.chdir(ROOT)
    refresh_quarto_yml()
    nbdev.doclinks._build_modidx()
    nbdev_sidebar.__wrapped__(path=NBS)
    os.chdir(NBS)  # the notebooks' relative paths (../images, ../tests/fixtures) hold from nbs/
    try:
        cache = proc_nbs(NBS, n_workers=0)
    finally:
        os.chdir(ROOT)
    return Path(cache)


# ---- rendering without Quarto ----
def mathjax_dir() -> Path | None:
    "The static MathJax 2 of the `jupyter-server-mathjax` package (found without importing it), or None."
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "static"
    return d if (d / "MathJax.js").is_file() else None


# MathJax 2 as Jupyter configures it: the combined TeX-AMS-MML_HTMLorMML-full configuration (the package ships the
# input and output jax inside it only), $...$ and $$...$$ from the notebooks' markdown, the STIX-Web fonts it ships.
# That configuration also holds the NativeMML output jax, whose styles declare @font-face rules for MathJax's TeX
# fonts in fonts/HTML-CSS/TeX/otf/, which the package does not ship: the browser asked for them (a 404) when the
# hidden MathML copy that MathJax adds for screen readers has a script, fraktur or double-struck letter (the
# \mathcal of the losses page). Those six rules are pointed at the package's STIX-Web woff files of the same styles;
# and HTML-CSS's placeholder font `url('about:blank')`, which Chromium refuses with an error, at a local() name that
# loads nothing (the browser's outcome for about:blank as well).
STIX_WOFF = "mathjax/fonts/HTML-CSS/STIX-Web/woff/STIXMathJax_"
MATHJAX_TEX_FONTS = {  # NativeMML's style key: (family, weight, the STIX-Web woff that serves it)
    "@font-face /*1*/": ("MathJax_Caligraphic-WEB", "normal", "Script-Regular"),
    "@font-face /*2*/": ("MathJax_Caligraphic-WEB", "bold", "Script-BoldItalic"),
    "@font-face /*3*/": ("MathJax_AMS-WEB", "normal", "DoubleStruck-Regular"),
    "@font-face /*4*/": ("MathJax_Script-WEB", "normal", "Script-Regular"),
    "@font-face /*5*/": ("MathJax_Fraktur-WEB", "normal", "Fraktur-Regular"),
    "@font-face /*6*/": ("MathJax_Fraktur-WEB", "bold", "Fraktur-Bold"),
}


def mathjax_config(up: str) -> dict:
    "MathJax.Hub.Config's argument for a page `up` (the path to the site root) below the site root."
    tex = {
        key: {"font-family": fam, "font-weight": w, "src": f"url('{up}{STIX_WOFF}{f}.woff') format('woff')"}
        for key, (fam, w, f) in MATHJAX_TEX_FONTS.items()
    }
    return {
        "tex2jax": {
            "inlineMath": [["$", "$"], ["\\(", "\\)"]],
            "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
            "processEscapes": True,
        },
        "HTML-CSS": {
            "availableFonts": [],
            "imageFont": None,
            "preferredFont": None,
            "webFont": "STIX-Web",
            "styles": {"@font-face": {"font-family": "MathJax_Blank", "src": "local('MathJax_Blank')"}},
        },
        "NativeMML": {"styles": tex},
        "showMathMenu": False,
        "messageStyle": "none",
    }


def mathjax_head(up: str) -> str:
    "The <head> scripts that typeset a page's formulas with the site's own MathJax (`up`: the path to the site root)."
    return (
        f'<script type="text/x-mathjax-config">MathJax.Hub.Config({json.dumps(mathjax_config(up))});</script>'
        f'<script src="{up}mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"></script>'
    )


CSS = """
body { margin: 0; font: 15px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232b; }
nav { position: fixed; z-index: 20; top: 0; bottom: 0; left: 0; width: 230px; overflow-y: auto; background: #f4f6f8;
      border-right: 1px solid #dde2e7; padding: 18px 14px; box-sizing: border-box; }
nav a { display: block; padding: 3px 6px; color: #2a4a6b; text-decoration: none; border-radius: 4px; font-size: 14px; }
nav a.here { background: #dbe6f1; font-weight: 600; } nav h2 { font-size: 17px; margin: 0 0 10px; }
nav h3 { font-size: 12px; text-transform: uppercase; color: #6b7580; margin: 14px 0 4px; }
main { margin-left: 230px; margin-right: 240px; padding: 24px 40px 40px; max-width: 1100px; }
main img { max-width: 100%; height: auto; }
pre { background: #f6f8fa; padding: 10px 12px; overflow-x: auto; border-radius: 6px; font-size: 13px; }
code { font-size: 90%; } table { border-collapse: collapse; } td, th { border: 1px solid #dde2e7; padding: 4px 8px; }
blockquote { color: #4a5560; border-left: 4px solid #dde2e7; margin: 0; padding: 0 14px; }
.cell-output pre { background: #fff; border: 1px solid #eef0f2; }
.anchor-link { visibility: hidden; text-decoration: none; margin-left: 4px; }
h1:hover .anchor-link, h2:hover .anchor-link,
h3:hover .anchor-link, h4:hover .anchor-link { visibility: visible; }
.source-link { float: right; font-size: 13px; }
.jp-RenderedMarkdown hr, main hr { border: 0; border-top: 1px solid #dde2e7; }
.page-title { margin-bottom: 4px; } .page-description { color: #4a5560; font-size: 17px; margin-top: 0; }
#search { width: 100%; box-sizing: border-box; padding: 6px 8px; margin-bottom: 8px; font: inherit; font-size: 14px;
          border: 1px solid #c5ccd3; border-radius: 5px; background: #fff; }
#search-results { display: none; position: fixed; top: 88px; left: 14px; width: 620px; max-height: 75vh;
                  overflow-y: auto; background: #fff; border: 1px solid #c5ccd3; border-radius: 6px; z-index: 10;
                  box-shadow: 0 6px 24px rgba(0, 0, 0, .18); padding: 4px 0; }
#search-results.open { display: block; }
#search-results a { display: block; padding: 7px 14px; color: #1d232b; text-decoration: none; font-size: 14px;
                    border-radius: 0; border-bottom: 1px solid #f0f2f4; }
#search-results a.sel, #search-results a:hover { background: #eaf1f8; }
#search-results .where { color: #6b7580; font-size: 12px; margin-left: 6px; }
#search-results .api { font-family: ui-monospace, monospace; font-size: 13px; color: #2a4a6b; }
#search-results .snip { display: block; color: #4a5560; font-size: 13px; margin-top: 2px; }
#search-results mark { background: #fff1a8; padding: 0; } #search-results .none { padding: 7px 14px; color: #6b7580; }
aside.toc { position: fixed; top: 0; right: 0; bottom: 0; width: 240px; overflow-y: auto; box-sizing: border-box;
            padding: 24px 14px; border-left: 1px solid #eef0f2; font-size: 13px; }
aside.toc h2 { font-size: 12px; text-transform: uppercase; color: #6b7580; margin: 0 0 6px; }
aside.toc a { display: block; color: #2a4a6b; text-decoration: none; padding: 2px 0; overflow-wrap: anywhere; }
aside.toc a.l3 { padding-left: 12px; color: #4a5560; }
.pager { display: flex; justify-content: space-between; gap: 16px; margin-top: 48px; padding-top: 14px;
         border-top: 1px solid #dde2e7; }
.pager a { text-decoration: none; color: #2a4a6b; max-width: 48%; }
.pager a.next { margin-left: auto; text-align: right; }
.pager small { display: block; color: #6b7580; }
table.api td { vertical-align: top; } table.api th { text-align: left; }
table.api td:first-child { font-family: ui-monospace, monospace; font-size: 13px; }
@media (max-width: 1180px) { aside.toc { position: static; width: auto; margin-left: 230px; border: 0;
  padding: 12px 40px 0; } main { margin-right: 0; }
  aside.toc a { display: inline-block; margin-right: 16px; } aside.toc a.l3 { display: none; } }
"""

# The search box's script (a copy goes to the site root as search.js): loads search_index.js (the index as JSON in
# one assignment, so that it loads from a file:// page too, where fetch() of a file is refused) on first use; ranks the
# sections whose heading, page title or text hold every word typed (a heading equal to or starting with a word first,
# API entries before prose); Enter, the arrows and Escape; "/" anywhere focuses the box.
SEARCH_JS = r"""(function () {
  var root = document.currentScript.getAttribute("data-root") || "";
  var input = document.getElementById("search"), box = document.getElementById("search-results");
  if (!input || !box) return;
  var index = null, waiting = [], sel = -1, timer = null;
  function load(done) {
    if (index) return done();
    waiting.push(done);
    if (waiting.length > 1) return;
    var s = document.createElement("script");
    s.src = root + "search_index.js";
    s.onload = function () {
      index = window.VIMPAC_SEARCH_INDEX || [];
      waiting.splice(0).forEach(function (f) { f(); });
    };
    document.head.appendChild(s);
  }
  function esc(s) {
    return s.replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; });
  }
  function mark(s, words) {
    var out = esc(s);
    words.forEach(function (w) {
      var re = new RegExp("(" + esc(w).replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + ")", "ig");
      out = out.replace(re, "<mark>$1</mark>");
    });
    return out;
  }
  function rank(q) {
    var words = q.toLowerCase().split(/\s+/).filter(Boolean), hits = [];
    if (!words.length) return [[], words];
    index.forEach(function (e) {
      var h = e.h.toLowerCase(), t = e.t.toLowerCase(), p = e.p.toLowerCase(), score = 0;
      for (var i = 0; i < words.length; i++) {
        var w = words[i], short = h.split(".").pop();
        if (h === w || short === w) score += 100;
        else if (h.indexOf(w) === 0 || short.indexOf(w) === 0) score += 40;
        else if (h.indexOf(w) >= 0) score += 20;
        else if (p.indexOf(w) >= 0) score += 4;
        else if (t.indexOf(w) >= 0) score += 1;
        else return;
      }
      if (words.length > 1 && h.indexOf(words.join(" ")) >= 0) score += 60;  // the phrase in the heading
      if (e.k === "api") score += 3;
      hits.push([score, e]);
    });
    hits.sort(function (a, b) { return b[0] - a[0]; });
    return [hits.slice(0, 30).map(function (x) { return x[1]; }), words];
  }
  function snippet(e, words) {
    var t = e.t, low = t.toLowerCase(), at = -1;
    words.forEach(function (w) { var i = low.indexOf(w); if (i >= 0 && (at < 0 || i < at)) at = i; });
    var from = Math.max(0, at - 50), s = t.slice(from, from + 170);
    return (from > 0 ? "\u2026" : "") + mark(s, words) + (from + 170 < t.length ? "\u2026" : "");
  }
  function show() {
    var q = input.value.trim();
    if (!q) { box.classList.remove("open"); box.innerHTML = ""; return; }
    load(function () {
      var r = rank(q), hits = r[0], words = r[1];
      sel = hits.length ? 0 : -1;
      box.innerHTML = hits.length ? hits.map(function (e, i) {
        var where = e.k === "page" ? "page" : esc(e.p);
        return '<a href="' + root + e.u + '"' + (i === 0 ? ' class="sel"' : "") + '><span class="' +
          (e.k === "api" ? "api" : "") + '">' + mark(e.h, words) + '</span><span class="where">' + where +
          "</span>" + (e.t ? '<span class="snip">' + snippet(e, words) + "</span>" : "") + "</a>";
      }).join("") : '<div class="none">No results for \u201c' + esc(q) + "\u201d</div>";
      box.classList.add("open");
    });
  }
  function move(d) {
    var links = box.querySelectorAll("a");
    if (!links.length) return;
    if (sel >= 0) links[sel].classList.remove("sel");
    sel = (sel + d + links.length) % links.length;
    links[sel].classList.add("sel");
    links[sel].scrollIntoView({block: "nearest"});
  }
  input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(show, 80); });
  input.addEventListener("focus", function () { load(function () {}); if (input.value.trim()) show(); });
  input.addEventListener("keydown", function (ev) {
    if (ev.key === "ArrowDown") { move(1); ev.preventDefault(); }
    else if (ev.key === "ArrowUp") { move(-1); ev.preventDefault(); }
    else if (ev.key === "Escape") { input.value = ""; show(); }
    else if (ev.key === "Enter") {
      var links = box.querySelectorAll("a");
      if (links.length) { window.location.href = links[Math.max(sel, 0)].href; box.classList.remove("open"); }
    }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "/" && document.activeElement !== input) { input.focus(); ev.preventDefault(); }
  });
  document.addEventListener("click", function (ev) {
    if (ev.target !== input && !box.contains(ev.target)) box.classList.remove("open");
  });
})();
"""


def page_name(nb: Path, root: Path) -> str:
    "nbdev's page name: `00_video.ipynb` → `video.html`, `runs/pretrain.ipynb` → `runs/pretrain.html`."
    rel = nb.relative_to(root)
    return str(rel.with_name(re.sub(r"^\d+[a-z]?_", "", rel.stem) + ".html"))


def _frontmatter(nb: dict) -> dict:
    for c in nb["cells"]:
        if c["cell_type"] == "raw" and "".join(c["source"]).startswith("---"):
            import yaml

            fm = yaml.safe_load("".join(c["source"]).strip().strip("-")) or {}
            c["source"] = ""
            return fm
    return {}


def _clean(nb: dict, depth: int) -> dict:
    "Apply the Quarto cell options nbconvert does not know (echo, output, include) and drop the `#|` lines."
    keep = []
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if c["cell_type"] == "markdown":
            c["metadata"] = {}
            c["source"] = src.replace("](../images/", f"]({'../' * depth}images/")
            keep.append(c)
            continue
        if c["cell_type"] != "code":
            continue
        c["metadata"] = {}
        opts = dict(re.findall(r"^#\|\s*([\w-]+)\s*:\s*(.*)$", src, re.M))
        if opts.get("include") == "false":
            continue
        c["source"] = "\n".join(l for l in src.splitlines() if not l.startswith("#|")).strip("\n")
        if opts.get("output") == "false":
            c["outputs"] = []
        for o in c.get("outputs", []):  # a widget with a static snapshot (vimpac.viz.explore): a page has no kernel
            if "text/html" in o.get("data", {}):
                o["data"].pop("application/vnd.jupyter.widget-view+json", None)
        if opts.get("echo") == "false":
            c["metadata"]["transient"] = {"remove_source": True}  # nbconvert's "hide input"
        if not c["source"] and not c.get("outputs"):
            continue
        keep.append(c)
    nb["cells"] = keep
    return nb


# ---- the pages' headings: anchors, on-page contents, the search index ----
_HEAD = re.compile(r'<h([1-4])([^>]*)\sid="([^"]+)"([^>]*)>(.*?)</h\1>', re.S)


def lower_ids(body: str) -> str:
    """Headings' ids in lower case, as Quarto makes them, so that nbdev's links between pages
    (`model.html#vimpacconfig`) land; the page's own `#` links follow."""
    ids = {}

    def low(m):
        ids[m[3]] = m[3].lower()
        return f'<h{m[1]}{m[2]} id="{m[3].lower()}"{m[4]}>{m[5]}</h{m[1]}>'

    body = _HEAD.sub(low, body)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{ids.get(m[1], m[1])}"', body)


def _text(fragment: str) -> str:
    "The visible text of an HTML fragment, one space between words."
    fragment = re.sub(r"<(script|style)\b.*?</\1>", " ", fragment, flags=re.S | re.I)
    fragment = re.sub(r"<(?:/(?:p|div|pre|li|td|th|tr|h\d|table|ul|ol|blockquote)|br|hr)\b[^>]*>", " ", fragment)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace("¶", " ").split())


def sections(body: str) -> list[dict]:
    """A page body cut at its h1-h4 headings: level, id, heading text, whether it is a `show_doc` entry (an API name,
    after its source link) and the text up to the next heading; the text before the first heading has level 0."""
    out, heads = [], list(_HEAD.finditer(body))
    first = heads[0].start() if heads else len(body)
    out.append(dict(level=0, id="", head="", api=False, text=_text(body[:first])))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
        api = 'class="source-link"' in body[max(0, m.start() - 400) : m.start()]
        out.append(dict(level=int(m[1]), id=m[3], head=_text(m[5]), api=api, text=_text(body[m.end() : end])))
    return out


def contents_html(secs: list[dict]) -> str:
    "The on-page contents: the page's h2 and h3 headings, linked."
    links = [
        f'<a href="#{html.escape(s["id"])}" class="l{s["level"]}">{html.escape(s["head"])}</a>'
        for s in secs
        if s["level"] in (2, 3)
    ]
    return f'<aside class="toc"><h2>On this page</h2>{"".join(links)}</aside>' if links else ""


SEARCH_TEXT = 1500  # characters of a section's text kept in the index (the snippet and the match)


def search_entries(name: str, title: str, secs: list[dict]) -> list[dict]:
    "The search index's entries of one page: u (page#anchor), p (page title), h (heading), k (api/page/section), t."
    out = []
    for s in secs:
        if s["level"] == 0:
            out.append(dict(u=name, p=title, h=title, k="page", t=s["text"][:SEARCH_TEXT]))
        else:
            k = "api" if s["api"] else "section"
            out.append(dict(u=f"{name}#{s['id']}", p=title, h=s["head"], k=k, t=s["text"][:SEARCH_TEXT]))
    return out


# ---- the API index ----
def modidx_names() -> dict[str, list[tuple[str, str, str]]]:
    """Every name of `vimpac._modidx` (what nbdev-export writes), by module: (full name, its doc link `page.html#anchor`
    as nbdev writes it, its source link: the repository (pyproject's Repository URL) at the line of its definition)."""
    from nbdev.doclinks import _lineno
    import vimpac._modidx as modidx

    st = modidx.d["settings"]
    out = {}
    for mod, syms in sorted(modidx.d["syms"].items()):
        rows = []
        for full, (doc, py) in syms.items():
            line = _lineno(full[len(mod) + 1 :], py)  # nbdev's own, as for show_doc's source links
            rows.append((full, doc, f"{st['git_url']}/blob/{st['branch']}/{py}" + (f"#L{line}" if line else "")))
        out[mod] = sorted(rows, key=lambda r: r[0].lower())
    return out


def public(names: dict) -> dict:
    "The public names of `modidx_names()`: no part after the module's name starts with `_`."
    out = {}
    for mod, rows in names.items():
        rows = [r for r in rows if not any(part.startswith("_") for part in r[0][len(mod) + 1 :].split("."))]
        if rows:
            out[mod] = rows
    return out


def retarget(body: str, ids: dict[str, set], names: dict) -> str:
    """nbdev links every name in backticks that its index knows to `page.html#name`; where that page has no entry for
    it (a private helper, a method or property without a `show_doc`), the link goes to its class's entry where there
    is one, else to the name's source."""
    src = {doc: s for rows in names.values() for _, doc, s in rows}

    def fix(m):
        doc = f"{m[2]}#{m[3]}"
        if m[2] in ids and m[3] not in ids[m[2]] and doc in src:
            up = _class_entry(ids, m[2], m[3])
            if up:
                return f'<a href="{m[1]}{m[2]}#{up}">'
            return f'<a href="{src[doc]}" title="no entry on {m[2]}: its source">'
        return m[0]

    return re.sub(r'<a href="((?:\.\./)*)([\w/-]+\.html)#([^"]+)">', fix, body)


def _code(t) -> str:
    "Text as HTML, with `name` as <code>name</code>."
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(t)))


def summary(full: str, mod: str) -> str:
    "The first sentence of a name's docstring (at most 140 characters), or '' where it has none or does not import."
    import importlib, inspect

    try:
        obj = importlib.import_module(mod)
        for part in full[len(mod) + 1 :].split("."):
            obj = getattr(obj, part)
        doc = " ".join(inspect.cleandoc(obj.__doc__ or "").split())  # its own (getdoc gives nn.Module.forward's)
    except Exception:
        return ""
    if isinstance(obj, (int, float, str, tuple, list, dict, frozenset, set)):  # a constant: its type's doc is not its
        return ""
    first = re.split(r"(?<=\.)\s", doc, maxsplit=1)[0].rstrip(":")
    return first if len(first) <= 140 else first[:139] + "…"


def _class_entry(ids: dict[str, set], page: str, anchor: str) -> str | None:
    """The anchor of the nearest class that `anchor` (`a.b.c`: `a.b`, then `a`) lies in and that has an entry on
    `page`, or None."""
    parts = anchor.split(".")
    return next(
        (a for a in (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)) if a in ids.get(page, set())), None
    )


def api_page(names: dict, ids: dict[str, set]) -> tuple[str, list[dict]]:
    """The API index's body: one table a module, each name with its summary, linked to its entry on the module's page
    (a method without one: to its class's entry; else to the page), and to its source; and the search entries of the
    modules and of the names without an entry of their own (the others are the pages' sections)."""
    parts, extra = [], []
    for mod, rows in names.items():
        page = rows[0][1].split("#")[0]
        parts.append(
            f'<h2 id="{mod}">{mod}</h2><p>Chapter: <a href="{page}">{page}</a></p><table class="api">'
            "<tr><th>name</th><th>summary</th><th>source</th></tr>"
        )
        extra.append(
            dict(u=f"{API_PAGE}#{mod}", p="API index", h=mod, k="api", t=" ".join(r[0][len(mod) + 1 :] for r in rows))
        )
        for full, doc, src in rows:
            pg, _, anchor = doc.partition("#")
            here = anchor in ids.get(pg, set())
            short = full[len(mod) + 1 :]
            # a method or property without an entry of its own: its class's entry, where there is one
            up = _class_entry(ids, pg, anchor)
            href = doc if here else f"{pg}#{up}" if up else pg
            note = "" if here else f" (in {html.escape(short.rsplit('.', 1)[0])}'s entry)" if up else " (no entry)"
            link = f'<a href="{href}">{html.escape(short)}</a>{note}'
            parts.append(
                f'<tr id="{full}"><td>{link}</td><td>{_code(summary(full, mod))}</td>'
                f'<td><a href="{src}" class="source-link">source</a></td></tr>'
            )
            if not here:  # searchable by its name too: to its class's entry, or to its row here
                u = f"{pg}#{up}" if up else f"{API_PAGE}#{full}"
                extra.append(dict(u=u, p=mod, h=short, k="api", t=full))
        parts.append("</table>")
    intro = (
        f"<p>{sum(map(len, names.values()))} public names of the {len(names)} modules, from "
        "<code>vimpac/_modidx.py</code> (what nbdev-export writes): each links to its entry on its chapter's page "
        "and to its source on the repository.</p>"
    )
    return intro + "".join(parts), extra


def page_html(name, title, head, body, nav, toc, pager, style, math) -> str:
    up = "../" * name.count("/")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(str(title))} – vimpac</title>"
        '<link rel="icon" href="data:,">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{style}</style>'
        f"{mathjax_head(up) if math else ''}</head>"
        f'<body><nav><h2><a href="{up}index.html">vimpac</a></h2>'
        '<input id="search" type="search" placeholder="Search the docs ( / )" autocomplete="off" '
        'aria-label="Search the docs"><div id="search-results"></div>'
        f"{nav}</nav>{toc}<main>{head}{body}{pager}</main>"
        f'<script src="{up}search.js" data-root="{up}"></script></body></html>'
    )


API_PAGE = "api.html"


def render_html(cache: Path, math: bool = False) -> list[str]:
    """Render _proc's notebooks into _docs/ with nbconvert, with MathJax scripts when `math`, and the API index, the
    search index and its script; returns the page names in the sidebar's order."""
    import nbformat
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter

    nbs = sorted(
        p for p in cache.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts and not p.name.startswith("_")
    )
    pages = {p: page_name(p, cache) for p in nbs}
    titles = {}
    exp = HTMLExporter(template_name="basic", exclude_input_prompt=True, exclude_output_prompt=True)
    bodies = {}
    for p, name in pages.items():
        nb = json.loads(p.read_text())
        fm = _frontmatter(nb)
        titles[name] = fm.get("title") or p.stem
        nb = _clean(nb, name.count("/"))
        body, _ = exp.from_notebook_node(nbformat.reads(json.dumps(nb), as_version=4))
        body = re.sub(
            r'(<a href="[^"]*")>([^<]*)</a>\{target="_blank"[^}]*\}',
            r'\1 target="_blank" class="source-link">\2</a>',
            body,
        )
        up = "../" * name.count("/")
        body = body.replace(
            f'href="{SITE}', f'href="{up}'
        )  # doc links between pages stay in this site (and are checked)
        bodies[name] = (fm, lower_ids(body))
    secs = {name: sections(body) for name, (fm, body) in bodies.items()}
    ids = {name: {s["id"] for s in ss} for name, ss in secs.items()}
    names = modidx_names()
    api_body, api_extra = api_page(public(names), ids)
    titles[API_PAGE] = "API index"
    bodies[API_PAGE] = (
        {"title": "API index", "description": "Every public name, with its entry and its source"},
        api_body,
    )
    secs[API_PAGE] = sections(api_body)  # for its contents; the index has its entries (api_extra), not its text
    rank = {name: str(p.relative_to(cache)) for p, name in pages.items()}  # chapters in the notebooks' order
    rank[API_PAGE] = "~"
    group_of = lambda n: "Reference" if n == API_PAGE else "Batch runs" if "/" in n else "Chapters"
    order = sorted(
        titles, key=lambda n: (n != "index.html", ["Chapters", "Batch runs", "Reference"].index(group_of(n)), rank[n])
    )
    style = CSS + HtmlFormatter().get_style_defs(".highlight")
    code = _code
    index = []
    for i, name in enumerate(order):
        fm, body = bodies[name]
        body = retarget(body, ids, names)
        up = "../" * name.count("/")
        links, group = [], None
        for n in order:
            here = ' class="here"' if n == name else ""
            if n == "index.html":
                links.append(f'<a href="{up}index.html"{here}>Home</a>')
                continue
            if group_of(n) != group:
                group = group_of(n)
                links.append(f"<h3>{group}</h3>")
            links.append(f'<a href="{up}{n}"{here}>{html.escape(str(titles[n]))}</a>')
        pager = ""
        if i > 0:
            pager += (
                f'<a class="prev" href="{up}{order[i - 1]}"><small>Previous</small>« {code(titles[order[i - 1]])}</a>'
            )
        if i + 1 < len(order):
            pager += f'<a class="next" href="{up}{order[i + 1]}"><small>Next</small>{code(titles[order[i + 1]])} »</a>'
        head = (
            f'<h1 class="page-title">{code(fm.get("title", ""))}</h1>'
            f'<p class="page-description">{code(fm.get("description", ""))}</p>'
        )
        out = DOCS / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            page_html(
                name,
                titles[name],
                head,
                body,
                "".join(links),
                contents_html(secs[name]),
                f'<div class="pager">{pager}</div>',
                style,
                math and name != API_PAGE,
            )
        )
        if name != API_PAGE:
            index += search_entries(name, str(titles[name]), secs[name])
    index += api_extra
    (DOCS / "search_index.js").write_text(
        "window.VIMPAC_SEARCH_INDEX = " + json.dumps(index, ensure_ascii=False, separators=(",", ":")) + ";\n"
    )
    (DOCS / "search.js").write_text(SEARCH_JS)
    return order


# ---- checks ----
def check_site(cache: Path, anchors_too: bool = True) -> list[str]:
    """Broken pages: error outputs in the processed notebooks, missing images or scripts, links to pages that do not
    exist or (with `anchors_too`: the nbconvert pages) to an anchor (`page.html#name`, `#name`) that the page does not
    have."""
    problems = []
    for p in sorted(cache.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in p.parts:
            continue
        for i, c in enumerate(json.loads(p.read_text())["cells"]):
            for o in c.get("outputs", []):
                if o.get("output_type") == "error":
                    problems.append(
                        f"{p.relative_to(cache)}: cell {i} shows an error output ({o.get('ename')}: "
                        f"{o.get('evalue', '')[:80]})"
                    )
    ids = {}

    def anchors(path: Path) -> set:
        if path not in ids:
            ids[path] = set(re.findall(r'\s(?:id|name)="([^"]+)"', path.read_text()))
        return ids[path]

    for page in sorted(DOCS.rglob("*.html")):
        text, rel = page.read_text(), page.relative_to(DOCS)
        for src in re.findall(r'<img[^>]*\ssrc="([^"]+)"', text):
            if src.startswith(("data:", "http://", "https://")):
                continue
            if not (page.parent / src.split("#")[0]).resolve().is_file():
                problems.append(f"{rel}: image {src} is missing")
        for src in re.findall(r'<script[^>]*\ssrc="([^"?#]+)', text):
            if not src.startswith(("http://", "https://")) and not (page.parent / src).resolve().is_file():
                problems.append(f"{rel}: script {src} is missing")
        for href, frag in re.findall(r'<a[^>]*\shref="([^"#:]*\.html|)(?:#([^"]*))?"', text):
            target = (page.parent / href).resolve() if href else page
            if href and not target.is_file():
                problems.append(f"{rel}: link to {href}, which is not a page")
            elif anchors_too and frag and html.unescape(frag) not in anchors(target):
                problems.append(f"{rel}: link to {href}#{frag}, an anchor {href or 'this page'} does not have")
    return problems


def build(force_html: bool) -> int:
    t0 = time.time()
    shutil.rmtree(PROC, ignore_errors=True)
    try:
        cache = process()
    except Exception as e:
        print(
            f"build_docs: error: processing the notebooks failed: {str(e).strip().splitlines()[0][:300]}",
            file=sys.stderr,
        )
        for l in str(e).strip().splitlines()[1:12]:
            print(f"    {l}", file=sys.stderr)
        return 1
    shutil.rmtree(DOCS, ignore_errors=True)
    quarto = shutil.which("quarto") or (shutil.which("quarto", path=str(Path(sys.executable).parent)))
    if quarto and not force_html:
        from nbdev.quarto_render import render_quarto

        render_quarto(cache, cache / "_docs", n_workers=0)
        shutil.move(str(cache / "_docs"), str(DOCS))
        how = "Quarto"
    else:
        mj = mathjax_dir()
        order = render_html(cache, math=mj is not None)
        if mj is not None:
            shutil.copytree(mj, DOCS / "mathjax", ignore=shutil.ignore_patterns("localization"))
        how = "nbconvert (no quarto on the PATH), " + (
            "formulas by MathJax in mathjax/"
            if mj
            else "formulas as TeX (no jupyter-server-mathjax: pip install --no-deps jupyter-server-mathjax)"
        )
        how += f"; search, an API index ({API_PAGE}), on-page contents and previous/next links over {len(order)} pages"
    if (ROOT / "images").is_dir():
        shutil.copytree(ROOT / "images", DOCS / "images", dirs_exist_ok=True)
    problems = check_site(cache, anchors_too=how != "Quarto")
    n = len(list(DOCS.rglob("*.html")))
    if problems:
        print(f"build_docs: error: {len(problems)} broken page(s):", file=sys.stderr)
        for pr in problems:
            print(f"    {pr}", file=sys.stderr)
        return 1
    print(f"build_docs: {n} pages in {DOCS} with {how}, in {time.time() - t0:.0f} s; no broken page")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--readme", action="store_true", help="write README.md from nbs/index.ipynb")
    p.add_argument("--check", action="store_true", help="with --readme: only check that README.md is in step")
    p.add_argument("--html", action="store_true", help="render with nbconvert even when quarto is installed")
    p.add_argument("--out", type=Path, help="the site's folder (default: _docs/)")
    a = p.parse_args(argv)
    if a.out:
        global DOCS
        DOCS = a.out.resolve()
    return readme(a.check) if a.readme else build(a.html)


if __name__ == "__main__":
    sys.exit(main())
