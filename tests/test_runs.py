"The papermill run notebooks execute with injected parameters and write their outputs."

import json, re
from pathlib import Path
import papermill as pm
import pytest
from papermill.exceptions import PapermillExecutionError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_pretrain_run_notebook(tmp_path):
    out = tmp_path / "run"
    pm.execute_notebook(
        str(ROOT / "nbs/runs/pretrain.ipynb"),
        str(tmp_path / "executed.ipynb"),
        parameters=dict(out=str(out), frame_size=64, steps=12, batch_size=3),
        kernel_name="python3",
        progress_bar=False,
    )
    ev = json.loads((out / "eval.json").read_text())
    assert ev["masked_tokens"] > 0 and 0 <= ev["mask_acc"] <= 1
    assert len((out / "model" / "metrics.jsonl").read_text().splitlines()) == 12  # log_every 1, the run's default
    assert list((out / "model" / "checkpoints").glob("step-*.pt"))
    assert (out / "training_curves.png").stat().st_size > 10_000
    # the injected parameters cell follows the tagged defaults
    nb = json.loads((tmp_path / "executed.ipynb").read_text())
    tags = [c["metadata"].get("tags", []) for c in nb["cells"]]
    assert ["parameters"] in tags and ["injected-parameters"] in tags
    # the saved notebook keeps a line per logged step (not a progress bar's first state) and ends with the summary
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    steps = [line for line in text.splitlines() if line.startswith("pre-train step ")]
    assert len(steps) == 12 and steps[-1].startswith("pre-train step 12/12: loss ")
    assert not re.search(r"(?<!\d)0/12", text)  # no progress bar saved at 0/12
    summary = "".join(nb["cells"][-1]["outputs"][0]["data"]["text/markdown"])
    assert summary.startswith("| pre-training |") and f"mask accuracy | {ev['mask_acc']:.3f}" in summary
    import torch  # where it ran, as the console tool says it

    version = re.escape(torch.__version__)
    ran = (
        rf"\| ran \| pre-train: 12 steps in \d+:\d\d on cpu \(.*\), \d+ CPU threads?, torch {version}: [\d.]+ videos/s"
    )
    assert re.search(ran, summary), summary
    # `resume` where a run was killed while writing its first checkpoint (only the write's temporary file): it starts
    # over, not --resume with no checkpoint
    again = tmp_path / "again"
    (again / "model" / "checkpoints").mkdir(parents=True)
    (again / "model" / "checkpoints" / ".step-00000004.pt.k1ll3d00.tmp").write_bytes(b"half a checkpoint")
    pm.execute_notebook(
        str(ROOT / "nbs/runs/pretrain.ipynb"),
        str(tmp_path / "again.ipynb"),
        parameters=dict(out=str(again), store=str(out / "store"), steps=4, batch_size=3, resume=True),
        kernel_name="python3",
        progress_bar=False,
    )
    assert len((again / "model" / "metrics.jsonl").read_text().splitlines()) == 4
    assert not list((again / "model" / "checkpoints").glob(".step-*"))


@pytest.mark.slow
def test_pretrain_run_notebook_stages(tmp_path):
    "§4.2's progressive resolution as two stages: the second starts from the first, its positional tables interpolated."
    from vimpac.video import sample_videos
    from vimpac.tokenizer import load_tokenizer
    from vimpac.store import build_store
    from vimpac.model import VimpacForPreTraining

    tok = load_tokenizer("default")
    for s in (32, 64):
        build_store(sample_videos(), tok, tmp_path / f"store{s}", fps=2, frame_size=s, progress=False)
    out = tmp_path / "run"
    stages = [dict(store=str(tmp_path / "store32"), steps=4), dict(store=str(tmp_path / "store64"), steps=3)]
    pm.execute_notebook(
        str(ROOT / "nbs/runs/pretrain.ipynb"),
        str(tmp_path / "executed.ipynb"),
        parameters=dict(out=str(out), stages=stages, batch_size=3),
        kernel_name="python3",
        progress_bar=False,
    )
    first, second = (VimpacForPreTraining.from_pretrained(out / f"stage{i}") for i in (0, 1))
    assert first.config.token_map == (4, 4) and second.config.token_map == (8, 8)
    assert (out / "eval.json").is_file()


def test_pretrain_run_notebook_launches_torchrun(tmp_path):
    "With gpus > 1 the notebook launches torchrun itself (here 2 CPU processes with gloo)."
    out = tmp_path / "run"
    pm.execute_notebook(
        str(ROOT / "nbs/runs/pretrain.ipynb"),
        str(tmp_path / "executed.ipynb"),
        parameters=dict(out=str(out), frame_size=32, steps=3, batch_size=2, gpus=2, precision="fp32"),
        kernel_name="python3",
        progress_bar=False,
    )
    nb = json.loads((tmp_path / "executed.ipynb").read_text())
    printed = "".join(
        o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"])
        for c in nb["cells"]
        for o in c.get("outputs", [])
    )
    assert "--nproc-per-node=2" in printed
    assert [json.loads(l)["step"] for l in (out / "model" / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]


PRETRAIN_PARAMETERS = {  # name: (type, default), as papermill's own inspector reads the tagged cell
    "store": ("Optional[str]", "None"),
    "videos": ("Optional[list]", "None"),
    "frame_size": ("int", "64"),
    "fps": ("float", "2.0"),
    "tokenizer": ("str", '"default"'),
    "out": ("Optional[str]", "None"),
    "preset": ("str", '"tiny"'),
    "gpus": ("int", "0"),
    "resume": ("bool", "False"),
    "stages": ("Optional[list]", "None"),
    # generated from the configs' fields (tools/sync_parameters.py): the model's, then the loop's
    "layout": ("Optional[str]", "None"),
    "norm": ("Optional[str]", "None"),
    "dropout": ("Optional[float]", "None"),
    "steps": ("int", "6"),
    "batch_size": ("int", "3"),
    "micro_batch_size": ("Optional[int]", "None"),
    "lr": ("float", "0.001"),
    "log_every": ("int", "1"),
    "save_every": ("int", "1000"),
    "precision": ("str", '"auto"'),
    "compile": ("bool", "False"),
    "seed": ("int", "0"),
    "mask_ratio": ("float", "0.15"),
    "num_blocks": ("Optional[int]", "None"),
    "d_max": ("Optional[float]", "None"),
    "betas": ("list", "[0.9, 0.98]"),
}
TOKENIZER_PARAMETERS = {
    "videos": ("Optional[list]", "None"),
    "heldout_fraction": ("float", "0.2"),
    "video_repeat": ("int", "1"),
    "scenes": ("int", "2"),
    "heldout_scenes": ("int", "1"),
    "test_patterns": ("int", "1"),
    "images": ("Optional[list]", "None"),
    "heldout_images": ("list", '["grace_hopper.jpg", "cheetah2.jpg"]'),
    "image_clips": ("int", "1"),
    "clip_frames": ("int", "4"),
    "out": ("Optional[str]", "None"),
    "figure": ("Optional[str]", "None"),
    "compare": ("Optional[str]", "None"),
    "init": ("Optional[str]", "None"),
    "fps": ("float", "8.0"),
    "frame_size": ("int", "128"),
    "steps": ("int", "20"),
    "batch_size": ("int", "32"),
    "crop": ("int", "64"),
    "scale_min": ("float", "0.6"),
    "scale_max": ("float", "1.4"),
    "lr": ("float", "2e-3"),
    "vocab_size": ("int", "512"),
    "channels": ("list", "[32, 64, 128]"),
    "seed": ("int", "0"),
}


@pytest.mark.parametrize(
    "name,expected", [("pretrain", PRETRAIN_PARAMETERS), ("train_tokenizer", TOKENIZER_PARAMETERS)]
)
def test_papermill_reads_every_parameter(name, expected):
    "`papermill --help-notebook` lists every parameter with its type, default and help (a comment with `=` hides one)."
    params = pm.inspect_notebook(str(ROOT / f"nbs/runs/{name}.ipynb"))
    got = {k: (p["inferred_type_name"], p["default"]) for k, p in params.items()}
    assert {k: got.get(k) for k in expected} == expected
    assert all(p["help"] for p in params.values())
    if name == "pretrain":  # the others are one a knob of the configs, as tools/sync_parameters.py writes them
        from vimpac.model import VimpacConfig
        from vimpac.pretrain import PretrainConfig
        from vimpac.options import config_fields

        knobs = {f.name for f in config_fields(VimpacConfig) + config_fields(PretrainConfig)}
        own = {"store", "videos", "frame_size", "fps", "tokenizer", "out", "preset", "gpus", "resume", "stages"}
        assert set(got) == own | knobs
    else:
        assert set(got) == set(expected)


def test_kit_error_is_the_error_papermill_reports(tmp_path):
    "A bad store inside the run: papermill raises with the kit's one line, not SystemExit."
    missing = tmp_path / "no-store"
    with pytest.raises(PapermillExecutionError) as e:
        pm.execute_notebook(
            str(ROOT / "nbs/runs/pretrain.ipynb"),
            str(tmp_path / "executed.ipynb"),
            parameters=dict(out=str(tmp_path / "run"), store=str(missing)),
            kernel_name="python3",
            progress_bar=False,
        )
    assert e.value.ename == "VimpacError"
    assert e.value.evalue == f"{missing}: not a token store (expected meta.json and shard-*.lmdb)"
    with pytest.raises(PapermillExecutionError) as e:
        pm.execute_notebook(
            str(ROOT / "nbs/runs/pretrain.ipynb"),
            str(tmp_path / "executed2.ipynb"),
            parameters=dict(out=str(tmp_path / "run2"), store=str(missing), lr=float("nan")),
            kernel_name="python3",
            progress_bar=False,
        )
    assert (e.value.ename, e.value.evalue) == ("VimpacError", "argument --lr: expected a finite number > 0, got 'nan'")
    assert not (tmp_path / "run2" / "model").exists()


@pytest.mark.parametrize(
    "nb,name,hint",
    [
        ("pretrain", "size", "frame_size or hidden_size or mlp_size"),
        ("finetune", "stepz", "steps"),
        ("pretrain", "qq", None),
    ],
)
def test_a_parameter_the_notebook_lacks_is_refused(tmp_path, nb, name, hint):
    "papermill only logs a warning for an unknown parameter and the run goes on with the default (issue 24: a model"
    "card's `-p size 128` trained at S = 64): the run stops at once with one line naming it and the closest ones."
    with pytest.raises(PapermillExecutionError) as e:
        pm.execute_notebook(
            str(ROOT / f"nbs/runs/{nb}.ipynb"),
            str(tmp_path / "executed.ipynb"),
            parameters={"out": str(tmp_path / "run"), name: 1},
            kernel_name="python3",
            progress_bar=False,
        )
    said = f" (did you mean {hint}?)" if hint else ""
    assert (e.value.ename, e.value.evalue) == (
        "VimpacError",
        f"parameter {name}: not a parameter of this notebook{said}; see its parameters cell",
    )
    assert not (tmp_path / "run").exists()  # stopped before anything was written


def test_parameters_are_coerced_to_their_declared_types():
    "issue 21: papermill's `-p` text, coerced to the parameters cell's types; a value of another type is one line."
    from typing import Optional
    from vimpac.utils import VimpacError
    from vimpac.options import coerce_parameter, check_parameters

    for text, want in [
        ("no", False),
        ("No", False),
        ("OFF", False),
        ("0", False),
        ("false", False),
        ("yes", True),
        ("True", True),
        ("on", True),
        ("1", True),
        (True, True),
        (0, False),
    ]:
        assert coerce_parameter("compile", text, bool) is want
    for bad in ("nein", "2", 2, None, ""):
        with pytest.raises(
            VimpacError, match=r"^parameter compile: expected a boolean: true/false, yes/no, on/off or 1/0, got "
        ):
            coerce_parameter("compile", bad, bool)
    assert coerce_parameter("stages", '[{"store": "a", "steps": 2}]', Optional[list]) == [{"store": "a", "steps": 2}]
    assert coerce_parameter("stages", "- {store: a, steps: 2}", Optional[list]) == [{"store": "a", "steps": 2}]  # YAML
    assert coerce_parameter("stages", None, Optional[list]) is None
    with pytest.raises(VimpacError) as e:
        coerce_parameter("stages", "notalist", Optional[list])
    assert str(e.value) == "parameter stages: expected a list (or its JSON / YAML text), got 'notalist'"
    with pytest.raises(VimpacError, match="parameter opts: expected a dict"):
        coerce_parameter("opts", "[1]", dict)
    assert coerce_parameter("steps", "7", int) == 7 and coerce_parameter("steps", 7.0, int) == 7
    assert coerce_parameter("lr", "2e-3", float) == 2e-3 and coerce_parameter("lr", 1, Optional[float]) == 1.0
    for kind, bad, what in [
        (int, 2.5, "an integer"),
        (int, "x", "an integer"),
        (int, False, "an integer"),
        (float, "fast", "a number"),
        (float, [1.0], "a number"),
        (str, ["a"], "a string"),
    ]:
        with pytest.raises(VimpacError, match=f"^parameter p: expected {what}, got "):
            coerce_parameter("p", bad, kind)
    ns = {
        "__annotations__": {"compile": bool, "steps": int, "stages": Optional[list]},
        "compile": "no",
        "steps": 3.0,
        "stages": None,
        "other": "x",
    }
    assert check_parameters(ns) == {"compile": False, "steps": 3, "stages": None} and ns["compile"] is False


def _head_of_pretrain(tmp_path):
    "The pretrain run notebook up to the cell that reads its parameters (no training), then a cell printing them."
    nb = json.loads((ROOT / "nbs/runs/pretrain.ipynb").read_text())
    i = next(i for i, c in enumerate(nb["cells"]) if "check_parameters(globals())" in "".join(c["source"]))
    show = dict(
        cell_type="code",
        id="show0001",
        metadata={},
        execution_count=None,
        outputs=[],
        source=["print(repr(compile), repr(resume), plan)"],
    )
    nb["cells"] = nb["cells"][: i + 1] + [show]
    (tmp_path / "head.ipynb").write_text(json.dumps(nb))
    return str(tmp_path / "head.ipynb")


def test_papermill_text_parameters_take_the_declared_types(tmp_path):
    "issue 21: `-p compile no` was read as True; `-p stages notalist` failed with `TypeError: string indices must be"
    "integers`."
    head = _head_of_pretrain(tmp_path)

    def execute(name, **parameters):
        "The head of the pre-training notebook run as `name` with `parameters` (and out=tmp_path/run)."
        parameters = dict(out=str(tmp_path / "run"), **parameters)
        return pm.execute_notebook(
            head, str(tmp_path / name), kernel_name="python3", progress_bar=False, parameters=parameters
        )

    nb = execute("ok.ipynb", compile="no", resume="On", stages='[{"store": "s128", "steps": 2}]')
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert text.strip() == "False True [{'store': 's128', 'steps': 2}]", text
    with pytest.raises(PapermillExecutionError) as e:
        execute("bad.ipynb", stages="notalist")
    assert (e.value.ename, e.value.evalue) == (
        "VimpacError",
        "parameter stages: expected a list (or its JSON / YAML text), got 'notalist'",
    )
    with pytest.raises(PapermillExecutionError) as e:
        execute("bad2.ipynb", compile="nah")
    assert e.value.evalue == "parameter compile: expected a boolean: true/false, yes/no, on/off or 1/0, got 'nah'"


@pytest.mark.slow
@pytest.mark.parametrize(
    "nb, params, line",
    [
        (
            "train_tokenizer",
            dict(heldout_fraction=1.5),
            "parameter heldout_fraction: expected a finite number > 0 and < 1",
        ),
        ("train_tokenizer", dict(steps=-5), "parameter steps: expected an integer >= 1, got -5"),
        ("train_tokenizer", dict(scale_min=1.4, scale_max=0.6), "parameter scale_min: 1.4 is above scale_max 0.6"),
        ("train_tokenizer", dict(vocab_size=0), "vocab_size: expected an integer >= 2, got 0"),
        (
            "train_tokenizer",
            dict(heldout_images=["nope.jpg"]),
            "parameter heldout_images: nope.jpg is not among the images",
        ),
        ("pretrain", dict(stages=[{"stor": "x", "steps": 1}]), 'parameter stages: expected a list of {"store": FOLDER'),
        ("pretrain", dict(stages=["a", "b"]), 'parameter stages: expected a list of {"store": FOLDER'),
        ("pretrain", dict(gpus=-2), "parameter gpus: expected an integer >= 0, got -2"),
        ("pretrain", dict(betas=[0.9, 0.98, 0.5]), "betas: expected 2 values, got [0.9, 0.98, 0.5]"),
        ("pretrain", dict(out=None, resume=True), "parameter resume: needs out, the run folder of the job to go on"),
        ("finetune", dict(out=None, resume=True), "parameter resume: needs out, the run folder of the job to go on"),
        ("finetune", dict(dataset="ucf101"), "parameter video_root: the folder of the ucf101 videos is needed"),
        ("finetune", dict(views="center", test_views="3x2"), "parameter test_views: 3x2 needs the crop 1x-topleft"),
        ("pretraining_benefit", dict(scale="huge"), "parameter scale: expected one of tiny, cpu, got 'huge'"),
        ("pretraining_benefit", dict(cells=[1, 2, 3]), "parameter cells: expected two counts of vivid cells"),
    ],
)
def test_run_notebooks_check_every_parameter_before_any_work(tmp_path, nb, params, line):
    """Issue 35: bad values reached the work (KeyError, TypeError, IndexError, AssertionError), or were accepted
    (a held-out fraction of 1.5, -5 steps that still wrote a card, scale_min above scale_max, a third beta taken as
    the store). Each is now the kit's one line before anything is written."""
    with pytest.raises(PapermillExecutionError) as e:
        pm.execute_notebook(
            str(ROOT / f"nbs/runs/{nb}.ipynb"),
            str(tmp_path / "executed.ipynb"),
            parameters={"out": str(tmp_path / "run"), **params},
            kernel_name="python3",
            progress_bar=False,
        )
    assert e.value.ename == "VimpacError" and e.value.evalue.startswith(line), e.value.evalue
    assert not (tmp_path / "run").exists()


def test_micro_batch_size_auto_as_on_the_command_line():
    """Issue 35: the notebooks' `micro_batch_size` comment offers `auto` (as `--micro-batch-size auto`), but the
    parameter was refused; it is None, the kit's choice. Other Optional parameters keep their type."""
    from typing import Optional
    from vimpac.options import coerce_parameter
    from vimpac.utils import VimpacError

    assert coerce_parameter("micro_batch_size", "auto", Optional[int]) is None
    assert coerce_parameter("micro_batch_size", "8", Optional[int]) == 8
    with pytest.raises(VimpacError, match="parameter frame_size: expected an integer, got 'auto'"):
        coerce_parameter("frame_size", "auto", Optional[int])
