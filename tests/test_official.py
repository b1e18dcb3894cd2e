"""Loading the authors' checkpoints (airsplay/vimpac `classifier.pt` with its `args.pickle`) as what they are, or a
one-line refusal: the layout from args.pickle or `layout=`, an ambiguous structure refused, hostile or broken
args.pickle / classifier.pt files refused with nothing run, and the positional embeddings the kit cannot represent.
The fixtures in tests/fixtures/official/layouts were made by the authors' own code (see its README.md)."""

import argparse
import gzip
import json
import os
import pickle
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vimpac.official import load_official_classifier, load_official_pretraining, read_official_args
from vimpac.utils import VimpacError
from helpers import RunsCode

FX = Path(__file__).parent / "fixtures" / "official"
LX = FX / "layouts"
META = json.loads((LX / "layouts.json").read_text())["meta"]
EXP = load_file(str(LX / "layouts_expected.safetensors"))
HEADS = json.loads((LX / "layouts.json").read_text())["heads"]


def unpack(tmp_path, slug, args=True, name=None):
    "A run folder as the authors' code leaves it: classifier.pt and (when `args`) args.pickle."
    d = tmp_path / (name or slug)
    d.mkdir()
    (d / "classifier.pt").write_bytes(gzip.decompress((LX / slug / "classifier.pt.gz").read_bytes()))
    if args:
        shutil.copy(LX / slug / "args.pickle", d / "args.pickle")
    return d


def their_args(slug):
    with open(LX / slug / "args.pickle", "rb") as f:
        return pickle.load(f)  # our own fixture, made by their code


def refused(fn, *parts):
    "`fn()` raises a one-line VimpacError containing every one of `parts`; returns the message."
    with pytest.raises(VimpacError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg, msg
    for p in parts:
        assert p in msg, (p, msg)
    return msg


def max_gap(model, slug):
    with torch.no_grad():
        return (model.eval().backbone(EXP["tokens"])[0] - EXP[f"{slug}.hiddens"]).abs().max().item()


@pytest.mark.parametrize("slug", list(META))
def test_args_pickle_gives_the_layout(tmp_path, slug):
    d = unpack(tmp_path, slug)
    clf = load_official_classifier(d / "classifier.pt", num_heads=HEADS)
    assert clf.config.layout == META[slug]["layout"] == their_args(slug).model[len("efflayout") :]
    assert max_gap(clf, slug) < 1e-5
    with torch.no_grad():
        assert (clf(EXP["tokens"]).logits - EXP[f"{slug}.logits"]).abs().max() < 1e-5


@pytest.mark.parametrize("slug,other", [("T", "TxHxW"), ("T_H", "T,HxW")])
def test_ambiguous_structure(tmp_path, slug, other):
    d = unpack(tmp_path, slug, args=False)
    layout = META[slug]["layout"]
    msg = refused(
        lambda: load_official_classifier(d, num_heads=HEADS),
        f"fit the layouts {layout!r} and {other!r}",
        f"layout={layout!r}",
        "args.pickle",
    )
    assert str(d) in msg
    right = load_official_classifier(d, num_heads=HEADS, layout=layout)
    assert right.config.layout == layout and max_gap(right, slug) < 1e-5
    wrong = load_official_classifier(d, num_heads=HEADS, layout=other)
    assert wrong.config.layout == other and max_gap(wrong, slug) > 0.1  # a different model: the test can fail


@pytest.mark.parametrize("slug", ["T-H-W", "H-W_T", "T_H_W"])
def test_unambiguous_structure_without_args(tmp_path, slug):
    clf = load_official_classifier(unpack(tmp_path, slug, args=False), num_heads=HEADS)
    assert clf.config.layout == META[slug]["layout"] and max_gap(clf, slug) < 1e-5


def test_layout_argument_wins_and_is_checked(tmp_path):
    d = unpack(tmp_path, "T")
    with pytest.warns(UserWarning, match="args.pickle says 'T'"):
        joint = load_official_classifier(d, num_heads=HEADS, layout="TxHxW")
    assert joint.config.layout == "TxHxW"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_official_classifier(d, num_heads=HEADS, layout="T").config.layout == "T"
    refused(
        lambda: load_official_classifier(d, num_heads=HEADS, layout="T,H|W"),
        "layout='T,H|W' means attention blocks of [1, 2] head groups",
        "have [1]",
    )
    refused(lambda: load_official_classifier(d, num_heads=HEADS, layout="T|H"), "layout: expected one of")
    # T|H|W splits heads in three: 4 heads cannot
    refused(lambda: load_official_classifier(unpack(tmp_path, "T-H-W"), num_heads=4), "3 equal groups, got 4 heads")


def test_args_pickle_of_another_run(tmp_path):
    d = unpack(tmp_path, "T_H", args=False)
    shutil.copy(LX / "T" / "args.pickle", d / "args.pickle")
    refused(
        lambda: load_official_classifier(d, num_heads=HEADS),
        "args.pickle (model='efflayoutT') means attention blocks of [1] head groups",
        "have [1, 1]",
    )
    args = their_args("T_H")
    for field, value, says in [
        ("hid_dim", 512, "hid_dim=512"),
        ("layers", 6, "layers=6"),
        ("model", "bert", "model='bert'"),
        ("model", "efflayoutT|H", "model='efflayoutT|H'"),
    ]:
        bad = argparse.Namespace(**{**vars(args), field: value})
        with open(d / "args.pickle", "wb") as f:
            pickle.dump(bad, f)
        refused(lambda: load_official_classifier(d, num_heads=HEADS), str(d / "classifier.pt"), says)
        # an explicit layout= wins over a stale args.pickle (only a differing layout is worth a warning)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            clf = load_official_classifier(d, num_heads=HEADS, layout="T,H")
        assert [str(w.message).split("says ")[-1] for w in seen] == (
            [] if field != "model" else [repr(value[9:] if value.startswith("efflayout") else value)]
        )
        assert clf.config.layout == "T,H" and max_gap(clf, "T_H") < 1e-5


def test_hostile_args_pickle_runs_nothing(tmp_path):
    d = unpack(tmp_path, "T")
    marker = tmp_path / "pwned"
    # an argparse.Namespace like theirs, with one value that would run a command when unpickled
    evil = argparse.Namespace(**{**vars(their_args("T")), "model": RunsCode(marker)})
    with open(d / "args.pickle", "wb") as f:
        pickle.dump(evil, f)
    refused(
        lambda: load_official_classifier(d, num_heads=HEADS, layout="T"),
        "args.pickle: refused to load",
        f"{os.system.__module__}.system",
        "nothing in the file was run",
    )
    refused(lambda: read_official_args(d / "args.pickle"), "refused")
    assert not marker.exists()
    with open(d / "args.pickle", "wb") as f:
        pickle.dump({"model": eval}, f)
    refused(lambda: read_official_args(d / "args.pickle"), "builtins.eval")


@pytest.mark.parametrize(
    "content,says",
    [
        (b"", "empty file (0 bytes)"),
        (b"garbage\x00\x01", "not a readable pickle"),
        (pickle.dumps({"model": "efflayoutT"}), "holds a dict"),
        (pickle.dumps(argparse.Namespace(model="efflayoutT"))[:-5], "not a readable pickle"),
    ],
)
def test_broken_args_pickle(tmp_path, content, says):
    d = unpack(tmp_path, "T")
    (d / "args.pickle").write_bytes(content)
    refused(lambda: load_official_classifier(d, num_heads=HEADS), str(d / "args.pickle"), says)


def test_namespace_args_read(tmp_path):
    args = read_official_args(LX / "T_H" / "args.pickle")
    assert isinstance(args, argparse.Namespace) and args.model == "efflayoutT,H" and args.pos_emb == "hw_separation"


def test_broken_classifier_pt(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "classifier.pt").write_bytes(b"")
    refused(lambda: load_official_classifier(d), "classifier.pt: empty file (0 bytes)")
    refused(lambda: load_official_pretraining(d / "classifier.pt"), "empty file (0 bytes)")
    marker = tmp_path / "pwned"
    torch.save({"backbone.embedding.weight": torch.zeros(2, 2), "x": RunsCode(marker)}, d / "classifier.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torch warning is printed either
        refused(lambda: load_official_classifier(d), "refused to load", "system")
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["default", "temporal_separation"])
def test_other_positional_embeddings(tmp_path, kind):
    """Their PositionalEmbedding (positional_embedding.py) keeps, for `default`, one `positional_embedding` table of
    1 + T*h*w rows, and for `temporal_separation` `cls_pos_embedding`, `temporal_pos_embedding` and
    `spatial_pos_embedding` (h*w rows) instead of the height and width tables."""
    d = unpack(tmp_path, "T_H_W")
    sd = torch.load(d / "classifier.pt", weights_only=True)
    pe = "backbone.positional_embedding."
    T, h, w, D = 3, 4, 4, 24
    for k in ("cls_pos_embedding", "temporal_pos_embedding", "height_pos_embedding", "width_pos_embedding"):
        sd.pop(pe + k)
    if kind == "default":
        sd[pe + "positional_embedding"] = torch.randn(1 + T * h * w, D)
    else:
        sd.update(
            {
                pe + "cls_pos_embedding": torch.randn(1, D),
                pe + "temporal_pos_embedding": torch.randn(T, D),
                pe + "spatial_pos_embedding": torch.randn(h * w, D),
            }
        )
    torch.save(sd, d / "classifier.pt")
    key = "positional_embedding" if kind == "default" else "spatial_pos_embedding"
    refused(
        lambda: load_official_classifier(d, num_heads=HEADS),
        f"uses the authors' {kind!r} positional embedding ({pe}{key}",
        "only 'hw_separation'",
    )
