"""The Gradio app `vimpac.demo`: launched on a loopback port, called through its `/reconstruct` API with
`gradio_client`, and driven in a real headless Chromium (Debian's `chromium`, via Playwright for Python)."""

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
import re, signal, socket, subprocess, sys, time, urllib.request
from helpers import CHROMIUM, NO_CHROMIUM, browser_page, run_command, screenshot_path
from pathlib import Path
import av
import numpy as np
import pytest
import torch

gr = pytest.importorskip("gradio", reason="gradio is not installed (pip install -e '.[dev]')")
gradio_client = pytest.importorskip("gradio_client", reason="gradio_client is not installed (pip install -e '.[dev]')")
from gradio_client import Client, handle_file

from vimpac.video import sample_videos
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store, TokenStore
from vimpac.pretrain import pretrain, PretrainConfig
from vimpac.demo import ACCURACY_LABELS, PANELS, build_app, launch, main, reconstruction_figures
from vimpac.inference import load_reconstruction_model
import vimpac.inference as inference
from vimpac.utils import VimpacError

ROOT = Path(__file__).resolve().parents[1]


EXAMPLES = {  # the page's examples: their labels, and what each one's summary says
    "bigbuckbunny.mp4: blocks, 15%": "closest to 15%",
    "bikes.mp4: i.i.d., 75%": "probability 75%",
    "carphone_pristine.mp4: blocks, 40%": "closest to 40%",
}


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


@pytest.fixture(scope="module", autouse=True)
def cache_home(tmp_path_factory):
    "The examples' outputs (computed at start-up, kept under $XDG_CACHE_HOME) and Gradio's cache of uploads and"
    "outputs ($GRADIO_TEMP_DIR) go to temporary folders of this module's."
    with pytest.MonkeyPatch.context() as m:
        m.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        m.setenv("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
        yield Path(os.environ["XDG_CACHE_HOME"])


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
    # a loaded 2-core CI: slow answers
    client = Client(
        server, verbose=False, analytics_enabled=False, httpx_kwargs={"timeout": 300}, download_files=tmp_path / "got"
    )
    api = client.view_api(return_format="dict", print_info=False)
    assert "/reconstruct" in api["named_endpoints"]
    params = api["named_endpoints"]["/reconstruct"]["parameters"]
    assert params[0]["parameter_name"] == "video" and not params[0]["parameter_has_default"]
    assert all(p["parameter_has_default"] for p in params[1:]), params  # only the video is required

    carphone = sample_videos()[2]
    start = time.time_ns()
    *videos, frames, summary, model_acc, copy_acc = client.predict(handle_file(str(carphone)), api_name="/reconstruct")
    cache = Path(os.environ["GRADIO_TEMP_DIR"])
    outputs = {f"{k}.mp4" for k in PANELS} | {f"frame-{i:03d}.png" for i in range(8)}
    copies = [f for f in cache.rglob("*") if f.name in outputs and f.stat().st_ctime_ns >= start]
    assert not copies and videos, copies  # the outputs are served from the page's folder, not copied
    T = 8  # carphone's 4 s at 2 FPS (under PAGE_FRAMES): two windows of the tiny model's 5 frames, 8 x 8 tokens
    for path in videos:  # original, VQ-VAE, masked input, model, nearest-token copy: T frames at 2 FPS, 256 px
        with av.open(path) as c:
            s = c.streams.video[0]
            clip = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(s)])
        assert clip.shape == (T, 256, 256, 3) and float(s.average_rate) == 2.0, (path, clip.shape)
    assert [Path(p).stem for p in videos] == ["original", "vqvae", "masked", "reconstruction", "copy"]
    from PIL import Image

    assert [f["caption"] for f in frames] == [f"frame {i + 1} of {T} ({i / 2:.1f} s)" for i in range(T)]
    strip = np.asarray(Image.open(frames[0]["image"]))
    assert strip.shape[0] > 256 and strip.shape[1] > 5 * 256 and strip.std() > 10  # five frames side by side
    n = int(re.search(r"\*\*(\d+) of 512 tokens masked", summary).group(1))
    assert "blocks: the number whose expected mask ratio is closest to 15%" in summary, summary
    for acc in (model_acc, copy_acc):  # numbers: percent of the n masked tokens, one decimal
        assert isinstance(acc, float) and 0 <= acc <= 100 and abs(acc - 100 * round(acc * n / 100) / n) <= 0.05, acc
    returns = {r["label"]: r["python_type"]["type"] for r in api["named_endpoints"]["/reconstruct"]["returns"]}
    assert "summary" in returns and not [r for r in returns if r.startswith("value_")], returns  # every output named
    assert [returns[k] for k in ACCURACY_LABELS] == ["float", "float"], returns

    fake = tmp_path / "fake.mp4"
    fake.write_text("this is a text file, not a video\n")
    with pytest.raises(Exception) as e:
        client.predict(handle_file(str(fake)), api_name="/reconstruct")
    assert "fake.mp4: not a readable video" in str(e.value)

    # an option out of its slider's range is refused in one line too, and the app still serves
    with pytest.raises(Exception) as e:
        client.predict(handle_file(str(carphone)), "iid", 150, api_name="/reconstruct")
    assert "Value 150 is greater than maximum value 90" in str(e.value)
    # two users at once are queued, and both get their answer; i.i.d. at 50% masks about half the tokens
    jobs = [
        client.submit(handle_file(str(carphone)), "iid", 50, 0, seed, "spatiotemporal", api_name="/reconstruct")
        for seed in (3, 4)
    ]
    for j in jobs:
        summary = j.result(timeout=60)[-3]  # the summary, before the two accuracies
        share = float(re.search(r"masked \(([\d.]+)%\)", summary).group(1))
        assert 40 < share < 60 and "i.i.d., each token with probability 50%" in summary, summary


def test_block_ratio_sets_the_number_of_blocks(run_dir):
    """The ratio control for block masks: the number of blocks is the one §3.1 derives for the ratio
    (`blocks_for_ratio`), so a higher ratio masks more on average; a number of blocks given by hand wins."""
    from vimpac.demo import reconstruction_clips
    from vimpac.masking import blocks_for_ratio

    model, tok = load_reconstruction_model(run_dir)
    carphone = sample_videos()[2]
    shares = {}
    for ratio in (0.15, 0.6):
        runs = [reconstruction_clips(carphone, model, tok, ratio=ratio, seed=s) for s in range(6)]
        assert {r.blocks for r in runs} == {blocks_for_ratio(5, 8, 8, ratio)}
        shares[ratio] = np.mean([r.masked for r in runs])
    assert shares[0.15] < 0.3 < 0.45 < shares[0.6], shares
    assert reconstruction_clips(carphone, model, tok, ratio=0.6, blocks=2).blocks == 2


def test_examples_cache_is_per_model(run_dir, cache_home):
    "The examples' outputs are kept per model: another model's page never shows them."
    from vimpac.demo import examples_cache

    model, _ = load_reconstruction_model(run_dir)
    other, _ = load_reconstruction_model(run_dir)
    assert examples_cache(model) == examples_cache(other)
    assert examples_cache(model).is_relative_to(cache_home / "vimpac" / "demo-examples")
    with torch.no_grad():
        next(other.parameters()).add_(1e-3)  # one weight changed, a little
    assert examples_cache(model) != examples_cache(other)


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
    with pytest.warns(VimpacDeprecationWarning, match=r"TokenReconstruction\['pred'\] is deprecated"):  # the old dict
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


@pytest.fixture(scope="module")
def home_server(run_dir, tmp_path_factory):
    """`python -m vimpac.demo --checkpoint RUN` as a user starts it: the cache in `~/.cache` of a home folder (no
    `XDG_CACHE_HOME`), which lies neither in the working folder nor in the system's temporary folder (`TMPDIR`
    elsewhere), with Python's ResourceWarnings shown and HF_HUB_OFFLINE=1. Yields (process, URL); the last test
    using it stops it with Ctrl-C."""
    tmp = tmp_path_factory.mktemp("user")
    for d in ("home", "tmp", "work"):
        (tmp / d).mkdir()
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env.update(HOME=str(tmp / "home"), TMPDIR=str(tmp / "tmp"), HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    # unbuffered, and every thread's stack on SIGABRT: what a server that outlives Ctrl-C is doing (test below)
    env.update(PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    port = _free_port()
    argv = ["-W", "always::ResourceWarning", "-m", "vimpac.demo", "--checkpoint", run_dir, "--port", port]
    proc = subprocess.Popen(
        [sys.executable, *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp / "work",
        text=True,
        # Ctrl-C's default, as a terminal's foreground job has it: a run started in the background of a script
        # (`.ci/run &`) inherits SIGINT ignored, and Python then raises no KeyboardInterrupt (the stacks showed it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline, body = time.time() + 180, None
        while time.time() < deadline and proc.poll() is None and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=2) as r:
                    body = r.read()
            except OSError:
                time.sleep(0.5)
        assert body is not None and b"reconstruct" in body, f"no server on 127.0.0.1:{port} (exit {proc.poll()})"
        yield proc, f"http://127.0.0.1:{port}/", tmp / "home"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_examples_load_with_the_cache_in_home(home_server):
    """Each example's outputs, computed at start-up into `~/.cache`, reach the page (Gradio serves only the working
    folder, the temporary folder and the paths `launch` allows: an example once failed for every user)."""
    _, url, home = home_server
    client = Client(
        url, verbose=False, analytics_enabled=False, httpx_kwargs={"timeout": 300}
    )  # slow answers under load
    try:
        for i, (label, summary) in enumerate(EXAMPLES.items()):
            *videos, frames, text, model_acc, copy_acc = client.predict(i, api_name="/load_example")
            assert [Path(v).name for v in videos] == [f"{k}.mp4" for k in PANELS]
            frames_shown = {"bigbuckbunny": 11, "bikes": 16, "carphone_pristine": 8}[label.split(".mp4")[0]]
            assert summary in text and len(frames) == frames_shown, (label, text, len(frames))  # at most PAGE_FRAMES
    finally:  # its heartbeat thread holds a connection open, which the server's Ctrl-C test below would wait for
        client.close()
    assert list((home / ".cache" / "vimpac" / "demo-examples").glob("*/*/original/*/original.mp4"))  # kept there


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_browser_clicks_every_example(home_server):
    "In headless Chromium, each sample example of the page served from a user's home shows five videos that play."
    ready = "() => [...document.querySelectorAll('video')].filter(v => v.readyState >= 2 && v.videoWidth == 256).length"
    with browser_page() as page:
        page.goto(home_server[1], wait_until="networkidle")
        for label in EXAMPLES:
            page.get_by_text(label).first.click()
            page.wait_for_function(
                f"() => document.querySelector('#summary').innerText.includes({EXAMPLES[label]!r})", timeout=30_000
            )
            page.wait_for_function(f"{ready} == 5", timeout=30_000)
            assert "Error" not in page.locator("#summary").inner_text()


def test_python_m_serves_on_loopback(home_server):
    """`python -m vimpac.demo` serves on 127.0.0.1 only, cleanly: no "unclosed event loop" (Gradio left three), no
    warning (Gradio's own pandas deprecations once printed as the kit's), and Ctrl-C ends it in one line."""
    proc, url, _ = home_server
    port = int(url.rsplit(":", 1)[1].strip("/"))
    try:
        # bound to loopback only: the kernel's table of listening TCP sockets has this port on 127.0.0.1 alone
        rows = (
            [l.split() for l in Path("/proc/net/tcp").read_text().splitlines()[1:]]
            if Path("/proc/net/tcp").exists()
            else []
        )
        local = [r[1] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == port]
        if rows:
            assert local == ["0100007F:%04X" % port], local
        # a stream left open, as a browser tab or a client's heartbeat leaves one: it must not hold the shutdown
        stream = socket.create_connection(("127.0.0.1", port))
        stream.sendall(f"GET /gradio_api/heartbeat/test HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert stream.recv(64).startswith(b"HTTP/1.1 200"), "no heartbeat stream"
        proc.send_signal(signal.SIGINT)
        try:  # 120 s: in the full suite on the 2-core CI machine the shutdown once took over 30 s (3 s alone)
            out = proc.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            try:
                dump = proc.communicate(timeout=30)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                dump = proc.communicate()[0]
            raise AssertionError(f"Ctrl-C did not end the server in 120 s; its output and stacks:\n{dump[-6000:]}")
        finally:
            stream.close()
        # Gradio's wait takes the Ctrl-C and closes the server (exit 0); one arriving before it, the kit's one line
        assert "closing server" in out or "vimpac-demo: interrupted" in out, out
        assert "unclosed event loop" not in out and "Traceback" not in out, out
        assert "vimpac-demo: warning" not in out and "Warning" not in out, out  # Gradio's pandas deprecations: silenced
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_browser_page(browser_server):
    """The page as a user meets it, in headless Chromium: nothing shown before a run, the number of blocks shown for
    block masks only, a sample example whose outputs were computed at start-up (five videos that play, the frames),
    an upload reconstructed at another mask ratio, a frame picked; nothing fetched from outside. Saves the screenshot
    `demo.png` (`helpers.screenshot_path`: the README's under `make screenshots`)."""
    server = browser_server
    videos = "() => [...document.querySelectorAll('video')].map(v => [v.readyState, v.videoWidth, v.currentSrc])"
    with browser_page() as page:
        urls = []
        page.on("request", lambda r: urls.append(r.url))
        page.goto(server, wait_until="networkidle")
        page.locator("#run").wait_for(state="visible", timeout=30_000)
        acc = lambda: page.locator("#model_acc input").first.input_value()
        summary = lambda: page.locator("#summary").inner_text()
        text = page.locator("body").inner_text()  # the header names the model and what it was trained on
        assert "Model:" in text and "pre-trained model; tokens of vimpac-vqvae" in text and "trained on" in text
        assert summary().strip() == "" and page.evaluate(videos) == []  # nothing before a run
        assert not page.locator("#model_acc").is_visible()  # no accuracy box reading 0

        assert page.locator("#blocks").is_visible()  # the number of blocks: block masks only
        page.get_by_role("radio", name="i.i.d.").check()
        page.locator("#blocks").wait_for(state="hidden")
        assert "each token's probability" in page.locator("#ratio").inner_text()
        page.get_by_role("radio", name="blocks").check()
        page.locator("#blocks").wait_for(state="visible")
        assert "the number of blocks follows from it" in page.locator("#ratio").inner_text()

        page.get_by_text("bikes.mp4: i.i.d., 75%").click()  # an example: outputs computed at start-up
        page.wait_for_function("() => document.querySelectorAll('video').length == 5", timeout=15_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('video')].every(v => v.readyState >= 2)", timeout=15_000
        )
        assert [v[1] for v in page.evaluate(videos)] == [256] * 5  # decoded by the browser: it plays them
        assert "i.i.d., each token with probability 75%" in summary(), summary()
        page.locator("#model_acc").wait_for(state="visible")
        assert 0 <= float(acc()) <= 100, acc()
        assert page.get_by_role("radio", name="i.i.d.").is_checked()  # the example's settings are shown

        page.locator("#video").get_by_role("button", name="Clear").click()  # the example's video, then an upload
        page.locator("#video input[type=file]").set_input_files(str(sample_videos()[2]))
        page.get_by_role("radio", name="blocks").check()
        ratio = page.locator("#ratio input[type=number]")
        ratio.fill("50")
        ratio.press("Enter")
        page.locator("#run").click()
        page.wait_for_function(
            "() => document.querySelector('#summary').innerText.includes('closest to 50%')", timeout=60_000
        )
        share = float(re.search(r"masked \(([\d.]+)%\)", summary()).group(1))
        assert 25 < share < 75, summary()  # one clip's share varies around the ratio asked for

        page.locator("#frames button.thumbnail-item").nth(2).click()  # the frame chooser
        page.get_by_text("frame 3 of 8 (1.0 s)").first.wait_for(state="visible")
        outside = [u for u in urls if not u.startswith((server, "data:", "blob:"))]
        assert not outside, f"the page fetched from outside: {outside[:5]}"  # no fonts, scripts or analytics
        page.wait_for_timeout(600)  # the videos a little into their loop
        page.screenshot(path=str(screenshot_path("demo.png")), full_page=True)


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
        r = run_command(bin_dir / "vimpac-demo", "--host", host, "--port", port, timeout=120)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert err.startswith("vimpac-demo: error: ") and "\n" not in err and want in err, err


def test_refused_upload_is_one_line_without_the_temporary_path(run_dir, tmp_path, capsys):
    """An upload the demo refuses: the page's message names the file, not Gradio's temporary folder, and the server log
    gets one line, not a traceback (Gradio prints one for a `gr.Error` unless told not to)."""
    import gradio as gr
    from vimpac.demo import page_reconstruct, LIMITS

    model, tok = load_reconstruction_model(run_dir)
    upload = tmp_path / "gradio" / "0123abcd" / "holiday.mp4"
    upload.parent.mkdir(parents=True)
    upload.write_text("this is a text file, not a video\n")
    with pytest.raises(gr.Error) as e:
        page_reconstruct(model, tok, dict(LIMITS))(str(upload), progress=lambda *a, **k: None)
    assert str(e.value.message).startswith("holiday.mp4: ") and str(tmp_path) not in e.value.message, e.value.message
    assert e.value.print_exception is False
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("vimpac-demo: refused holiday.mp4: ")
        and "holiday.mp4: holiday.mp4" not in err  # the name once
        and "\n" not in err
        and str(tmp_path) not in err
    ), err


def test_page_keeps_only_its_last_requests_files(run_dir, tmp_path, monkeypatch):
    """Issue 35: the demo's folder grew by every request until exit (464 files, 17 MB after about 130), and Gradio
    copied every video and frame it served into its own cache (1.5 MiB a request, kept an hour). The page keeps only
    its last `KEEP_REQUESTS` requests' files, and Gradio serves them from there (a static path), copying none."""
    import tempfile
    from gradio.utils import is_static_file
    from vimpac.demo import KEEP_REQUESTS, LIMITS, page_reconstruct

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model, tok = load_reconstruction_model(run_dir)
    run = page_reconstruct(model, tok, dict(LIMITS))
    (folder,) = tmp_path.glob("vimpac-demo-*")
    for i in range(KEEP_REQUESTS + 2):
        *videos, frames = run(str(sample_videos()[0]), ratio=15, seed=i, progress=lambda *a, **k: None)[
            : len(PANELS) + 1
        ]
        files = [*videos, *(path for path, _ in frames)]
        assert all(Path(f).is_file() and is_static_file(f) for f in files)  # there to be served, not to be copied
    assert len(list(folder.iterdir())) == KEEP_REQUESTS
    assert len(list(folder.rglob("*.mp4"))) == KEEP_REQUESTS * len(PANELS)
    assert len(list(folder.rglob("*.png"))) == KEEP_REQUESTS * len(frames)
    assert not is_static_file(str(sample_videos()[0]))  # only the page's outputs are static
