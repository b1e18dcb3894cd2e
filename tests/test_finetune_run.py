"The fine-tuning run notebook end to end through papermill: tokenize a labelled dataset, fine-tune, evaluate 3x2 views."

import csv, json
from pathlib import Path
import papermill as pm
import pytest
from papermill.exceptions import PapermillExecutionError

ROOT = Path(__file__).resolve().parents[1]
NB = str(ROOT / "nbs/runs/finetune.ipynb")


def test_finetune_run_notebook(tmp_path):
    "The tiny defaults: six synthetic classes in the folder layout -> labelled stores -> fine-tune -> 3x2-view"
    "evaluation."
    out = tmp_path / "run"
    pm.execute_notebook(
        NB,
        str(tmp_path / "executed.ipynb"),
        parameters=dict(out=str(out), steps=3, batch_size=4, save_every=1),
        kernel_name="python3",
        progress_bar=False,
    )
    meta = {p: json.loads((out / "stores" / p / "meta.json").read_text()) for p in ("train", "test")}
    assert meta["train"]["views"] == meta["test"]["views"] and not any("flip" in v for v in meta["train"]["views"])
    ev = json.loads((out / "eval" / "metrics.json").read_text())
    assert ev["views"] == "3x2" and ev["method"] == "classifier" and ev["n"] == 6
    assert ev["classes"] == [
        *"approaching moving-left moving-right receding rotating-clockwise rotating-counterclockwise".split(),
    ]  # folder classes, sorted
    assert 0 <= ev["top1"] <= ev["top5"] <= 1 and sum(map(sum, ev["confusion"])) == 6
    rows = list(csv.DictReader((out / "eval" / "predictions.csv").open()))
    assert len(rows) == 6 and {r["label_name"] for r in rows} == set(ev["classes"])  # one test video per class
    for name in ("confusion.png", "retrieval.png"):
        assert (out / "eval" / name).stat().st_size > 5_000
    assert len((out / "model" / "metrics.jsonl").read_text().splitlines()) >= 2
    assert json.loads((out / "model" / "classes.json").read_text()) == ev["classes"]
    # the saved notebook keeps one line per logged step and the test accuracy, and ends with the summary table
    nb = json.loads((tmp_path / "executed.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    lines = [x for x in text.splitlines() if x.startswith("fine-tune ")]
    assert [x.split(":")[0] for x in lines] == [
        "fine-tune step 1/3",
        "fine-tune step 2/3",
        "fine-tune step 3/3",
        "fine-tune end",
    ]
    assert lines[-1].startswith("fine-tune end: test_acc ")
    summary = "".join(nb["cells"][-1]["outputs"][0]["data"]["text/markdown"])
    assert summary.startswith("| fine-tuning |") and f"| {ev['top1']:.3f} / {ev['top5']:.3f} |" in summary
    # cut off after step 2 of 3 (its last checkpoint and model gone), then the same command with resume: it goes on
    # from step 2, and the records cover the whole run
    (out / "model" / "model.safetensors").unlink()
    (out / "model" / "checkpoints" / "step-00000003.pt").unlink()
    pm.execute_notebook(
        NB,
        str(tmp_path / "again.ipynb"),
        parameters=dict(out=str(out), steps=3, batch_size=4, save_every=1, resume=True),
        kernel_name="python3",
        progress_bar=False,
    )
    nb = json.loads((tmp_path / "again.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert [x.split(":")[0] for x in text.splitlines() if x.startswith("fine-tune ")] == [
        "fine-tune step 3/3",
        "fine-tune end",
    ]
    records = [json.loads(line) for line in (out / "model" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [0, 1, 2]
    assert "fine-tuned 3 steps" in text and (out / "model" / "model.safetensors").is_file()


def test_finetune_run_starts_from_pretraining_and_refuses_bad_input(tmp_path):
    "`init` names a pre-training run; a missing one ends the run with the kit's one line, before fine-tuning."
    missing = tmp_path / "no-run"
    with pytest.raises(PapermillExecutionError) as e:
        pm.execute_notebook(
            NB,
            str(tmp_path / "executed.ipynb"),
            parameters=dict(out=str(tmp_path / "run"), init=str(missing)),
            kernel_name="python3",
            progress_bar=False,
        )
    assert e.value.ename == "VimpacError" and str(missing) in e.value.evalue and "\n" not in e.value.evalue
    assert not (tmp_path / "run" / "model" / "model.safetensors").exists()


@pytest.mark.slow
def test_finetune_run_table12_schedule(tmp_path, texture_video):
    """`-p schedule table12` with a dataset as it ships (UCF101's layout): the preset's values, printed with their
    sources, fill the parameters left at None (T 10, the 12 training views, batch 128 clamped to the store, 3x10 test
    views), and the parameters set replace them (frame size 32, 1 epoch)."""
    root, lists = tmp_path / "UCF-101", tmp_path / "ucfTrainTestlist"
    lists.mkdir()
    (lists / "classInd.txt").write_text("1 ApplyEyeMakeup\n2 YoYo\n")
    train = [f"{c}/v_{c}_g0{i}_c01.avi" for c in ("ApplyEyeMakeup", "YoYo") for i in (8, 9)]
    test = [f"{c}/v_{c}_g01_c01.avi" for c in ("ApplyEyeMakeup", "YoYo")]
    (lists / "trainlist01.txt").write_text("".join(f"{v} {1 + i // 2}\n" for i, v in enumerate(train)))
    (lists / "testlist01.txt").write_text("".join(f"{v}\n" for v in test))
    for i, v in enumerate(train + test):
        texture_video(root / v, i, seconds=2, size=40)
    out = tmp_path / "run"
    params = dict(dataset="ucf101", video_root=str(root), split_dir=str(lists), schedule="table12", out=str(out))
    nb = pm.execute_notebook(
        NB,
        str(tmp_path / "executed.ipynb"),
        parameters=dict(params, frame_size=32, epochs=1),
        kernel_name="python3",
        progress_bar=False,
    )
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "tokenize: dataset preset ucf101 (Table 12, §4.2)" in printed
    assert "  fps = 16.0 (the authors' 16 FPS tokens, sub-sampled to §4.2's 2 FPS in fine-tuning)" in printed
    assert "  frame_size = 32 (given; the preset's is 256, §4.2)" in printed
    assert "vimpac-finetune: dataset preset ucf101" in printed and "  clip_len = 10 (§4.2)" in printed
    assert "  epochs = 1.0 (given; the preset's is 50, Table 12, 3700 updates in the paper)" in printed
    cfg = json.loads((out / "model" / "finetune_config.json").read_text())
    assert (cfg["clip_len"], cfg["views"], cfg["epochs"], cfg["batch_size"]) == (10, "all", 1.0, 4)
    assert json.loads((out / "stores" / "train" / "meta.json").read_text())["fps"] == 16.0  # the authors' tokens
    assert cfg["clip_fps"] == cfg["fps"] == 2.0 and cfg["store_fps"] == 16.0  # clips at §4.2's rate, jittered
    assert json.loads((out / "eval" / "metrics.json").read_text())["views"] == "3x10"
    with pytest.raises(PapermillExecutionError) as e:  # no preset for a folder dataset
        pm.execute_notebook(
            NB,
            str(tmp_path / "bad.ipynb"),
            parameters=dict(schedule="table12"),
            kernel_name="python3",
            progress_bar=False,
        )
    assert (
        e.value.evalue
        == "parameter schedule: table12 needs a dataset of ssv2, diving48, ucf101, hmdb51, kinetics400, got None"
    )
