"""The classifier shipped to try (`vimpac/weights/classifier/`, issue 32): `vimpac-predict VIDEO` and
`vimpac-evaluate` use it without `--checkpoint`, print its class names, and name the camera motion of held-out clips
(pans and zooms over a photograph it never saw); an install without it says so in one line."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib import cbook
from helpers import run_in_process

import vimpac.runs as runs
from vimpac.cli import predict_main
from vimpac.synthetic import pan_zoom, write_video

SHIPPED = runs.CLASSIFIER_CHECKPOINT
pytestmark = pytest.mark.skipif(not (SHIPPED / "config.json").is_file(), reason="this install ships no classifier")


def test_the_card_and_the_classes():
    classes = json.loads((SHIPPED / "classes.json").read_text())
    assert classes == ["still", "pan left", "pan right", "pan up", "pan down", "zoom in", "zoom out"]
    card = (SHIPPED / "README.md").read_text()
    assert "camera motion" in card and "held out" in card and "chance" in card


@pytest.mark.parametrize(
    "name, start, end",
    [
        ("still", (0.45, 0.5, 1.5), (0.45, 0.5, 1.5)),  # the classes its card says it knows
        ("zoom out", (0.5, 0.45, 1.7), (0.5, 0.45, 1.0)),
    ],
)
def test_predict_without_a_checkpoint_names_the_camera_motion(tmp_path, capsys, name, start, end):
    "A clip over Grace Hopper's photograph (held out of every shipped model): top-1 is its motion, by name."
    img = np.asarray(plt.imread(cbook.get_sample_data("grace_hopper.jpg")))[..., :3]
    video = write_video(pan_zoom(img, 6, 128, start, end), tmp_path / "clip.mp4", fps=2)
    code, out, err = run_in_process(predict_main, [video, "--views", "1x1", "--device", "cpu", "--top", "2"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"model: {SHIPPED}: classifier of 7 classes"), lines[0]
    assert lines[2].endswith(f"  {name}"), out  # "  1. 0.9123  pan right"


def test_no_shipped_classifier_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "CLASSIFIER_CHECKPOINT", tmp_path / "none")
    code, out, err = run_in_process(predict_main, [tmp_path / "x.mp4"], capsys)
    assert code == 2 and err.strip() == (
        f"vimpac-predict: error: no classifier is shipped at {tmp_path / 'none'}; pass --checkpoint RUN "
        "(a vimpac-finetune run)"
    ), err


@pytest.mark.parametrize("where", ["folder", "missing folder"])
def test_a_csv_that_cannot_be_written_is_refused_before_inference(tmp_path, capsys, monkeypatch, where):
    """Issue 35: `vimpac-predict --csv DIR` failed after the whole inference. A folder, or a file in a folder that does
    not exist, is refused first, in one line: no video is decoded (the model is never loaded)."""
    csv = tmp_path if where == "folder" else tmp_path / "no" / "p.csv"
    monkeypatch.setattr(runs, "load_run", lambda *a, **k: pytest.fail("the model was loaded"))
    code, out, err = run_in_process(predict_main, [tmp_path / "x.mp4", "--csv", csv], capsys)
    what = "is a folder" if where == "folder" else "is in a folder that does not exist"
    assert (
        code == 2
        and err.strip() == f"vimpac-predict: error: argument --csv: {csv} {what}; expected a CSV file to write"
    )
