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
        parameters=dict(out=str(out), steps=3, batch_size=4),
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
