"""Evaluation (issue 12 §4, §5): multi-view averaging against a hand-computed case and against a loop over views,
batch-size invariance, prediction on video files against the store they were tokenized into, [CLS] features in
safetensors, probes, and the console scripts `vimpac-predict`, `vimpac-features`, `vimpac-evaluate` (in this process
through `main(argv)`, and one real subprocess), with their one-line refusals (exit 2)."""

import csv, json, os
from pathlib import Path
from vimpac.synthetic import write_video
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
import helpers
from helpers import run_in_process
from vimpac.cli import predict_main, features_main, evaluate_main, tokenize_main, finetune_main
from vimpac.evaluate import (
    SPATIAL_CROPS,
    Features,
    evaluate,
    extract_features,
    multiview_scores,
    predict,
    probe_scores,
    classification_metrics,
    view_clips,
    match_classes,
)
from vimpac.probes import knn_scores
from vimpac.utils import VimpacError
from vimpac.model import VimpacConfig, VimpacForPreTraining, VimpacForVideoClassification
from vimpac.store import TokenStore, build_store
from vimpac.tokenizer import load_tokenizer

CLASSES = ["red", "green", "blue"]
RGB = [(230, 20, 20), (20, 210, 40), (30, 40, 230)]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def square_video(path, colour, seed, seconds=2, fps=8, w=48, h=32):
    "A coloured 16 x 16 square moving over a random texture: MPEG-4 in MP4, written by the kit's `write_video`."
    rng = np.random.default_rng(seed)
    bg = rng.integers(60, 196, (h, w, 3), dtype=np.uint8)
    x0, y0 = rng.integers(0, w - 16), rng.integers(0, h - 16)
    frames = np.repeat(bg[None], seconds * fps, axis=0)
    for i, f in enumerate(frames):
        x = (x0 + 2 * i) % (w - 16)
        f[y0 : y0 + 16, x : x + 16] = colour
    return write_video(frames, path, fps=fps, codec="mpeg4")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Train (2 per class) and test (1 per class) videos, their labelled stores with the 3 spatial crops (S = 32,
    4 FPS: 8 frames of 4 x 4 tokens), a centre-only test store, and two saved checkpoints: a tiny 1-layer classifier
    with a random (non-zero) FC and a record of its tokenizer and classes, and a pre-training model."""
    d = tmp_path_factory.mktemp("eval")
    vids = {
        s: {
            square_video(d / f"{s}_{CLASSES[c]}{i}.mp4", RGB[c], 10 * c + i + 100 * (s == "test")): c
            for c in range(3)
            for i in range(n)
        }
        for s, n in (("train", 2), ("test", 1))
    }
    tok = load_tokenizer("default")
    for s in vids:
        build_store(
            list(vids[s]),
            tok,
            d / s,
            fps=4,
            frame_size=32,
            views=list(SPATIAL_CROPS[3]),
            labels=vids[s],
            classes=CLASSES,
            progress=False,
        )
    build_store(
        list(vids["test"]),
        tok,
        d / "centre",
        fps=4,
        frame_size=32,
        labels=vids["test"],
        classes=CLASSES,
        progress=False,
    )
    build_store(list(vids["test"])[:1], tok, d / "plain", fps=4, frame_size=32, progress=False)  # no labels
    torch.manual_seed(0)
    cfg = VimpacConfig.from_preset("tiny", vocab_size=tok.vocab_size, token_map=(4, 4), max_clip_len=4, num_layers=1)
    clf = VimpacForVideoClassification(cfg, num_classes=3)
    torch.nn.init.normal_(clf.fc.weight, std=2.0)  # a zero FC would tie every class
    clf.eval().save_pretrained(d / "ft")
    (d / "ft" / "finetune_config.json").write_text(json.dumps(dict(tokenizer=tok.identity, fps=4.0)))
    (d / "ft" / "classes.json").write_text(json.dumps(CLASSES))  # as vimpac.finetune writes them
    pre = VimpacForPreTraining(cfg).eval()
    pre.save_pretrained(d / "pre")
    (d / "pre" / "pretrain_config.json").write_text(json.dumps(dict(tokenizer=tok.identity)))
    return dict(dir=d, videos=vids, tok=tok, clf=clf, pre=pre, cfg=cfg)


# --- multi-view averaging ------------------------------------------------------------------------------------------


class FirstTokenModel(torch.nn.Module):
    "Logits (log 4, 0, 0) when the clip's first token is 1, (0, log 4, 0) when it is 2, else zeros."

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.config = type("C", (), dict(max_clip_len=2, pad_id=7))()
        self.calls = []

    def forward(self, tokens):
        self.calls.append(len(tokens))
        t = tokens[:, 0, 0, 0]
        return torch.stack([(t == 1).float(), (t == 2).float(), torch.zeros(len(t))], 1) * np.log(4.0) + self.w


def test_multiview_average_by_hand():
    """1 spatial x 3 temporal crops of 2 frames over 5 frames start at 0, 1 (floor(1.5), the authors' rule; rounding
    gave 2) and 3. The first token of frames 0..4 is [1, 2, 0, 0, 0]: the clips start with 1, 2, 0, softmax
    (4, 1, 1)/6, (1, 4, 1)/6, (1, 1, 1)/3, so the average is (7/18, 7/18, 4/18). A second video of 1 frame is padded:
    its 3 identical clips start with 2."""
    a = np.zeros((5, 1, 1), np.int16)
    a[[0, 1], 0, 0] = [1, 2]
    b = np.full((1, 1, 1), 2, np.int16)
    m = FirstTokenModel()
    s = multiview_scores(m, [{"1x-center": a}, {"1x-center": b}], "1x3", batch_size=4)
    torch.testing.assert_close(s, torch.tensor([[7 / 18, 7 / 18, 4 / 18], [1 / 6, 4 / 6, 1 / 6]]))
    assert m.calls == [4, 2]  # 6 clips of 2 videos in 2 forward passes, not 6


def test_multiview_equals_loop_over_views_any_batch(data):
    "3x3 views of a real store: the batched scores are the mean softmax of a per-view loop, for every batch size."
    clf, cfg, store = data["clf"], data["cfg"], TokenStore(data["dir"] / "test")
    ref = []
    for key in store.keys():
        rows = []
        for c in SPATIAL_CROPS[3]:
            clips = view_clips({c: store.tokens(key, c)}, cfg.max_clip_len, 3, cfg.pad_id)
            rows += [F.softmax(clf(clips[t : t + 1]).logits, -1) for t in range(3)]
        ref.append(torch.cat(rows).mean(0))
    ref = torch.stack(ref)
    for bs in (1, 4, 64):
        ev = evaluate(clf, store, "3x3", batch_size=bs, progress=False)
        torch.testing.assert_close(ev.scores, ref, atol=1e-5, rtol=1e-5)
    assert ev.labels == store.labels == [2, 1, 0] and ev.metrics.n == 3  # keys sorted: blue, green, red
    assert not torch.allclose(ref[0], ref[1])  # the check is not vacuous: videos differ


def test_predict_on_files_matches_the_store(data):
    "Decoding and tokenizing the files at predict time gives the scores of the store built from them."
    clf, tok, store = data["clf"], data["tok"], TokenStore(data["dir"] / "test")
    ev = evaluate(clf, store, "3x2", progress=False)
    preds = predict(list(data["videos"]["test"]), clf, tok, "3x2", fps=4, classes=CLASSES, top=2)
    by_key = dict(zip(store.keys(), ev.scores))
    for r in preds:
        torch.testing.assert_close(r["scores"], by_key[r["key"]], atol=1e-5, rtol=1e-5)
        assert [n for n, _ in r["top"]] == [CLASSES[int(i)] for i in by_key[r["key"]].topk(2).indices]


# --- probes -----------------------------------------------------------------------------------------------------------


def test_probes_on_separable_features():
    "Four classes on four orthogonal directions with noise: kNN and the linear probe get every test point right."
    g = torch.Generator().manual_seed(1)

    def blobs(n):
        y = torch.arange(n) % 4
        return torch.eye(16)[y] * 3 + 0.5 * torch.randn(n, 16, generator=g), y

    (xtr, ytr), (xte, yte) = blobs(80), blobs(40)
    for kind in ("knn", "linear"):
        s = probe_scores(kind, xtr, ytr, xte, 4)
        assert classification_metrics(s, yte).top1 == 1.0
        torch.testing.assert_close(s.sum(1), torch.ones(40))
    # kNN votes by hand: neighbours at cosine 1 (class 0), 0.6 (class 1) and 0 (class 0), k = 2, T = 0.1
    tr = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    s = knn_scores(tr, [0, 1, 0], torch.tensor([[1.0, 0.0]]), 2, k=2, temperature=0.1)
    w0, w1 = np.exp(10.0), np.exp(6.0)
    torch.testing.assert_close(s[0], torch.tensor([w0 / (w0 + w1), w1 / (w0 + w1)], dtype=torch.float32))


def test_probe_classes_matched_by_name():
    "Test labels are re-indexed into the training class list by name; a test class the training store lacks is refused."
    assert match_classes(["a", "b", "c"], ["c", "a"], [0, 1, 1]) == [2, 0, 0]
    with pytest.raises(VimpacError, match=r"test: classes \['d'\] are not in the training store"):
        match_classes(["a", "b", "c"], ["a", "d"], [0, 1], "test")


def test_features_store_equals_videos_and_round_trip(data, tmp_path):
    "The [CLS] features of the store and of the video files agree; safetensors keeps the keys, labels and classes."
    clf, tok = data["clf"], data["tok"]
    fs = extract_features(TokenStore(data["dir"] / "test"), clf, views="3x2", progress=False)
    fv = extract_features(list(data["videos"]["test"]), clf, tok, "3x2", fps=4, progress=False)
    torch.testing.assert_close(fs.features, fv.features[[fv.keys.index(k) for k in fs.keys]], atol=1e-4, rtol=1e-4)
    back = Features.load(fs.save(tmp_path / "f.safetensors"))
    assert (back.keys, back.labels, back.classes) == (fs.keys, [2, 1, 0], CLASSES)
    assert torch.equal(back.features, fs.features)


# --- console scripts --------------------------------------------------------------------------------------------------


def fine_tuned(d):
    "The options naming the fine-tuned checkpoint of `data` with its test and train stores."
    return ["--checkpoint", d / "ft", "--test", d / "test", "--train", d / "train"]


def test_evaluate_cli_writes_metrics_csv_and_figures(data, capsys):
    d = data["dir"]
    code, out, err = run_in_process(
        evaluate_main, [*fine_tuned(d), "--views", "3x2", "--out", d / "ev", "--retrieval", "2"], capsys
    )
    assert code == 0, err
    m = json.loads((d / "ev" / "metrics.json").read_text())
    rows = list(csv.DictReader(open(d / "ev" / "predictions.csv")))
    assert m["classes"] == CLASSES and m["views"] == "3x2" and len(rows) == 3
    assert m["top1"] == pytest.approx(np.mean([int(r["correct"]) for r in rows]))
    assert sum(map(sum, m["confusion"])) == 3
    assert f"top-1 {m['top1']:.4f}" in out and "mean per-class" in out
    for png in ("confusion.png", "retrieval.png"):
        assert (d / "ev" / png).stat().st_size > 5000


def test_evaluate_cli_probes(data, capsys):
    d = data["dir"]
    for probe in ("knn", "linear"):
        code, out, err = run_in_process(
            evaluate_main,
            [
                "--checkpoint",
                d / "pre",
                "--probe",
                probe,
                "--train",
                d / "train",
                "--test",
                d / "test",
                *"--views 1x2 --k 3".split(),
            ],
            capsys,
        )
        assert code == 0, err
        assert out.startswith(
            "kNN (k=3, T=0.07) (1x2 views): top-1" if probe == "knn" else "linear probe (1x2 views): top-1"
        )


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--checkpoint", "{ft5}", "the checkpoint's classifier has 5 classes, but"),
        (
            "--checkpoint",
            "{pre}",
            "a pre-training checkpoint has no classifier; fine-tune it (vimpac-finetune) or judge its features with "
            "--probe",
        ),
        ("--test", "{centre}", "(tokenize with --views noflip or all), or ask for 1xK views (centre crop)"),
        ("--probe", "knn", "argument --probe: knn needs --train STORE"),
        ("--views", "2x10", "argument --views: views '2x10': expected SPATIALxTEMPORAL"),
        ("--test", "{train}/../nope", "not a token store"),
        ("--test", "{plain}", "store has no labels; tokenize a dataset split with vimpac-tokenize --dataset NAME"),
        # issue 21: a --tokenizer given that cannot be read was ignored unless drawing retrieval.png, and then only
        # warned
        (
            "--tokenizer",
            "{train}/meta.json",
            "meta.json: not a saved VQ-VAE (expected config.json and model.safetensors)",
        ),
        ("--tokenizer", "{train}/../no-such-tokenizer", "no-such-tokenizer: no such tokenizer folder"),
    ],
)
def test_evaluate_cli_refuses_in_one_line(data, capsys, option, value, message):
    d = data["dir"]
    if value == "{ft5}" and not (d / "ft5").exists():  # a fine-tuned checkpoint with 5 classes, not the data's
        VimpacForVideoClassification(data["cfg"], num_classes=5).save_pretrained(d / "ft5")
    argv = {"--checkpoint": str(d / "ft"), "--test": str(d / "test")}
    argv[option] = value.format(ft5=d / "ft5", pre=d / "pre", centre=d / "centre", train=d / "train", plain=d / "plain")
    code, out, err = run_in_process(evaluate_main, [x for kv in argv.items() for x in kv], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vimpac-evaluate: error: ") and message in err, err


def test_predict_cli_prints_top_classes(data, capsys):
    d = data["dir"]
    vids = list(data["videos"]["test"])
    code, out, err = run_in_process(
        predict_main, [*vids, "--checkpoint", d / "ft", "--views", "3x2", "--csv", d / "p.csv"], capsys
    )
    assert code == 0, err
    model_line, *lines = out.splitlines()
    assert model_line == f"model: {d / 'ft'}: classifier of 3 classes; tokens of {data['tok'].identity['name']} " + (
        f"({data['tok'].identity['hash']}) at 4 FPS; training data not recorded"
    )  # the line names the model; this hand-made run records no store
    assert lines[0] == str(vids[0]) and len(lines) == 3 * 4  # 3 classes: top-3 under each path
    names = [l.split()[-1] for l in lines[1:4]]
    scores = [float(l.split()[1]) for l in lines[1:4]]
    assert (
        sorted(names) == sorted(CLASSES)
        and scores == sorted(scores, reverse=True)
        and sum(scores) == pytest.approx(1, abs=2e-4)
    )
    assert [r["pred_name"] for r in csv.DictReader(open(d / "p.csv"))][0] == names[0]


def test_predict_goes_on_past_videos_that_cannot_be_read(data, capsys, tmp_path):
    """Issue 35: `vimpac-predict good.mp4 bad.mp4 ...` aborted at the first bad file and predicted nothing. It now
    predicts the good ones (printed and in --csv), names every bad one, and exits 1."""
    d = data["dir"]
    good = list(data["videos"]["test"])[:2]
    bad = [tmp_path / "noise.mp4", tmp_path / "empty.mp4"]
    bad[0].write_bytes(bytes(range(256)) * 40)
    bad[1].write_bytes(b"")
    argv = [good[0], bad[0], good[1], bad[1], "--checkpoint", d / "ft", "--views", "1x1", "--csv", tmp_path / "p.csv"]
    code, out, err = run_in_process(predict_main, argv, capsys)
    assert code == 1, err
    assert [l for l in out.splitlines() if not l.startswith(("model:", "  "))] == [str(v) for v in good]
    lines = [l for l in err.splitlines() if l.startswith("vimpac-predict:")]  # (the progress bar aside)
    assert len(lines) == 3 and all(l.startswith("vimpac-predict: error: ") for l in lines), err
    assert str(bad[0]) in lines[0] and str(bad[1]) in lines[1]
    assert lines[2] == "vimpac-predict: error: 2 of 4 videos could not be read; the others are predicted"
    assert [r["path"] for r in csv.DictReader(open(tmp_path / "p.csv"))] == [str(v) for v in good]
    code, out, err = run_in_process(predict_main, [bad[0], "--checkpoint", d / "ft", "--views", "1x1"], capsys)
    assert code == 1 and err.strip().splitlines()[-1].endswith(
        "1 of 1 videos could not be read; the others are predicted"
    )


def test_predict_cli_refusals(data, capsys, tmp_path):
    d = data["dir"]
    v = list(data["videos"]["test"])[0]
    other = tmp_path / "other"  # a run trained on tokens of another tokenizer
    data["clf"].save_pretrained(other)
    (other / "finetune_config.json").write_text(
        json.dumps(dict(tokenizer=dict(name="vimpac-vqvae", hash="0123456789abcdef")))
    )
    for argv, message in [
        (
            [v, "--checkpoint", other],
            "trained on tokens of the tokenizer vimpac-vqvae (0123456789abcdef), not the default",
        ),
        ([v, "--checkpoint", d / "pre"], "a pre-training model has no classifier"),
        ([tmp_path / "missing.mp4", "--checkpoint", d / "ft"], "missing.mp4: no such file or directory"),
        ([v, "--checkpoint", tmp_path], "not a saved vimpac model"),
    ]:
        code, out, err = run_in_process(predict_main, argv, capsys)
        assert code == 2 and err.count("\n") == 1 and message in err, err


def test_features_cli_store_and_videos(data, capsys, tmp_path):
    d = data["dir"]
    code, out, err = run_in_process(
        features_main,
        [d / "test", "--checkpoint", d / "pre", "--out", tmp_path / "s.safetensors", "--views", "1x2"],
        capsys,
    )
    assert code == 0, err
    assert out.strip().endswith("3 videos x 128 features (1x2 views)")
    with safe_open(str(tmp_path / "s.safetensors"), "pt") as f:  # any safetensors reader gets features and keys
        assert f.get_tensor("features").shape == (3, 128)
        assert json.loads(f.metadata()["keys"]) == TokenStore(d / "test").keys()
    code, out, err = run_in_process(
        features_main,
        [
            *data["videos"]["test"],
            "--checkpoint",
            d / "pre",
            "--out",
            tmp_path / "v.safetensors",
            *"--views 1x2 --fps 4".split(),
        ],
        capsys,
    )
    assert code == 0, err
    a, b = Features.load(tmp_path / "s.safetensors"), Features.load(tmp_path / "v.safetensors")
    torch.testing.assert_close(a.features, b.features[[b.keys.index(k) for k in a.keys]], atol=1e-4, rtol=1e-4)
    code, out, err = run_in_process(
        features_main, [d / "test", d / "train", "--checkpoint", d / "pre", "--out", tmp_path / "x"], capsys
    )
    assert code == 2 and "a token store is given alone" in err


def test_predict_console_script(data, bin_dir):
    "The installed console script, as users run it."
    d = data["dir"]
    v = list(data["videos"]["test"])[2]
    r = helpers.run_command(
        bin_dir / "vimpac-predict", v, "--checkpoint", d / "ft", *"--views 1x2 --top 2".split(), env=ENV
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"model: {d / 'ft'}: classifier of 3 classes;")
    assert lines[1] == str(v) and len(lines) == 4 and lines[2].startswith("  1. ")
    r = helpers.run_command(bin_dir / "vimpac-evaluate", "--checkpoint", d / "pre", "--test", d / "test", env=ENV)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_evaluate_console_script_refuses_an_unreadable_tokenizer(data, bin_dir, tmp_path):
    "issue 21: `--tokenizer` naming a file that is no tokenizer was silently ignored; now one line, before evaluating."
    d, bad = data["dir"], tmp_path / "tok.pkl"
    bad.write_bytes(b"not a tokenizer")
    argv = [*fine_tuned(d), "--views", "1x2", "--tokenizer", bad, "--out", tmp_path / "ev"]
    r = helpers.run_command(bin_dir / "vimpac-evaluate", *argv, env=ENV)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == "", r.stderr
    assert (
        r.stderr == f"vimpac-evaluate: error: {bad}: not a saved VQ-VAE (expected config.json and model.safetensors)\n"
    )
    assert not (tmp_path / "ev" / "metrics.json").exists()


def test_end_to_end_tokenize_finetune_evaluate_predict(tmp_path, capsys):
    """The whole pipeline through the console scripts' mains: a folder dataset tokenized with labels
    (`vimpac-tokenize --dataset folder`), fine-tuned (`vimpac-finetune`, which records the tokenizer and the class
    names), evaluated with 3x2 views and used for prediction, with the class names read back from the run."""
    root = tmp_path / "videos"
    for split, n in (("train", 2), ("test", 1)):
        for c, name in enumerate(CLASSES):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                square_video(root / split / name / f"{name}{i}.mp4", RGB[c], 50 + 10 * c + i + 5 * (split == "test"))
    st, ft = tmp_path / "stores", tmp_path / "ft"
    code, out, err = run_in_process(
        tokenize_main,
        [root, "--dataset", "folder", "--out", st, *"--frame-size 32 --fps 4 --views noflip".split()],
        capsys,
    )
    assert code == 0, err
    code, out, err = run_in_process(
        finetune_main,
        ["--store", st / "train", "--out", ft, *"--steps 3 --batch-size 6 --clip-len 4 --lr 1e-3".split()],
        capsys,
    )
    assert code == 0, err
    code, out, err = run_in_process(
        evaluate_main, ["--checkpoint", ft, "--test", st / "test", "--views", "3x2", "--out", tmp_path / "ev"], capsys
    )
    assert code == 0, err
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert m["classes"] == sorted(CLASSES) and m["n"] == 3 and m["views"] == "3x2"
    rows = list(csv.DictReader(open(tmp_path / "ev" / "predictions.csv")))
    assert {r["label_name"] for r in rows} == set(CLASSES) and all(r["pred_name"] in CLASSES for r in rows)
    video = root / "test" / "red" / "red0.mp4"
    code, out, err = run_in_process(predict_main, [video, "--checkpoint", ft, *"--views 3x2 --fps 4".split()], capsys)
    assert code == 0 and "records no frame rate" not in err, err
    assert "every prediction is near chance" in err  # 3 steps of fine-tuning: near-uniform scores, and a warning
    model_line, *lines = out.splitlines()
    tok_hash = load_tokenizer("default").identity["hash"]
    want = f"model: {ft}: classifier of 3 classes; tokens of vimpac-vqvae ({tok_hash}) at 4 FPS; trained on "
    assert model_line == want + f"{st / 'train'} (6 videos)"  # a run of vimpac-finetune records its store
    assert lines[0] == str(video) and {l.split()[-1] for l in lines[1:]} == set(CLASSES)
    code, out, err = run_in_process(
        predict_main, [video, "--checkpoint", ft, "--views", "1x1"], capsys
    )  # at the run's 4 FPS
    assert code == 0 and "records no frame rate" not in err, err
    rec = json.loads((ft / "finetune_config.json").read_text())
    assert rec["fps"] == 4.0
    del rec["fps"]
    (ft / "finetune_config.json").write_text(json.dumps(rec))  # a run that records no FPS
    code, out, err = run_in_process(predict_main, [video, "--checkpoint", ft, "--views", "1x1"], capsys)
    assert code == 0 and "vimpac-predict: warning: " in err and "records no frame rate; sampled at 2 FPS" in err
    # the prediction equals the evaluation's scores for that video (same decoding, tokenizer and views)
    row = next(r for r in rows if r["label_name"] == "red")
    assert lines[1].split()[-1] == row["pred_name"] and float(lines[1].split()[1]) == pytest.approx(
        float(row["score"]), abs=1e-4
    )


def test_evaluate_empty_store_refused_in_one_line(data, bin_dir, tmp_path):
    """Issue 21: a labelled store that holds no video (its only video failed) is falsy; `vimpac-evaluate` and a probe on
    it said a TypeError traceback (exit 1). Now one line naming the store, exit 2, and the function raises the same."""
    d = data["dir"]
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    build_store(
        [bad],
        data["tok"],
        tmp_path / "empty",
        fps=4,
        frame_size=32,
        views=list(SPATIAL_CROPS[3]),
        labels={bad: 0},
        classes=CLASSES,
        progress=False,
    )
    empty = TokenStore(tmp_path / "empty")
    assert len(empty) == 0
    with pytest.raises(VimpacError, match="holds no video; expected a labelled store"):
        evaluate(data["clf"], empty, "1x1", progress=False)
    env = {
        **ENV,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")])),
    }
    for argv in (
        ["--checkpoint", d / "ft", "--test", tmp_path / "empty"],
        ["--checkpoint", d / "pre", "--test", tmp_path / "empty", "--train", d / "train", "--probe", "knn"],
        ["--checkpoint", d / "pre", "--test", d / "test", "--train", tmp_path / "empty", "--probe", "linear"],
    ):
        r = helpers.run_command(bin_dir / "vimpac-evaluate", *argv, env=env)
        assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
        assert (
            r.stderr == f"vimpac-evaluate: error: {tmp_path / 'empty'}: holds no video; expected a labelled store\n"
        ), r.stderr


def test_predict_warns_when_every_prediction_is_near_chance(data, tmp_path, capsys):
    "A classifier whose head is zero gives uniform scores: one warning line says so; a trained head gives none."
    d, vids = data["dir"], list(data["videos"]["test"])
    flat = VimpacForVideoClassification(data["cfg"], num_classes=3)
    torch.nn.init.zeros_(flat.fc.weight)
    torch.nn.init.zeros_(flat.fc.bias)
    flat.eval().save_pretrained(tmp_path / "flat")
    for f in ("finetune_config.json", "classes.json"):
        (tmp_path / "flat" / f).write_text((d / "ft" / f).read_text())
    code, out, err = run_in_process(predict_main, [*vids, "--checkpoint", tmp_path / "flat", "--views", "1x1"], capsys)
    assert code == 0, err
    warning = [l for l in err.splitlines() if "near chance" in l]
    assert warning == [
        f"vimpac-predict: warning: {tmp_path / 'flat'}: every prediction is near chance (the highest top-1 score is "
        "0.333; chance 1/3 = 0.333): the model may be under-trained, or these videos unlike its training data"
    ]
    code, out, err = run_in_process(predict_main, [*vids, "--checkpoint", d / "ft", "--views", "1x1"], capsys)
    assert code == 0 and "near chance" not in err, err
