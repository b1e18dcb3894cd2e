"""The Table 12 dataset presets (issue 23): for each downstream dataset, what `vimpac-tokenize --dataset`,
`vimpac-finetune --dataset` and `vimpac-evaluate --dataset` set, against the paper's numbers transcribed here
independently of `vimpac.data.DATASET_PRESETS`: Table 12 (`tab:appen_hyperparam`), §4.2 and appendix C / D."""

import numpy as np
import pytest
from vimpac.cli import finetune_config, finetune_parser, tokenize_parser
from vimpac.data import DATASET_FPS, DATASET_VIEWS
from vimpac.evaluate import evaluate_run
from vimpac.data import DATASET_PRESETS, LabelledClipDataset, dataset_preset, preset_lines
from vimpac.evaluate import parse_views
from vimpac.finetune import FinetuneConfig
from vimpac.utils import VimpacError

# Table 12: epochs, "Number of Updates", training flip, inference spatial crops; §4.2: the frame rate; appendix D
# (`tab:appen_dataset`): training videos; appendix C: the epochs multiplier of models without pre-training
PAPER = {
    "ssv2": dict(epochs=22, updates=29_000, flip=False, crops=1, fps=4, train=168_913, scratch=1.5),
    "diving48": dict(epochs=50, updates=5_800, flip=True, crops=3, fps=4, train=15_027, scratch=4),
    "ucf101": dict(epochs=50, updates=3_700, flip=True, crops=3, fps=2, train=9_537, scratch=4),
    "hmdb51": dict(epochs=50, updates=1_400, flip=True, crops=3, fps=4, train=3_570, scratch=4),
    "kinetics400": dict(epochs=30, updates=48_000, flip=True, crops=3, fps=2, train=205_418, scratch=1.5),
}
# the same for every dataset: Table 12 (batch, warm-up, weight decay, betas, 10 temporal crops) and §4.2 (T, S)
COMMON = dict(batch_size=128, warmup_ratio=0.1, weight_decay=0.01, betas=(0.9, 0.999), clip_len=10, frame_size=256)


def finetune_options(*argv) -> FinetuneConfig:
    "The FinetuneConfig `vimpac-finetune` builds from `argv` (store and run folder added), printing nothing."
    a = finetune_parser(raise_errors=True).parse_args(["--store", "s", "--out", "o", *argv])
    return finetune_config(a, show=False)


def test_the_presets_are_the_papers_datasets():
    assert set(DATASET_PRESETS) == set(PAPER)


@pytest.mark.parametrize("name", list(PAPER))
def test_preset_is_table_12(name):
    paper, p = PAPER[name], dataset_preset(name)
    assert (p.epochs, p.updates, p.flip, p.fps, p.train_videos) == (
        paper["epochs"],
        paper["updates"],
        paper["flip"],
        paper["fps"],
        paper["train"],
    )
    assert {k: getattr(p, k) for k in COMMON} == COMMON
    assert p.test_views == f"{paper['crops']}x10"  # 3 spatial x 10 temporal crops; SSV2 the centre crop only
    # the updates an epoch count gives over the paper's train videos are Table 12's, within its two-digit rounding
    assert p.steps() == pytest.approx(paper["updates"], rel=0.04)
    assert p.steps(scratch=True) == pytest.approx(paper["updates"] * paper["scratch"], rel=0.04)


@pytest.mark.parametrize("name", list(PAPER))
def test_finetune_and_tokenize_follow_the_preset(name):
    paper = PAPER[name]
    cfg = finetune_options("--dataset", name)
    views = "all" if paper["flip"] else "noflip"
    assert (cfg.epochs, cfg.batch_size, cfg.clip_len, cfg.warmup_ratio) == (paper["epochs"], 128, 10, 0.1)
    assert (cfg.weight_decay, tuple(cfg.betas), cfg.views, cfg.lr) == (0.01, (0.9, 0.999), views, None)
    assert cfg.clip_fps == paper["fps"]  # §4.2's rate, sampled from the 16 FPS tokens
    assert finetune_options("--dataset", name, "--scratch-epochs").epochs == paper["epochs"] * paper["scratch"]
    # vimpac-tokenize --dataset: the authors' 16 FPS tokens (issue 31), S = 256, the training views
    assert (DATASET_FPS[name], DATASET_VIEWS[name]) == (16.0, views)
    a = tokenize_parser(raise_errors=True).parse_args(["root", "--out", "o", "--dataset", name])
    assert a.frame_size is None  # the preset's, 256, when tokenize_dataset reads it
    assert {k: v for k, (v, _) in dataset_preset(name).tokenize_values().items()} == dict(
        fps=16.0, frame_size=256, views=views
    )


def test_options_given_replace_the_preset():
    cfg = finetune_options("--dataset", "ucf101", "--lr", "3e-5", "--batch-size", "16", "--views", "noflip")
    assert (cfg.lr, cfg.batch_size, cfg.views, cfg.epochs) == (3e-5, 16, "noflip", 50)
    cfg = finetune_options("--dataset", "ucf101", "--steps", "7")  # steps replace the preset's epochs
    assert (cfg.steps, cfg.epochs) == (7, None)
    cfg = finetune_options("--dataset", "hmdb51", "--epochs", "2", "--scratch-epochs")
    assert cfg.epochs == 2  # an epoch count given is taken as it is
    # without --dataset the config's own defaults, as before
    assert finetune_options() == FinetuneConfig()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scratch-epochs"], "--scratch-epochs: goes with --dataset"),
        (
            ["--dataset", "ucf101", "--scratch-epochs", "--init", "run"],
            "--scratch-epochs: only for a model from scratch",
        ),
    ],
)
def test_scratch_epochs_refusals(argv, message):
    with pytest.raises(VimpacError, match=message):
        finetune_options(*argv)


def test_unknown_preset_refused():
    with pytest.raises(VimpacError, match="'ucf' has no Table 12 preset; expected one of ssv2, diving48"):
        dataset_preset("ucf")
    with pytest.raises(VimpacError, match="argument --dataset: invalid choice: 'folder'"):
        finetune_options("--dataset", "folder")


def test_preset_lines_name_each_source_and_what_was_given(capsys):
    a = finetune_parser(raise_errors=True).parse_args("--store s --out o --dataset ssv2 --lr 1e-5".split())
    finetune_config(a)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "vimpac-finetune: dataset preset ssv2 (Table 12, §4.2); an option given replaces its value"
    assert "  epochs = 22 (Table 12, 29000 updates in the paper)" in out
    assert (
        "  lr = 1e-05 (given; the preset's is the model's, Table 12: 1e-4 for Small and Base, 5e-5 for Large-half)"
        in out
    )
    assert "  views = noflip (Table 12: 2 sizes x 3 crops, no flip for SSV2)" in out
    assert len(out) == 1 + len(dataset_preset("ssv2").finetune_values())  # each value once
    lines = preset_lines("p", "ucf101", dataset_preset("ucf101").finetune_values(scratch=True), {})
    assert "  epochs = 200 (Table 12's 50 x 4 without pre-training, appendix C)" in lines


def test_evaluate_takes_the_presets_views(monkeypatch):
    "`evaluate_run(dataset=)`: SSV2 on the centre crop x 10 temporal crops, the others 3 x 10; views given win."
    seen = []

    def fake_evaluate(model, store, views, **kw):
        seen.append(views)
        raise VimpacError("stop")  # the views are what is checked; nothing is evaluated

    import vimpac.evaluate as evaluate

    monkeypatch.setattr(evaluate, "evaluate", fake_evaluate)
    monkeypatch.setattr(evaluate, "load_run", lambda checkpoint, dev: (None, None))
    monkeypatch.setattr(evaluate, "TokenStore", lambda path: path)
    for dataset, views in [("ssv2", None), ("ucf101", None), ("ssv2", "3x2"), (None, None)]:
        with pytest.raises(VimpacError, match="stop"):
            evaluate_run("ck", "test", dataset=dataset, views=views, device="cpu", progress=False)
    assert seen == ["1x10", "3x10", "3x2", "3x10"]


class SixteenFpsStore:
    "A labelled store (no disk) of one 10 s video tokenized at 16 FPS whose tokens are their frame's index."

    path, fps, vocab_size, classes, labels, lengths, views = "store16", 16.0, 1000, ["a"], [0], [160], ["1x-center"]

    def __len__(self):
        return 1

    def keys(self):
        return ["v"]

    def clip(self, key, start, length, view):
        frames = np.arange(start, min(start + length, self.lengths[0]), dtype=np.int16)
        return np.broadcast_to(frames[:, None, None], (len(frames), 2, 2))


@pytest.mark.parametrize("name", list(PAPER))
def test_preset_clips_have_the_authors_temporal_jitter(name):
    """Issue 31: a preset's default clip sampling is the authors' (§4.2's rate from 16 FPS tokens, `clip_fps`): the
    store `vimpac-tokenize --dataset` writes is at 16 FPS, and the clips `vimpac-finetune --dataset` draws from it
    keep every s-th frame (s = 16 / fps: 8 at 2 FPS, 4 at 4 FPS) from starts at every phase of s, over the authors'
    range 0 .. L + s - 1 - T s."""
    cfg, s = finetune_options("--dataset", name), int(16 // PAPER[name]["fps"])
    store = SixteenFpsStore()
    assert store.fps == DATASET_FPS[name]
    data = LabelledClipDataset(store, cfg.clip_len, views=store.views, clip_fps=cfg.clip_fps)
    clips = [data[(epoch, 0)][0][:, 0, 0] for epoch in range(300)]
    assert all(len(c) == cfg.clip_len and (c[1:] - c[:-1] == s).all() for c in clips)  # every s-th frame
    starts = {int(c[0]) for c in clips}
    assert {st % s for st in starts} == set(range(s))  # the jitter: starts off the 2 or 4 FPS grid
    assert min(starts) >= 0 and max(starts) <= 160 + s - 1 - cfg.clip_len * s and len(starts) > 3 * s


def test_ssv2_is_judged_on_the_centre_crop():
    "Table 12: SSV2's inference views are the centre crop x 10 temporal crops; the others 3 spatial x 10."
    assert {n: parse_views(p.test_views) for n, p in DATASET_PRESETS.items()} == {
        n: ((("1x-center",), 10) if n == "ssv2" else (("1x-topleft", "1x-center", "1x-bottomright"), 10)) for n in PAPER
    }
