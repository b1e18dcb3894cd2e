"""The Gradio app `vimpac.demo`: launched on a loopback port, called through its `/reconstruct` API with
`gradio_client`, and driven in a real headless Chromium (Debian's `chromium`, via Playwright for Python)."""

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
import shutil, socket, subprocess, sys, time, urllib.request
from helpers import run
from pathlib import Path
import numpy as np
import pytest

gr = pytest.importorskip("gradio", reason="gradio is not installed (pip install -e '.[dev]')")
gradio_client = pytest.importorskip("gradio_client", reason="gradio_client is not installed (pip install -e '.[dev]')")
from gradio_client import Client, handle_file

from vimpac.video import sample_videos
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store, TokenStore
from vimpac.pretrain import pretrain, PretrainConfig
from vimpac.demo import build_app, launch, main, reconstruction_figures
from vimpac.inference import load_reconstruction_model
import vimpac.inference as inference
from vimpac.utils import VimpacError

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny run: two sample videos (bikes, carphone; the 720p one is left out to save decoding time) tokenized at
    64 px by the default tokenizer, a `tiny` model pre-trained 10 steps (enough for the
    plumbing; the accuracies are not the point here)."""
    tmp = tmp_path_factory.mktemp("demo")
    tok = load_tokenizer("default")
    build_store(sample_videos()[1:], tok, tmp / "store", fps=2.0, frame_size=64, progress=False)
    pretrain(
        TokenStore(tmp / "store", tokenizer=tok),
        "tiny",
        PretrainConfig(steps=10, batch_size=2, lr=2e-3),
        out=tmp / "run",
        progress=False,
    )
    return tmp / "run"


@pytest.fixture(scope="module")
def server(run_dir):
    "The app served in this process on a free loopback port; yields its URL."
    app = build_app(checkpoint=run_dir)
    port = _free_port()
    launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    app.close()


@pytest.fixture(scope="module")
def browser_server(run_dir, server):
    """The app the browser test drives: with the shipped demo checkpoint (`vimpac/weights/demo/`) when the package
    has it, so that `images/demo.png` shows the real demo model; else the tiny run's server."""
    if not (inference.DEMO_CHECKPOINT / "config.json").is_file():
        yield server
        return
    app = build_app()
    port = _free_port()
    launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    app.close()


def test_api_reconstruct_sample_and_fake(server, tmp_path):
    client = Client(server, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)
    assert "/reconstruct" in api["named_endpoints"]
    params = api["named_endpoints"]["/reconstruct"]["parameters"]
    assert params[0]["parameter_name"] == "video" and not params[0]["parameter_has_default"]
    assert all(p["parameter_has_default"] for p in params[1:]), params  # only the video is required

    carphone = sample_videos()[2]
    rec, nn, model_acc, copy_acc = client.predict(handle_file(str(carphone)), api_name="/reconstruct")
    from PIL import Image

    for f in (rec, nn):
        img = np.asarray(Image.open(f))
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 400 and img.std() > 10  # a real figure
    assert 0 <= model_acc <= 1 and 0 <= copy_acc <= 1

    fake = tmp_path / "fake.mp4"
    fake.write_text("this is a text file, not a video\n")
    with pytest.raises(Exception) as e:
        client.predict(handle_file(str(fake)), api_name="/reconstruct")
    assert "fake.mp4: not a readable video" in str(e.value)

    # an option out of its slider's range is refused in one line too, and the app still serves
    with pytest.raises(Exception) as e:
        client.predict(handle_file(str(carphone)), "iid", 0, 1.5, api_name="/reconstruct")
    assert "Value 1.5 is greater than maximum value 0.95" in str(e.value)
    # two users at once are queued, and both get their answer
    jobs = [
        client.submit(handle_file(str(carphone)), "iid", 0, 0.5, seed, "spatiotemporal", api_name="/reconstruct")
        for seed in (3, 4)
    ]
    for j in jobs:
        assert 0 <= j.result(timeout=60)[3] <= 1


def test_too_long_video_is_refused(run_dir, tmp_path):
    "The limits: a video longer than `max_seconds` gets a one-line gr.Error naming the limit."
    model, tok = load_reconstruction_model(run_dir)
    with pytest.raises(VimpacError, match=r"bikes.mp4: 10 s long; the demo takes videos up to 5 s"):
        reconstruction_figures(sample_videos()[1], model, tok, limits=dict(max_seconds=5))


def test_old_names_warn_and_work(run_dir):
    "The names that moved to `vimpac.inference` (issue 22) still work for one release, with a deprecation warning."
    import vimpac.demo as demo, vimpac.viz as viz
    from vimpac.utils import VimpacDeprecationWarning

    with pytest.warns(VimpacDeprecationWarning, match=r"demo\.load_demo_model is now vimpac\.inference\.load_reco"):
        load_demo_model = demo.load_demo_model
    assert load_demo_model is load_reconstruction_model
    model, tok = load_demo_model(run_dir)
    with pytest.warns(
        VimpacDeprecationWarning, match="vimpac.viz.reconstruct is now vimpac.inference.reconstruct_tokens"
    ):
        reconstruct = viz.reconstruct
    mask = inference.make_mask((model.config.max_clip_len, *model.config.token_map), seed=0)
    z = tok.encode(np.zeros((model.config.max_clip_len, 64, 64, 3), np.uint8))
    assert reconstruct(model, z, mask)["pred"].shape == mask.shape
    with pytest.raises(AttributeError):
        demo.no_such_name


def test_missing_demo_checkpoint_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(inference, "DEMO_CHECKPOINT", tmp_path / "none")
    with pytest.raises(SystemExit) as e:
        main(["--port", str(_free_port())])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vimpac-demo: error: no demo checkpoint is installed at") and err.endswith(
        "(a run folder written by vimpac-pretrain)"
    )
    assert "\n" not in err


def test_python_m_serves_on_loopback(run_dir):
    "`python -m vimpac.demo --checkpoint RUN` starts a server on 127.0.0.1 with HF_HUB_OFFLINE=1."
    port = _free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vimpac.demo", "--checkpoint", str(run_dir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    try:
        deadline = time.time() + 60
        body = None
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=2) as r:
                    body = r.read()
                    break
            except OSError:
                time.sleep(0.5)
        assert body is not None, f"no server on 127.0.0.1:{port} (exit {proc.poll()})"
        assert b"reconstruct" in body
        # bound to loopback only: the kernel's table of listening TCP sockets has this port on 127.0.0.1 alone
        rows = (
            [l.split() for l in Path("/proc/net/tcp").read_text().splitlines()[1:]]
            if Path("/proc/net/tcp").exists()
            else []
        )
        local = [r[1] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == port]
        if rows:
            assert local == ["0100007F:%04X" % port], local
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium); .ci/run installs it"
)
def test_browser_upload_and_run(browser_server):
    server = browser_server
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright for Python is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            urls = []
            page.on("request", lambda r: urls.append(r.url))
            page.goto(server, wait_until="networkidle")
            page.locator("#video input[type=file]").set_input_files(str(sample_videos()[2]))
            page.wait_for_timeout(500)
            page.locator("#run").click()
            for el in ("#reconstruction img", "#nn_fill img"):
                page.locator(el).first.wait_for(state="visible", timeout=60_000)
            text = page.locator("body").inner_text()  # the header names the model and what it was trained on
            assert "Model:" in text and "pre-trained model; tokens of vimpac-vqvae" in text and "trained on" in text
            acc = page.locator("#model_acc input").input_value()
            assert 0 <= float(acc) <= 1
            sizes = page.evaluate(
                "() => [...document.querySelectorAll('#reconstruction img, #nn_fill img')].map(i => i.naturalWidth)"
            )
            assert len(sizes) >= 2 and min(sizes) > 400, sizes
            outside = [u for u in urls if not u.startswith((server, "data:", "blob:"))]
            assert not outside, f"the page fetched from outside: {outside[:5]}"  # no fonts, scripts or analytics
            (ROOT / "images").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / "images" / "demo.png"), full_page=True)
        finally:
            browser.close()


@pytest.mark.parametrize("case", ["port in use", "foreign host", "unknown host"])
def test_bad_address_is_one_line(bin_dir, case):
    """`vimpac-demo` with its port in use, or a --host that is not this machine's, says so in one line and exits 2,
    before loading a model (it ended in Gradio's "Cannot find empty port" traceback)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        host, want = {
            "port in use": ("127.0.0.1", f"--port {port}: 127.0.0.1:{port} is in use"),
            "foreign host": ("192.0.2.1", "--host '192.0.2.1': cannot listen there"),
            "unknown host": ("no.such.host.invalid", "--host 'no.such.host.invalid': not an address"),
        }[case]
        r = run(bin_dir / "vimpac-demo", "--host", host, "--port", port, timeout=120)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert err.startswith("vimpac-demo: error: ") and "\n" not in err and want in err, err


def test_refused_upload_is_one_line_without_the_temporary_path(run_dir, tmp_path, capsys):
    """An upload the demo refuses: the page's message names the file, not Gradio's temporary folder, and the server log
    gets one line, not a traceback (Gradio prints one for a `gr.Error` unless told not to)."""
    import gradio as gr
    from vimpac.demo import _page_reconstruct, LIMITS

    model, tok = load_reconstruction_model(run_dir)
    upload = tmp_path / "gradio" / "0123abcd" / "holiday.mp4"
    upload.parent.mkdir(parents=True)
    upload.write_text("this is a text file, not a video\n")
    with pytest.raises(gr.Error) as e:
        _page_reconstruct(model, tok, dict(LIMITS))(str(upload), progress=lambda *a, **k: None)
    assert str(e.value.message).startswith("holiday.mp4: ") and str(tmp_path) not in e.value.message, e.value.message
    assert e.value.print_exception is False
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("vimpac-demo: refused holiday.mp4: holiday.mp4: ")
        and "\n" not in err
        and str(tmp_path) not in err
    ), err
