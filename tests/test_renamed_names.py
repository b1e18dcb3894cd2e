"""Names renamed in issue 22 keep working for one release: `VimpacConfig.clip_len` (now `max_clip_len`), the
`from_official` classmethods (now `vimpac.official.load_official_*`), `vimpac.tokenizer.check_tokens` (now
`check_codes`); runs saved before the rename load without a warning; `vimpac.model` does not import `official`.
The names that issue 33 moved to their own rooms (runs, probes, showcase, memory, checkpoints, options) keep their
old paths."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from vimpac.inference import DEMO_CHECKPOINT
from vimpac.model import VimpacConfig, VimpacForPreTraining, VimpacForVideoClassification
from vimpac.official import load_official_classifier, load_official_pretraining
from vimpac.utils import VimpacDeprecationWarning

FX = Path(__file__).parent / "fixtures" / "official"


def test_model_does_not_import_official():
    code = "import sys, vimpac.model; print('vimpac.official' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_from_official_works_from_the_model_module_alone():
    "In a fresh interpreter that imported `vimpac.model` only, `from_official` warns and loads (once AttributeError)."
    code = (
        "import warnings; from vimpac.model import VimpacForVideoClassification as C\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    m = C.from_official({str(FX / 'classifier_tiny.pt')!r}, 7, 4)\n"
        "print(m.num_classes, [type(x.message).__name__ for x in w], str(w[0].message))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "7 ['VimpacDeprecationWarning'] VimpacForVideoClassification.from_official is replaced by "
        "vimpac.official.load_official_classifier; the old name goes in the next release"
    )


def test_shipped_checkpoint_loads_silently():
    "The demo checkpoint, saved after the rename (the old field's loading: the run folder of the next test)."
    assert "max_clip_len" in json.loads((DEMO_CHECKPOINT / "config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = VimpacForPreTraining.from_pretrained(DEMO_CHECKPOINT)
    assert model.config.max_clip_len == 5


def test_old_run_folder_and_checkpoint_config_load_silently(tmp_path):
    model = VimpacForPreTraining(VimpacConfig.from_preset("tiny", vocab_size=16, token_map=(2, 2), max_clip_len=3))
    model.save_pretrained(tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    saved["clip_len"] = saved.pop("max_clip_len")
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = VimpacForPreTraining.from_pretrained(tmp_path / "run")
        old_state = {k: v for k, v in saved.items() if k != "kind"}  # a checkpoint's model_config
        assert VimpacConfig.from_dict(old_state) == model.config
    assert again.config == model.config
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values()))


def test_old_names_warn():
    with pytest.warns(VimpacDeprecationWarning, match="'clip_len' is renamed 'max_clip_len'"):
        c = VimpacConfig(clip_len=4)
    assert c.max_clip_len == 4
    with pytest.warns(VimpacDeprecationWarning, match="'clip_len' is renamed 'max_clip_len'"):
        assert c.clip_len == 4
    with pytest.warns(VimpacDeprecationWarning, match="'max_frames'"):
        assert VimpacConfig(max_frames=6).max_clip_len == 6
    with pytest.warns(VimpacDeprecationWarning, match="check_codes"):
        from vimpac.tokenizer import check_tokens  # noqa: F401
    with pytest.raises(TypeError, match="got both"):
        VimpacConfig(clip_len=4, max_clip_len=5)


def test_from_official_shims_warn_and_load_the_same():
    with pytest.warns(VimpacDeprecationWarning, match="load_official_pretraining"):
        old = VimpacForPreTraining.from_official(FX / "pretrain_tiny.pt", num_heads=4)
    new = load_official_pretraining(FX / "pretrain_tiny.pt", num_heads=4)
    assert all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), new.state_dict().values()))
    with pytest.warns(VimpacDeprecationWarning, match="load_official_classifier"):
        clf = VimpacForVideoClassification.from_official(FX / "classifier_tiny.pt", None, 4)
    assert clf.num_classes == load_official_classifier(FX / "classifier_tiny.pt", num_heads=4).num_classes == 7


# Names moved by issue 33: (old path, new path). The old module warns for the first list; it still calls the names of
# the second itself, so it imports them, and their old path is the same object with no warning.
WARN = [
    ("vimpac.evaluate.read_run", "vimpac.runs.read_run"),
    ("vimpac.evaluate.describe_run", "vimpac.runs.describe_run"),
    ("vimpac.evaluate.RUN_RECORDS", "vimpac.runs.RUN_RECORDS"),
    ("vimpac.engine.check_run_tokenizer", "vimpac.runs.check_run_tokenizer"),
    ("vimpac.inference.shipped_classifier", "vimpac.runs.shipped_classifier"),
    ("vimpac.inference.CLASSIFIER_CHECKPOINT", "vimpac.runs.CLASSIFIER_CHECKPOINT"),
    ("vimpac.cli.run_demo", "vimpac.showcase.run_demo"),
    ("vimpac.cli.demo_clip", "vimpac.showcase.demo_clip"),
    ("vimpac.cli.demo_mask", "vimpac.showcase.demo_mask"),
    ("vimpac.cli.DATASET_FPS", "vimpac.data.DATASET_FPS"),
    ("vimpac.cli.DATASET_VIEWS", "vimpac.data.DATASET_VIEWS"),
    ("vimpac.evaluate.knn_scores", "vimpac.probes.knn_scores"),
    ("vimpac.evaluate.LinearProbe", "vimpac.probes.LinearProbe"),
    ("vimpac.evaluate.fit_linear_probe", "vimpac.probes.fit_linear_probe"),
    ("vimpac.cli.PROBES", "vimpac.probes.PROBES"),
    ("vimpac.evaluate.PROBES", "vimpac.probes.PROBES"),
    *[
        (f"vimpac.engine.{n}", f"vimpac.memory.{n}")
        for n in ("GPU_PEAK_FLOPS", "peak_flops_for", "peak_flops", "MEMORY_MARGIN", "RESERVED_BYTES")
        + ("OPTIMIZER_BYTES_PER_PARAM", "saved_activation_bytes", "recomputed_layer_bytes")
    ],
    *[
        (f"vimpac.engine.{n}", f"vimpac.checkpoints.{n}")
        for n in ("load_checkpoint", "latest_checkpoint", "STOP_SIGNALS")
    ],
    *[
        (f"vimpac.utils.{n}", f"vimpac.options.{n}")
        for n in ("coerce_parameter", "check_parameters", "options_for", "OptionParser", "checked_option")
        + ("number_option", "device_option", "folder_option", "config_fields", "field_help", "field_default")
        + ("field_kind", "option_name", "add_config_options", "config_values", "config_from_options", "config_argv")
        + ("parameter_lines",)
    ],
]
SAME = [
    ("vimpac.cli.tokenize_videos", "vimpac.store.tokenize_videos"),
    ("vimpac.cli.tokenize_dataset", "vimpac.data.tokenize_dataset"),
    ("vimpac.cli.predict_videos", "vimpac.evaluate.predict_videos"),
    ("vimpac.cli.features_of", "vimpac.evaluate.features_of"),
    ("vimpac.cli.evaluate_run", "vimpac.evaluate.evaluate_run"),
    ("vimpac.evaluate.probe_scores", "vimpac.probes.probe_scores"),
    ("vimpac.inference.DEMO_CHECKPOINT", "vimpac.runs.DEMO_CHECKPOINT"),
    ("vimpac.evaluate.load_run", "vimpac.runs.load_run"),
    ("vimpac.evaluate.run_tokenizer", "vimpac.runs.run_tokenizer"),
    *[
        (f"vimpac.engine.{n}", f"vimpac.memory.{n}")
        for n in ("MemoryModel", "device_memory", "gib", "memory_model", "step_unless")
    ],
    *[
        (f"vimpac.engine.{n}", f"vimpac.checkpoints.{n}")
        for n in ("StopSignals", "RunStopped", "ignore_stop_signals", "list_checkpoints", "save_checkpoint")
        + ("rng_state", "set_rng_state")
    ],
]


@pytest.mark.parametrize("old, new, warns", [(*p, True) for p in WARN] + [(*p, False) for p in SAME])
def test_names_moved_by_issue_33_keep_their_old_path(old, new, warns):
    """Each old path gives the very object of the new one: with `VimpacDeprecationWarning` naming both where the old
    module no longer uses the name, silently where it imports the name for its own use."""
    import importlib

    (om, _, oname), (nm, _, nname) = old.rpartition("."), new.rpartition(".")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = getattr(importlib.import_module(om), oname)
    said = [str(x.message) for x in w if issubclass(x.category, VimpacDeprecationWarning)]
    assert said == ([f"{old} is now {new}; the old name goes in the next release"] if warns else []), said
    assert got is getattr(importlib.import_module(nm), nname)


def test_model_skip_is_the_fields_metadata_now():
    from vimpac.options import config_fields
    import vimpac.cli as cli

    with pytest.warns(VimpacDeprecationWarning, match="MODEL_SKIP is now the VimpacConfig fields' metadata"):
        skip = cli.MODEL_SKIP
    assert {"vocab_size", "token_map", "max_clip_len", "pad_id", "mask_id", "num_embeddings"} <= set(skip)
    assert not set(skip) & {f.name for f in config_fields(VimpacConfig)}


def test_a_run_record_still_reads_as_the_old_dict_with_a_warning():
    from vimpac.runs import SavedRun, read_run

    run = read_run(DEMO_CHECKPOINT)
    assert isinstance(run, SavedRun)
    with pytest.warns(VimpacDeprecationWarning, match=r"run\['kind'\] is deprecated; read the field run.kind"):
        assert run["kind"] == run.kind == "vimpac-pretraining"
    with pytest.warns(VimpacDeprecationWarning, match="SavedRun.get"):
        assert run.get("fps") == 2.0
