"""Look at the `vimpac.viz.explore` widget live in JupyterLab and save `images/explorer.png`.

Starts JupyterLab on a free 127.0.0.1 port with a random token, in a temporary folder holding a one-cell notebook
that calls `explore(...)` (the shipped demo checkpoint, or `--checkpoint DIR`, or `--official FILE --tokenizer
dalle:ENC,DEC`), opens it in Debian's headless Chromium through Playwright, runs the cell, waits for the widgets, the
accuracy line and both figures, checks that the figures are drawn (not blank), and saves a screenshot of the page.

    .venv/bin/python tools/explorer_screenshot.py [--out images/explorer.png] [--checkpoint DIR] [--source CODE]

`--source` gives the cell's whole code instead, run as it is in a fresh kernel (`tests/test_explorer.py` runs the
viz chapter's explorer cell so, and writes the README's `images/explorer.png`).
Needs JupyterLab and ipywidgets (the dev extra; `make lab`), Playwright for Python (dev extra) and
Debian's `chromium`. Takes about a minute on a 2-core CPU. Exits 2 with one line when something is missing, 1 when
the explorer does not show what it should (the page is then saved beside `--out` as `*-failed.png`).
"""

from __future__ import annotations
import argparse, json, os, secrets, shutil, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook(call: str) -> dict:
    cell = lambda src: dict(
        cell_type="code", execution_count=None, id=secrets.token_hex(4), metadata={}, outputs=[], source=src
    )
    return dict(
        nbformat=4,
        nbformat_minor=5,
        cells=[cell(call)],
        metadata=dict(kernelspec=dict(name="python3", display_name="Python 3", language="python")),
    )


def _wait_http(url: str, proc, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer at {url} within {timeout:.0f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "images" / "explorer.png"))
    p.add_argument("--checkpoint", default=None, help="a run folder (default: the shipped demo checkpoint)")
    p.add_argument(
        "--official", default=None, help="an authors' pre-training classifier.pt (with --tokenizer dalle:ENC,DEC)"
    )
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--timeout", type=float, default=240, help="seconds for the cell to show both figures")
    p.add_argument(
        "--source",
        default=None,
        help="the cell's code instead of an explore(...) call made from the options above, e.g. the viz chapter's cell",
    )
    a = p.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    missing = [
        n
        for n, ok in (
            ("Debian's chromium (apt-get install chromium)", chromium),
            (
                "jupyterlab (make lab, or pip install 'vimpac[lab]')",
                shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-lab"),
            ),
        )
        if not ok
    ]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("playwright for Python (pip install -e '.[dev]')")
    if missing:
        print(f"explorer_screenshot: error: missing {', '.join(missing)}", file=sys.stderr)
        return 2

    kw = dict(video="bigbuckbunny.mp4", start=3, strategy="block", num_blocks=5, seed=0, neighbour="spatiotemporal")
    if a.checkpoint:
        kw["model"] = a.checkpoint
    if a.official:
        kw.update(official=a.official)
    if a.tokenizer:
        kw.update(tokenizer=a.tokenizer)
    call = (
        a.source or "from vimpac.viz import explore\n\nexplore(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"
    )
    tmp = Path(tempfile.mkdtemp(prefix="vimpac-explorer-"))
    (tmp / "explorer.ipynb").write_text(json.dumps(_notebook(call), indent=1))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp / ".jupyter"),
        JUPYTER_DATA_DIR=str(tmp / ".jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(tmp / ".jupyter-runtime"),
        IPYTHONDIR=str(tmp / ".ipython"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.pop("JUPYTER_PATH", None)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp}",
        "--ServerApp.open_browser=False",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "jupyterlab.log", "w")
    lab = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/api/status?token={token}", lab)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium,
                headless=True,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                    "--disable-sync",
                ],
            )
            page = browser.new_page(viewport={"width": 1500, "height": 1900})
            outside = []
            page.on(
                "request", lambda r: outside.append(r.url) if not r.url.startswith((base, "data:", "blob:")) else None
            )
            try:
                page.goto(
                    f"{base}/lab/tree/explorer.ipynb?token={token}", wait_until="domcontentloaded", timeout=120_000
                )
                cell = page.locator(".jp-Notebook .jp-Cell").first
                cell.wait_for(state="visible", timeout=120_000)
                # the kernel must be connected and idle before the cell is run, or the run is lost
                page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=120_000)
                no = page.locator(".jp-toast-button", has_text="No")  # JupyterLab's "notify about news?" toast
                if no.count():
                    no.first.click()
                left = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
                if left.count():
                    left.first.click()  # fold the file browser away
                cell.locator(".jp-InputArea-editor").click()
                page.locator(
                    "button[data-command='notebook:run-cell-and-select-next'], "
                    "jp-button[data-command='notebook:run-cell-and-select-next']"
                ).first.click()
                status = page.locator(".jp-OutputArea-output .widget-html-content", has_text="mask accuracy")
                status.first.wait_for(state="visible", timeout=a.timeout * 1000)
                imgs = page.locator(".jp-OutputArea-output .widget-output img")
                page.wait_for_function(
                    "() => document.querySelectorAll('.jp-OutputArea-output .widget-output img').length >= 2",
                    timeout=a.timeout * 1000,
                )
                sizes = [imgs.nth(i).evaluate("i => [i.naturalWidth, i.naturalHeight]") for i in range(imgs.count())]
                controls = page.locator(
                    ".jp-OutputArea-output .widget-vbox .widget-inline-hbox, "
                    ".jp-OutputArea-output .widget-vbox .widget-toggle-buttons"
                ).count()
                page.locator(".jp-Notebook").evaluate("n => n.scrollTop = 0")
                page.wait_for_timeout(500)
                page.screenshot(path=str(out), full_page=False)
                text = status.first.inner_text()
                problems = []
                if len(sizes) < 2 or min(w for w, _ in sizes) < 400:
                    problems.append(f"figures too small or missing: {sizes}")
                if controls < 5:
                    problems.append(f"only {controls} controls rendered")
                if outside:
                    problems.append(f"the page fetched from outside: {outside[:3]}")
                print(
                    f"explorer_screenshot: {out} ({time.time() - t0:.0f} s); {text.strip()}; figures {sizes}; "
                    f"{controls} controls"
                )
                if problems:
                    print("explorer_screenshot: error: " + "; ".join(problems), file=sys.stderr)
                    return 1
                return 0
            except Exception:
                page.screenshot(path=str(out.with_name(out.stem + "-failed.png")), full_page=True)
                raise
            finally:
                browser.close()
    finally:
        lab.terminate()
        try:
            lab.wait(15)
        except subprocess.TimeoutExpired:
            lab.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
