"The papermill run notebooks execute with injected parameters and write their outputs."
import json
from pathlib import Path
import papermill as pm

ROOT = Path(__file__).resolve().parents[1]


def test_pretrain_run_notebook(tmp_path):
    out = tmp_path / "run"
    pm.execute_notebook(str(ROOT / "nbs/runs/pretrain.ipynb"), str(tmp_path / "executed.ipynb"),
                        parameters=dict(out=str(out), size=64, steps=12, batch_size=3),
                        kernel_name="python3", progress_bar=False)
    ev = json.loads((out / "eval.json").read_text())
    assert ev["masked_tokens"] > 0 and 0 <= ev["mask_acc"] <= 1
    assert len((out / "model" / "metrics.jsonl").read_text().splitlines()) == 3
    assert (out / "training_curves.png").stat().st_size > 10_000
    # the injected parameters cell follows the tagged defaults
    nb = json.loads((tmp_path / "executed.ipynb").read_text())
    tags = [c["metadata"].get("tags", []) for c in nb["cells"]]
    assert ["parameters"] in tags and ["injected-parameters"] in tags
