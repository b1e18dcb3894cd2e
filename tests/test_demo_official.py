"""The demo and the explorer on an authors' model: `vimpac-demo --official classifier.pt --tokenizer dalle:ENC,DEC`,
`build_app(official=...)` served and called through `/reconstruct`, `explore(official=..., tokenizer=...)`, and the bad
combinations, each one line and exit status 2. The authors' checkpoint has the keys of the tiny one their own code
wrote (tests/fixtures/official, V = 8192), widened to the heads rule of their code; the DALL-E files are tiny fakes
written by the `dall_e` package."""

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
import contextlib, io, socket, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import torch

dall_e = pytest.importorskip("dall_e", reason="the dall_e reference package makes the fake DALL-E files (make install)")
pytest.importorskip("gradio", reason="gradio is not installed (pip install -e '.[dev]')")
from vimpac.demo import build_app, launch, main, reconstruction_figures
from vimpac.inference import load_reconstruction_model
from vimpac.official import load_official_pretraining
from vimpac.utils import VimpacError
from vimpac.video import sample_videos

FIX = Path(__file__).resolve().parent / "fixtures" / "official"
WIDTH = "backbone.positional_embedding.width_pos_embedding"


def _dalle(folder: Path, vocab: int, seed: int = 0) -> str:
    "Tiny DALL-E dVAE files saved as the released ones are (whole modules); returns the `dalle:ENC,DEC` name."
    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    enc = dall_e.Encoder(n_hid=64, n_blk_per_group=1, vocab_size=vocab)
    dec = dall_e.Decoder(n_init=32, n_hid=64, n_blk_per_group=1, vocab_size=vocab)
    torch.save(enc, folder / "encoder.pkl")
    torch.save(dec, folder / "decoder.pkl")
    return f"dalle:{folder / 'encoder.pkl'},{folder / 'decoder.pkl'}"


def _widened(sd: dict, width: int, seed: int = 0) -> dict:
    """The authors' tiny pre-training checkpoint key for key, at hidden size 128 (2 heads of 64: their code's rule,
    hidden / 64; the fixture's 32 wide model had its 4 heads set by hand), with seeded random values, and a width
    table of `width` rows (4: the square token map 4 x 4 their released models have, 16 x 16 or 32 x 32)."""
    g = torch.Generator().manual_seed(seed)
    wide = {32: 128, 16: 64, 128: 512}  # hidden, a head group, MLP
    out = {}
    for k, v in sd.items():
        if v.ndim == 0:
            out[k] = v.clone()
            continue
        shape = [wide.get(n, n) for n in v.shape]
        if k == WIDTH:
            shape[0] = width
        t = torch.randn(shape, generator=g) * 0.05
        if k.endswith(("LayerNorm.weight", "ln.weight", "ln_pre.weight", "transform.2.weight", "running_var")):
            t += 1
        out[k] = t
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """`pretrain`: an authors'-format pre-training checkpoint (token map 4 x 4); `finetuned`: their fine-tuned
    classifier (no token head); `nonsquare`: token map 4 x 5; DALL-E names with the model's 8192 codes (`dalle`),
    512 codes (`dalle512`), and the encoder alone (`encoder_only`)."""
    tmp = tmp_path_factory.mktemp("official")
    sd = torch.load(FIX / "pretrain_tiny.pt", weights_only=True)
    clf = torch.load(FIX / "classifier_tiny.pt", weights_only=True)  # backbone and cls_fc: no mlm_head
    for name, state, width in (("pretrain", sd, 4), ("nonsquare", sd, 5), ("finetuned", clf, 4)):
        (tmp / name).mkdir()
        torch.save(_widened(state, width), tmp / name / "classifier.pt")
    dalle = _dalle(tmp / "dalle", 8192)
    return dict(
        pretrain=tmp / "pretrain" / "classifier.pt",
        finetuned=tmp / "finetuned" / "classifier.pt",
        nonsquare=tmp / "nonsquare" / "classifier.pt",
        dalle=dalle,
        dalle512=_dalle(tmp / "dalle512", 512),
        encoder_only=dalle.split(",")[0],
    )


def _main(*argv):
    "`vimpac-demo ARGV` in this process: (exit status, stderr)."
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, err.getvalue().strip()


def test_official_model_reconstructs(files):
    model, tok = load_reconstruction_model(official=files["pretrain"], tokenizer=files["dalle"])
    c = model.config
    assert (c.vocab_size, c.token_map, c.max_clip_len, c.mask_id, model.training) == (8192, (4, 4), 3, 8196, False)
    assert tok.vocab_size == 8192 and tok.downsample == 8
    # the same weights as converting the file directly: the app adds no change of its own
    ref = load_official_pretraining(files["pretrain"])
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))
    r = reconstruction_figures(sample_videos()[2], model, tok, strategy="iid", ratio=0.4, seed=1)
    assert r.frames == 3 and 0 <= r.model_acc <= 1 and 0 <= r.copy_acc <= 1 and 0.2 < r.masked < 0.6
    assert len(r.reconstruction.axes) >= 15  # five rows of three frames, at 32 x 32 px (token map 4 x 8)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_official_app_serves_reconstruct(files, tmp_path, monkeypatch):
    "The app built on the authors' model answers `/reconstruct` on a sample video: five clips, the frames, percentages."
    import av
    from gradio_client import Client, handle_file

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the examples' outputs, computed at start-up
    app = build_app(official=files["pretrain"], tokenizer=files["dalle"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch(app, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    try:
        *videos, frames, summary, model_acc, copy_acc = Client(
            f"http://127.0.0.1:{port}/", verbose=False, analytics_enabled=False, httpx_kwargs={"timeout": 300}
        ).predict(handle_file(str(sample_videos()[2])), api_name="/reconstruct")
        assert Path(videos[3]).stem == "reconstruction"  # after the original, the tokenizer's and the masked input
        with av.open(videos[3]) as c:  # carphone's 8 frames (4 s at 2 FPS) in windows of the model's 3, at 256 px
            clip = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
        assert clip.shape == (8, 256, 256, 3) and clip.std() > 10, clip.shape
        assert len(frames) == 8 and "tokens masked" in summary
        assert all(isinstance(a, float) and 0 <= a <= 100 for a in (model_acc, copy_acc)), (model_acc, copy_acc)
    finally:
        app.close()


@pytest.mark.parametrize(
    "case,expected",
    [
        (
            "no tokenizer",
            "classifier.pt: the authors' models predict DALL-E dVAE codes; pass their tokenizer with --tokenizer "
            "dalle:ENCODER.pkl,DECODER.pkl",
        ),
        (
            "default tokenizer",
            "tokenizer 'default': 512 codes, but the model in {pretrain} predicts 8192; pass the tokenizer it was "
            "trained with (--tokenizer)",
        ),
        ("vocab mismatch", "tokenizer '{dalle512}': 512 codes, but the model in {pretrain} predicts 8192"),
        (
            "no decoder",
            "tokenizer 'dalle:{enc}' has no decoder, and the figures decode the predicted tokens; pass "
            "dalle:ENCODER.pkl,DECODER.pkl",
        ),
        (
            "fine-tuned",
            "finetuned/classifier.pt: a fine-tuned classifier (backbone and cls_fc only) has no token head "
            "(mlm_head, paper appendix A.2)",
        ),
        ("missing file", "/no/such/classifier.pt: no such file, expected the authors' pre-training classifier.pt"),
        ("missing dalle", "/no/enc.pkl"),
        ("non-square", "nonsquare/classifier.pt: token map 4x5; the reconstruction takes square frames"),
        ("both", "argument --official: not allowed with argument --checkpoint"),
    ],
)
def test_bad_combinations_are_one_line(files, case, expected):
    f = files
    argv = {
        "no tokenizer": ["--official", f["pretrain"]],
        "default tokenizer": ["--official", f["pretrain"], "--tokenizer", "default"],
        "vocab mismatch": ["--official", f["pretrain"], "--tokenizer", f["dalle512"]],
        "no decoder": ["--official", f["pretrain"], "--tokenizer", f["encoder_only"]],
        "fine-tuned": ["--official", f["finetuned"], "--tokenizer", f["dalle"]],
        "missing file": ["--official", "/no/such/classifier.pt", "--tokenizer", f["dalle"]],
        "missing dalle": ["--official", f["pretrain"], "--tokenizer", "dalle:/no/enc.pkl,/no/dec.pkl"],
        "non-square": ["--official", f["nonsquare"], "--tokenizer", f["dalle"]],
        "both": ["--checkpoint", "runs/x", "--official", f["pretrain"]],
    }[case]
    code, err = _main(*argv)
    assert code == 2, err
    assert err.startswith("vimpac-demo: error: ") and "\n" not in err, err
    want = expected.format(pretrain=f["pretrain"], dalle512=f["dalle512"], enc=f["encoder_only"].split(":", 1)[1])
    assert want in err, err


def test_python_api_errors(files):
    with pytest.raises(VimpacError, match="not both"):
        load_reconstruction_model(checkpoint=FIX, official=files["pretrain"])
    with pytest.raises(VimpacError, match="no token head"):
        load_reconstruction_model(official=files["finetuned"], tokenizer=files["dalle"])


def test_cli_subprocess_fine_tuned_classifier(files):
    "The console script itself: one line on stderr, exit 2, no traceback, no server started."
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "vimpac.demo",
            "--official",
            str(files["finetuned"]),
            "--tokenizer",
            files["dalle"],
            "--port",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vimpac-demo: error: ") and "no token head" in lines[0], r.stderr


def test_explore_official(files, tmp_path):
    "`explore(official=..., tokenizer=...)` shows the authors' model; a fine-tuned file typed in the model box is"
    "refused in place."
    pytest.importorskip("ipywidgets")
    from vimpac.viz import explore

    ui = explore(  # delay=0: each change updates at once, in this thread (the test reads the status right after)
        official=files["pretrain"],
        tokenizer=files["dalle"],
        video="carphone_pristine.mp4",
        strategy="iid",
        ratio=0.4,
        delay=0,
    )
    assert ui.status.value.startswith("mask accuracy: model"), ui.status.value
    assert "pre-training classifier.pt, converted" in ui.model_line.value, ui.model_line.value  # it names the model
    assert ui.controls["checkpoint"].value == str(files["pretrain"])
    ui.controls["checkpoint"].value = str(files["finetuned"])
    assert ui.status.value.startswith("<b>error:</b>") and "no token head" in ui.status.value, ui.status.value
    ui.controls["checkpoint"].value = str(files["pretrain"].parent)  # the folder holding classifier.pt
    assert ui.status.value.startswith("mask accuracy: model"), ui.status.value
    with pytest.raises(VimpacError, match="pass their tokenizer"):
        explore(official=files["pretrain"])
    import matplotlib.pyplot as plt

    plt.close("all")
