"""Table 1 as an experiment (issue 31): the paper's VIMPAC row stored as the paper's source prints it, and a run from an
authors'-format checkpoint (their key names, tiny) on a tiny token store, end to end: the kit's top-1 beside the
paper's, "not run" for a dataset without stores, a finished run read back, bad input refused in one line."""

import json, re
from pathlib import Path
import pytest
from vimpac.experiments import mean_std, synthetic_data
from vimpac.main_results import TABLE1, TABLE1_DATASETS, TABLE1_SPLITS, run_main_results, toy_official_run
from vimpac.utils import VimpacError

ROOT = Path(__file__).resolve().parents[1]
PAPER_DATA = ROOT / "tests" / "fixtures" / "paper" / "paper.json"  # the paper's source, as data
pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def _results_table() -> str:
    return json.loads(PAPER_DATA.read_text())["table1_tex"]


def test_table1_is_the_papers_vimpac_row_cell_by_cell():
    table = _results_table()
    row = next(line for line in table.splitlines() if line.strip().startswith(r"\textbf{\modelname}"))
    cells = [c.strip() for c in row.split(r"\\")[0].split("&")]
    assert cells[1:3] == ["V", r"HTM~\cite{miech19howto100m}"], cells  # modality, pre-training data
    assert [float(c) for c in cells[3:]] == [TABLE1[d] for d in TABLE1_DATASETS]
    header = next(line for line in table.splitlines() if "SSV2~" in line)
    names = ["SSV2", r"\diving", "UCF101", "HMDB51", "K400"]  # the columns, in TABLE1_DATASETS' order
    assert [header.index(n) for n in names] == sorted(header.index(n) for n in names)
    assert "UCF101 and HMDB51 are average over three train-val splits" in re.sub(r"\s+", " ", table)
    assert TABLE1_SPLITS == dict(ucf101=3, hmdb51=3)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    "An authors'-format checkpoint (tiny) and a tiny labelled token store standing in for UCF101."
    d = tmp_path_factory.mktemp("main")
    data = synthetic_data(d / "data", [16], ("temporal",), train_per_class=1, test_per_class=1, pool=0)[16]
    stores = {"ucf101": {p: str(data["temporal"][p].path) for p in ("train", "test")}}
    return toy_official_run(d / "authors"), stores


def test_toy_run_from_the_authors_checkpoint_prints_beside_the_paper(toy, tmp_path):
    ckpt, stores = toy
    res = run_main_results(ckpt, stores, scale="toy", out=tmp_path)
    assert [(r["dataset"], r["split"], r["seed"]) for r in res.results] == [("ucf101", 1, 0)]
    assert 0 <= res.results[0]["top1"] <= 100
    lines = res.table().splitlines()[2:]
    assert [line.split(" | ")[0].strip("| ") for line in lines] == ["SSV2", "Diving48", "UCF101", "HMDB51", "K400"]
    assert [("not run" in line) for line in lines] == [True, True, False, True, True]
    top1 = res.results[0]["top1"]
    assert lines[2] == f"| UCF101 | {mean_std([top1])} | 1 x 1 | 92.7 | {top1 - 92.7:+.1f} |", lines[2]
    assert (tmp_path / "main_results" / "table.md").read_text().count("not run") == 4
    run = tmp_path / "ucf101" / "split1-seed0" / "model.safetensors"
    stamp = run.stat().st_mtime_ns
    again = run_main_results(ckpt, stores, scale="toy", out=tmp_path)  # a finished run is evaluated, not retrained
    assert run.stat().st_mtime_ns == stamp and again.results == res.results


def test_bad_input_is_one_line_before_anything_runs(toy, tmp_path):
    ckpt, stores = toy
    cases = {
        "is not the authors' classifier.pt nor a folder holding one": (tmp_path / "none", stores, "toy"),
        "'ucf-101' is not a dataset of Table 1": (ckpt, {"ucf-101": stores["ucf101"]}, "toy"),
        "stores: hmdb51 split 2: lacks test": (ckpt, {"hmdb51": [stores["ucf101"], {"train": "x"}]}, "toy"),
        "scale: expected one of toy, cluster": (ckpt, stores, "cpu"),
    }
    for expected, (c, s, scale) in cases.items():
        with pytest.raises(VimpacError) as e:
            run_main_results(c, s, scale=scale, out=tmp_path / "out")
        assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)
    with pytest.raises(VimpacError):  # a folder that is not a token store
        run_main_results(ckpt, {"ssv2": {"train": tmp_path, "test": tmp_path}}, scale="toy", out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_toy_run_folder_is_the_authors_own(tmp_path):
    """Issue 48: the toy checkpoint was the kit's widening of their file, in their key names but saved by the kit.
    Table 1's toy run now starts from a run folder their code wrote, args included: the kit reads its model from
    their `args.pickle` (layout, width, depth, heads by their rule) and their `classifier.pt`, with nothing else."""
    import torch
    from vimpac.official import load_official_pretraining

    folder = toy_official_run(tmp_path / "authors")
    assert sorted(p.name for p in folder.iterdir()) == ["args.pickle", "classifier.pt"]
    keys = torch.load(folder / "classifier.pt", weights_only=True).keys()
    assert any(k.startswith("backbone.") for k in keys) and any(k.startswith("mlm_head.") for k in keys)
    c = load_official_pretraining(folder).config
    assert (c.layout, c.hidden_size, c.num_layers, c.num_heads, c.vocab_size) == ("T,H|W", 128, 2, 2, 512)
