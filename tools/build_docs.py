"""Build the documentation site from the notebooks (`make docs`), and README.md from `nbs/index.ipynb` (`make readme`).

    python tools/build_docs.py                 # the site, into _docs/ (fails on a broken page)
    python tools/build_docs.py --readme        # write README.md from nbs/index.ipynb
    python tools/build_docs.py --readme --check   # exit 1 when README.md is not what nbs/index.ipynb makes

The notebooks are processed by nbdev's own doc pipeline (`nbdev.serve.proc_nbs` into `_proc/`: directives, hidden
cells, `show_doc` rendered by running the exported code). Two changes to nbdev's defaults, both for the docs only:
- cells run at build time are the exported ones, `show_doc` calls and cells of imports alone; nbdev would also run
  any cell that *contains* an import or a `show_doc`, which here would train models and write figures relative to
  the wrong folder (a `show_doc` beside other code runs alone).
  Every other cell shows the output saved in the notebook (the figures are saved outputs);
- the pages are rendered by Quarto (`nbdev-docs`'s renderer) when `quarto` is on the PATH (the `docs` extra,
  `pip install -e '.[docs]'`, brings it where the `quarto-cli` package can download its binary), else by nbconvert
  into plain HTML pages with a sidebar, so that the site builds offline. Their formulas are typeset by MathJax 2,
  served from the site itself (`_docs/mathjax/`, copied from the `jupyter-server-mathjax` package's static files, which
  `make docs` installs without its dependencies): the pages make no outside call. Without that package the formulas
  show as TeX, and the build says so.
A page is broken, and the build exits 1 naming it, when processing a notebook raises, a saved output is an error, an
image it shows is missing, or a link to another page goes nowhere.
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
    if _show_docs(trees):
        if len(_show_docs(trees)) < len(trees):  # show_doc beside test code: run the show_doc lines alone (the
            cell.source = "\n".join(
                l
                for l in cell.source.splitlines()  # page hides this cell's input anyway)
                if l.startswith(("#|", "show_doc("))
            )
        return True
    return None


def process() -> Path:
    "Run nbdev's doc processors over nbs/ into _proc/ (cwd nbs/, as for nbdev-test). Returns _proc's notebook folder."
    import nbdev.processors, nbdev.doclinks
    from nbdev.serve import proc_nbs
    from nbdev.quarto import refresh_quarto_yml, nbdev_sidebar

    nbdev.processors._do_eval = _docs_eval
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
# input and output jax inside it only), $...$ and $$...$$ from the notebooks' markdown, the STIX-Web fonts it ships
MATHJAX_CONFIG = (
    'MathJax.Hub.Config({tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], '
    'displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]], '
    'processEscapes: true}, "HTML-CSS": {availableFonts: [], imageFont: null, preferredFont: null, '
    'webFont: "STIX-Web"}, showMathMenu: false, messageStyle: "none"});'
)


def mathjax_head(up: str) -> str:
    "The <head> scripts that typeset a page's formulas with the site's own MathJax (`up`: the path to the site root)."
    return (
        f'<script type="text/x-mathjax-config">{MATHJAX_CONFIG}</script>'
        f'<script src="{up}mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"></script>'
    )


CSS = """
body { margin: 0; font: 15px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232b; }
nav { position: fixed; top: 0; bottom: 0; left: 0; width: 230px; overflow-y: auto; background: #f4f6f8;
      border-right: 1px solid #dde2e7; padding: 18px 14px; box-sizing: border-box; }
nav a { display: block; padding: 3px 6px; color: #2a4a6b; text-decoration: none; border-radius: 4px; font-size: 14px; }
nav a.here { background: #dbe6f1; font-weight: 600; } nav h2 { font-size: 17px; margin: 0 0 12px; }
nav h3 { font-size: 12px; text-transform: uppercase; color: #6b7580; margin: 14px 0 4px; }
main { margin-left: 230px; padding: 24px 40px 60px; max-width: 1100px; }
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


def render_html(cache: Path, math: bool = False) -> list[str]:
    "Render _proc's notebooks into _docs/ with nbconvert, with MathJax scripts when `math`; returns the page names."
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
        bodies[name] = (fm, body)
    rank = {name: str(p.relative_to(cache)) for p, name in pages.items()}  # chapters in the notebooks' order
    order = sorted(titles, key=lambda n: (n != "index.html", "/" in n, rank[n]))
    style = CSS + HtmlFormatter().get_style_defs(".highlight")
    for name, (fm, body) in bodies.items():
        up = "../" * name.count("/")
        links, group = [], None
        for n in order:
            g = "Batch runs" if "/" in n else "Chapters"
            if n == "index.html":
                links.append(f'<a href="{up}index.html" class="{"here" if n == name else ""}">Home</a>')
                continue
            if g != group:
                links.append(f"<h3>{g}</h3>")
                group = g
            links.append(f'<a href="{up}{n}" class="{"here" if n == name else ""}">{html.escape(str(titles[n]))}</a>')
        code = lambda t: re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(t)))
        head = (
            f'<h1 class="page-title">{code(fm.get("title", ""))}</h1>'
            f'<p class="page-description">{code(fm.get("description", ""))}</p>'
        )
        out = DOCS / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(str(titles[name]))} – vimpac</title>"
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{style}</style>'
            f"{mathjax_head(up) if math else ''}</head>"
            f'<body><nav><h2><a href="{up}index.html">vimpac</a></h2>{"".join(links)}</nav>'
            f"<main>{head}{body}</main></body></html>"
        )
    return list(pages.values())


# ---- checks ----
def check_site(cache: Path) -> list[str]:
    "Broken pages: error outputs in the processed notebooks, missing images, links to pages that do not exist."
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
    for page in sorted(DOCS.rglob("*.html")):
        text = page.read_text()
        for src in re.findall(r'<img[^>]*\ssrc="([^"]+)"', text):
            if src.startswith(("data:", "http://", "https://")):
                continue
            if not (page.parent / src.split("#")[0]).resolve().is_file():
                problems.append(f"{page.relative_to(DOCS)}: image {src} is missing")
        for src in re.findall(r'<script[^>]*\ssrc="([^"?#]+)', text):
            if not src.startswith(("http://", "https://")) and not (page.parent / src).resolve().is_file():
                problems.append(f"{page.relative_to(DOCS)}: script {src} is missing")
        for href in re.findall(r'<a[^>]*\shref="([^"#:]+\.html)(?:#[^"]*)?"', text):
            if not (page.parent / href).resolve().is_file():
                problems.append(f"{page.relative_to(DOCS)}: link to {href}, which is not a page")
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
        render_html(cache, math=mj is not None)
        if mj is not None:
            shutil.copytree(mj, DOCS / "mathjax", ignore=shutil.ignore_patterns("localization"))
        how = "nbconvert (no quarto on the PATH), " + (
            "formulas by MathJax in _docs/mathjax"
            if mj
            else "formulas as TeX (no jupyter-server-mathjax: pip install --no-deps jupyter-server-mathjax)"
        )
    if (ROOT / "images").is_dir():
        shutil.copytree(ROOT / "images", DOCS / "images", dirs_exist_ok=True)
    problems = check_site(cache)
    n = len(list(DOCS.rglob("*.html")))
    if problems:
        print(f"build_docs: error: {len(problems)} broken page(s):", file=sys.stderr)
        for pr in problems:
            print(f"    {pr}", file=sys.stderr)
        return 1
    print(f"build_docs: {n} pages in {DOCS.relative_to(ROOT)}/ with {how}, in {time.time() - t0:.0f} s; no broken page")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--readme", action="store_true", help="write README.md from nbs/index.ipynb")
    p.add_argument("--check", action="store_true", help="with --readme: only check that README.md is in step")
    p.add_argument("--html", action="store_true", help="render with nbconvert even when quarto is installed")
    a = p.parse_args(argv)
    return readme(a.check) if a.readme else build(a.html)


if __name__ == "__main__":
    sys.exit(main())
