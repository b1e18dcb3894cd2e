"""The paper's analysis as experiments (issue 23): the tables' rows are valid configurations at every scale, a claim's
verdict follows the seeds' spread, a half-done sweep resumes without re-running a row, and `vimpac-experiment` runs a
table's notebook through papermill, one line for bad input."""

import json, re, signal, subprocess, sys, time
from pathlib import Path
from dataclasses import replace
import pytest
from vimpac.experiments import (
    EXPERIMENTS,
    SCALES,
    Claim,
    experiment_main,
    experiment_rows,
    run_experiment,
    run_row,
    setup_for,
    slug,
    texture_data,
    verdict,
)
from vimpac.model import VimpacConfig
from vimpac.pretrain import PretrainConfig
from vimpac.utils import VimpacError
from helpers import run_in_process

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def test_one_notebook_per_table_and_valid_rows():
    notebooks = {p.stem for p in (ROOT / "nbs" / "experiments").glob("*.ipynb")} - {"main_results"}  # Table 1: its own
    assert sorted(notebooks) == sorted(EXPERIMENTS)
    for e in EXPERIMENTS.values():
        assert len({r.label for r in e.rows}) == len(e.rows), e.name
        for c in e.claims:  # a claim names rows of its table
            e.row(c.better), e.row(c.worse)
        for scale in SCALES:
            s = setup_for(scale)
            for r in e.rows:
                pre, model = r.at(scale)
                VimpacConfig.from_preset(s.preset, **model)
                if pre is not None:
                    PretrainConfig(**{**s.pretrain, **e.base, **pre})
                s.resolution(r)


def test_paper_numbers_spot_checks():
    "A few numbers read again from the paper's tables."
    assert EXPERIMENTS["masking_strategy"].row("i.i.d., S 256").paper == dict(mask_acc=19.5, top1=61.4)
    assert EXPERIMENTS["pretraining_tasks"].row("none").paper["ssv2"] == 1.2
    assert EXPERIMENTS["positive_distance"].row("d_max 0").paper["top1"] == 66.7
    assert EXPERIMENTS["layout"].row("T,H|W, pre-LN").paper == dict(top1=67.6)
    assert EXPERIMENTS["masking_ratio"].base == EXPERIMENTS["masking_strategy"].base == dict(alpha=0.0)


def _results(a, b, metric="top1"):
    return [
        dict(row=row, seed=s, dataset="temporal", **{metric: v})
        for row, values in (("A", a), ("B", b))
        for s, v in enumerate(values)
    ]


@pytest.mark.parametrize(
    "a, b, metric, word",
    [
        ([60, 62, 61], [50, 51, 52], "top1", "holds"),  # paired differences 10, 11, 9: t 17.3 at df 2
        ([50, 51, 52], [60, 62, 61], "top1", "reversed"),
        ([50, 60, 55], [52, 57, 54], "top1", "inconclusive"),  # +0.67 with differences -2, 3, 1
        ([52, 57, 54], [50, 60, 55], "top1", "inconclusive"),
        ([0.5, 0.62, 0.55], [1.0, 1.1, 1.05], "cl_loss", "holds"),  # a loss: lower is better
        ([60, 61, 62], [50, 51, 52], "top1", "inconclusive"),  # the same +10 in 3 seeds: a sign test's p 0.25
        ([60], [50], "top1", "no test"),  # one seed, no per-video results: no test
        ([60, 61, 59], [50], "top1", "no test"),
    ],
)
def test_verdict(a, b, metric, word):
    """'holds' needs its test at its degrees of freedom (2 SE over 3 seeds was a two-sided p of 0.10-0.18), after Holm's
    adjustment over the family (here the claim alone); a direction without that is 'inconclusive' (it was
    'suggested (p = 0.91)' on the main of issue 48, whatever the p)."""
    line = verdict(Claim("A beats B", "A", "B", metric), _results(a, b, metric))[0]
    assert line.split(": ")[1].split(" (")[0] == word, line
    assert "inf" not in line and "SE" not in line


def test_a_claim_with_no_data_says_not_run():
    "A claim about a temporally-heavy dataset prints a line when none ran (it printed nothing), and so does a row."
    claim = EXPERIMENTS["pretraining_tasks"].claims[3]
    spatial = [dict(row=r, seed=0, dataset="spatial", top1=50.0) for r in ("MP", "CL")]
    assert verdict(claim, spatial) == [f"{claim.text}: not run (no result on a temporally-heavy dataset)"]
    only_mp = [dict(row="MP", seed=0, dataset="texture", top1=50.0)]
    assert verdict(claim, only_mp) == [f"{claim.text} (texture): not run (CL)"]
    speed = EXPERIMENTS["layout"].claims[3]
    logged = [
        dict(row=r, seed=0, dataset="texture", speed=v) for r, v in (("T,H|W, post-LN", 9.0), ("TxHxW, post-LN", 5.0))
    ]
    assert verdict(speed, logged)[0].endswith("not compared (no side-by-side timing; speeds of separate runs are not)")


def test_cl_rows_run_without_cl_mask():
    """Table 4's CL row and Table 16's α ∞ row print Table 9's "CL, no CL-Mask" number (57.1): they run CL alone on
    the unmasked clips (they ran with CL-Mask, the same run as Table 9's "CL, CL-Mask" row)."""
    rows = [EXPERIMENTS["pretraining_tasks"].row("CL"), EXPERIMENTS["cl_weight"].row("α ∞ (CL only)")]
    rows.append(EXPERIMENTS["cl_mask"].row("CL, no CL-Mask"))
    for scale in SCALES:
        s = setup_for(scale)
        cfgs = [
            PretrainConfig(**{**s.pretrain, **e.base, **r.at(scale)[0]})
            for e, r in zip((EXPERIMENTS["pretraining_tasks"], EXPERIMENTS["cl_weight"], EXPERIMENTS["cl_mask"]), rows)
        ]
        assert {(c.mask_then_predict, c.cl_mask) for c in cfgs} == {(False, False)}
        assert rows[0].paper["ucf101"] == rows[1].paper["top1"] == rows[2].paper["top1"] == 57.1
    with_mask = EXPERIMENTS["cl_mask"].row("CL, CL-Mask")
    assert PretrainConfig(**{**setup_for("cpu").pretrain, **with_mask.at("cpu")[0]}).cl_mask


def test_rows_that_differ_in_the_paper_differ_at_the_cpu_scale():
    """The masking-ratio rows are three distinct masks at the CPU scale (5 and 6 blocks both gave 3 blocks), and the
    negatives table's default row (128 - 1) is the setup's default, the one every other table's rows use."""
    from vimpac.masking import expected_block_ratio

    s, e = setup_for("cpu"), EXPERIMENTS["masking_ratio"]
    specs = [
        PretrainConfig(**{**s.pretrain, **e.base, **r.at("cpu")[0], "clip_len": s.clip_len}).mask_spec() for r in e.rows
    ]
    masks = [(m.strategy, m.blocks(4, 4, 4) if m.strategy == "block" else round(m.mask_ratio, 3)) for m in specs]
    assert len(set(masks)) == 6
    blocks = [k for _, k in masks[:3]]
    assert blocks == [2, 3, 4] and {s for s, _ in masks[:3]} == {"block"}
    for (_, r), k in zip(masks[3:], blocks):  # the i.i.d. rows at the block rows' expected ratios on the 4 x 4 x 4 map
        assert abs(r - expected_block_ratio(4, 4, 4, k)) < 0.005
    neg = EXPERIMENTS["negatives"]
    assert neg.row("128 - 1").at("cpu")[0]["negatives"] == s.pretrain["negatives"]
    assert len({r.at("cpu")[0]["negatives"] for r in neg.rows}) == 4
    assert neg.row("128 - 1").pretrain["negatives"] == setup_for("cluster").pretrain["negatives"] == 127


def test_cluster_setup_is_the_authors_small_sh(tmp_path, monkeypatch):
    """§5's pre-training as the authors' scripts/pretrain/small.sh runs it: lr 1e-3, 10% warm-up, a 2-layer, 2048-wide
    CLS head (Table 12's 'Pre-Train-S' column, 3e-4 and 5%, is large.sh's 100 epochs: its headers are swapped), and
    what reaches torchrun carries them."""
    s = setup_for("cluster")
    assert (s.pretrain["lr"], s.pretrain["warmup_ratio"], s.pretrain["epochs"]) == (1e-3, 0.1, 10)
    assert s.model == dict(cls_head_layers=2, cls_head_hidden=2048)
    import vimpac.experiments as ex

    calls = []
    monkeypatch.setattr(ex, "_torchrun", lambda script, gpus, argv: calls.append((script, argv)))
    monkeypatch.setattr(ex, "_pretraining_stats", lambda *a: {})
    monkeypatch.setattr(ex, "_finetune_top1", lambda *a, **k: (50.0, [1, 0]))
    store = type("S", (), {"path": tmp_path / "pool", "token_map": (16, 16)})()
    data = {128: {"pool": store, "ucf101": {"train": store, "test": type("T", (), {"classes": ["a", "b"]})()}}}
    run_row(
        EXPERIMENTS["pretraining_tasks"], EXPERIMENTS["pretraining_tasks"].row("MP"), 0, "cluster", s, data, tmp_path
    )
    script, argv = calls[0]
    values = {k: argv[i + 1] for i, k in enumerate(argv[:-1]) if k.startswith("--")}
    assert script == "vimpac-pretrain" and values["--lr"] == "0.001" and values["--warmup-ratio"] == "0.1"
    assert values["--cls-head-layers"] == "2" and values["--cls-head-hidden"] == "2048"
    assert values["--negatives"] == "127" and values["--preset"] == "small"


def test_cluster_stores_lacking_a_dataset_are_refused_before_any_run(tmp_path, sample_store, monkeypatch):
    """Issue 35: cluster stores without ucf101 failed with `cl_weight: 'ucf101'` only after pre-training had finished
    (on a cluster, the whole pre-training lost). They are refused before any run, naming what is missing (the sample
    store's tokens taken for DALL-E's here: that check has its own test)."""
    import vimpac.experiments as ex

    monkeypatch.setattr(ex, "check_dalle_store", lambda store: store)
    with pytest.raises(
        VimpacError, match=r"^stores: no ucf101 store at S 128; the rows of cl_weight need pretrain and ucf101"
    ):
        run_experiment("cl_weight", "cluster", out=tmp_path / "exp", stores={"pretrain": {128: str(sample_store)}})
    assert not (tmp_path / "exp" / "pretrain").exists()


def test_texture_benchmark_tokens_are_bit_identical_across_folders(tmp_path):
    """The benchmark regenerates the same tokens in another folder (x264's lossy frames differed between
    regenerations by up to 20 pixel levels and flipped a toy top-1), at both frame sizes, and mask accuracy's floors
    read its motion."""
    import numpy as np

    kw = dict(pool=8, train_per_class=1, test_per_class=2, num_frames=6, cell=16)
    a, b = (texture_data(tmp_path / d, [32, 64], **kw) for d in ("a", "deeper/b"))
    for S in (32, 64):
        for sa, sb in ((a[S]["pool"], b[S]["pool"]), (a[S]["texture"]["test"], b[S]["texture"]["test"])):
            assert sa.keys() == sb.keys() and len(sa) > 0
            for k in sa.keys():
                assert np.array_equal(sa.tokens(k), sb.tokens(k))
        test, motion = a[S]["eval"]
        assert motion.abs().max() == S // 32  # one board cell per frame: 1 token at S 32, 2 at S 64
        t = test.tokens(test.keys()[0])
        dy, dx = motion[0].tolist()
        assert np.array_equal(t[1:], np.roll(t[:-1], (dy, dx), axis=(1, 2)))


def test_data_cut_off_midway_is_completed_and_finished_data_reused(tmp_path, monkeypatch):
    """Issue 35: an interrupt while the data were being tokenized left a partial pool, and the re-run trained on it
    (7 of 42 videos) for good. A re-run now completes it; finished data are reused without tokenizing again."""
    import vimpac.data as D

    real, kw = D.tokenize_videos, dict(pool=8, train_per_class=1, test_per_class=1, num_frames=4, cell=8)

    def cut_off(paths, out, *args, **kwargs):  # stores the first 3 videos, then the run is stopped
        real(paths[:3], out, *args, **kwargs)
        raise RuntimeError("cut off")

    monkeypatch.setattr(D, "tokenize_videos", cut_off)
    with pytest.raises(RuntimeError, match="cut off"):
        texture_data(tmp_path / "data", [16], **kw)
    monkeypatch.setattr(D, "tokenize_videos", real)
    assert len(texture_data(tmp_path / "data", [16], **kw)[16]["pool"]) == 8  # main: 3, the partial pool reused
    monkeypatch.setattr(D, "tokenize_videos", lambda *a, **k: pytest.fail("finished data tokenized again"))
    assert len(texture_data(tmp_path / "data", [16], **kw)[16]["pool"]) == 8


def test_data_another_process_writes_is_waited_for(tmp_path):
    """Issue 35: two experiments on one --out (a SLURM array's tasks) mixed their data: one pre-trained on 15 of 42
    pool videos while the other was still tokenizing. The second now waits for the first, with one warning."""
    out = tmp_path / "data"
    out.mkdir()
    hold = f"import time\nfrom vimpac.utils import writer_lock\nwith writer_lock({str(out / '.data.writer')!r}, 'x'):"
    hold += "\n    print('held', flush=True)\n    time.sleep(3)"
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.time()
        with pytest.warns(
            UserWarning,
            match=rf"experiment data {re.escape(str(out))} is being written by pid {holder.pid} on .*; waiting",
        ):
            data = texture_data(out, [16], pool=4, train_per_class=1, test_per_class=1, num_frames=4, cell=8)
        assert time.time() - t0 > 1 and holder.wait(timeout=60) == 0  # it waited for the holder to let go
        assert len(data[16]["pool"]) == 4
    finally:
        holder.kill()


def test_rows_by_label_index_and_extra_rows():
    e = EXPERIMENTS["masking_ratio"]
    rows = experiment_rows(e, [0, "i.i.d., 14.5%"], [{"label": "block, 30%", "pretrain": {"mask_ratio": 0.3}}])
    assert [r.label for r in rows] == ["block, 4 blocks (11.9%)", "i.i.d., 14.5%", "block, 30%"]
    with pytest.raises(VimpacError, match="row: 'x' is not a row of masking_ratio"):
        experiment_rows(e, ["x"])
    with pytest.raises(VimpacError, match="extra_rows: .* is not a row"):
        experiment_rows(e, None, [{"labels": "typo"}])
    with pytest.raises(VimpacError, match="setup: 'steps' is not a field of Setup"):
        setup_for("cpu", steps=3)


def test_toy_run_resumes_without_running_a_row_again(tmp_path, monkeypatch):
    out = tmp_path / "exp"
    first = run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 0", "α 1"])
    table = (out / "cl_weight" / "table.md").read_text()
    assert "| α 0 | 1 |" in table and "| α 1 | 1 |" in table and "paper: UCF101" in table
    assert {r["row"] for r in first.results} == {"α 0", "α 1"}
    assert "cl_loss" not in first.results[0] and "cl_loss" in first.results[1]  # α 0 trains no CL
    import vimpac.experiments as ex

    def refuse(*a, **k):
        raise AssertionError("a finished row ran again")

    monkeypatch.setattr(ex, "pretrain", refuse)
    monkeypatch.setattr(ex, "finetune", refuse)
    again = run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 0", "α 1"])
    assert again.results == first.results


def test_a_cut_off_run_resumes_and_one_killed_in_its_first_checkpoint_starts_over(tmp_path, monkeypatch):
    """A killed sweep leaves its runs' folders. A run with a checkpoint goes on from it, pre-training and fine-tuning
    alike, in this process and under torchrun. A run killed while writing its first checkpoint holds only that
    write's temporary file: it starts over (it used to ask for --resume and fail, the flaky CI of 2bca000). (Without
    the controls, whose shuffled-frames control pre-trains the default row.)"""
    import vimpac.experiments as ex

    out = tmp_path / "exp"
    first = run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 2"], control=False).results
    (pre,) = [p for p in (out / "pretrain").iterdir() if p.is_dir()]
    (ft,) = (out / "cl_weight" / slug("α 2")).glob("ft-*")
    calls = []
    for name in ("pretrain", "finetune"):
        real = getattr(ex, name)

        def record(*a, _real=real, _name=name, **k):
            calls.append((_name, k.get("resume", False), k.get("init") is not None))
            return _real(*a, **k)

        monkeypatch.setattr(ex, name, record)

    def cut_off(folder, checkpoints):
        (folder / "model.safetensors").unlink()
        if not checkpoints:  # killed during the first checkpoint's write
            for p in (folder / "checkpoints").glob("step-*.pt"):
                p.unlink()
            (folder / "checkpoints" / ".step-00000002.pt.k1ll3d00.tmp").write_bytes(b"half a checkpoint")
        (out / "cl_weight" / slug("α 2") / "seed0.json").unlink(missing_ok=True)

    for f in (pre, ft):
        cut_off(f, checkpoints=True)
    again = run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 2"], control=False).results
    assert calls == [("pretrain", True, False), ("finetune", True, False)]
    assert again == first  # the runs had ended: their last checkpoints hold the finished models

    calls.clear()
    for f in (pre, ft):
        cut_off(f, checkpoints=False)
    with pytest.warns(UserWarning, match="removed 1 temporary checkpoint file"):
        again = run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 2"], control=False).results
    assert calls == [("pretrain", False, False), ("finetune", False, True)]
    timed = ("train_speed",)  # a new run's speed is measured anew
    assert [{k: v for k, v in r.items() if k not in timed} for r in again] == [
        {k: v for k, v in r.items() if k not in timed} for r in first
    ]  # a toy run is deterministic
    assert not list(pre.glob("checkpoints/.step-*")) and list(pre.glob("checkpoints/step-*.pt"))


class _Launched(Exception):
    "Raised by the stand-in torchrun once fine-tuning is launched."


def test_cluster_runs_cut_off_resume_under_torchrun(tmp_path, monkeypatch):
    """At the cluster scale the same: torchrun gets --resume once a run folder holds a checkpoint (fine-tuning without
    --init or a model: the checkpoint holds it), and not when it holds only a killed write's temporary file."""
    import vimpac.experiments as ex

    launched = []

    def torchrun(script, gpus, argv):
        launched.append((script, argv))
        if script == "vimpac-finetune":
            raise _Launched

    monkeypatch.setattr(ex, "_torchrun", torchrun)
    monkeypatch.setattr(ex, "_pretraining_stats", lambda *a: {})
    store = type("S", (), {"path": tmp_path / "pool", "token_map": (16, 16)})()
    data = {128: {"pool": store, "ucf101": {"train": store, "test": type("T", (), {"classes": ["a", "b"]})()}}}
    setup, exp = replace(setup_for("cluster"), gpus=2), EXPERIMENTS["cl_weight"]

    def launch():
        launched.clear()
        with pytest.raises(_Launched):
            run_row(exp, exp.row("α 2"), 0, "cluster", setup, data, tmp_path / "exp")
        return [(script, argv[argv.index("--out") + 1], argv) for script, argv in launched]

    (_, pre, first), (_, ft, start) = launch()
    assert "--resume" not in first and "--init" in start and "--resume" not in start
    for folder in (pre, ft):
        (Path(folder) / "checkpoints").mkdir(parents=True)
        (Path(folder) / "checkpoints" / ".step-00000002.pt.k1ll3d00.tmp").write_bytes(b"half a checkpoint")
    (_, _, first), (_, _, start) = launch()
    assert "--resume" not in first and "--resume" not in start and "--init" in start
    for folder in (pre, ft):
        (Path(folder) / "checkpoints" / "step-00000002.pt").write_bytes(b"a checkpoint")
    (_, _, first), (_, _, start) = launch()
    assert "--resume" in first and "--preset" in first  # pre-training checks the model against its checkpoint
    assert "--resume" in start and "--init" not in start and "--preset" not in start


def test_vimpac_experiment_cli(tmp_path, capsys):
    code, out, err = run_in_process(experiment_main, ["--list"], capsys)
    assert code == 0 and out.count("\n") == len(EXPERIMENTS) and out.startswith("model_size: Impact of model size")
    code, out, err = run_in_process(experiment_main, ["nope", "--out", str(tmp_path)], capsys)
    assert code == 2 and err.startswith("vimpac-experiment: error: NAME: expected experiments of model_size")
    code, out, err = run_in_process(
        experiment_main, ["layout", "--out", str(tmp_path), "--notebooks", str(tmp_path)], capsys
    )
    assert code == 2 and err.count("\n") == 1 and "--notebooks: " in err
    code, out, err = run_in_process(
        experiment_main, ["negatives", "--out", str(tmp_path), "--rows", "0", "-p", "setup", "{}"], capsys
    )
    assert code == 0, err
    assert (tmp_path / "negatives-rows-0.ipynb").is_file() and "| 128 - 1 | 1 |" in out
    results = json.loads((tmp_path / "negatives" / "results.json").read_text())["results"]
    assert [r["row"] for r in results] == ["128 - 1"]


def test_papermill_with_yaml_and_p_as_a_cluster_job_calls_it(tmp_path):
    "papermill's own command line, parameters from YAML (-f) and -p; the table and figure readable in the output."
    params = tmp_path / "params.yaml"
    params.write_text(f"out: {tmp_path / 'exp'}\nrows: [0, 3]\nsetup:\n  pretrain: {{steps: 1}}\n")
    executed = tmp_path / "layout.ipynb"
    papermill = Path(sys.executable).parent / "papermill"
    r = subprocess.run(
        [
            str(papermill),
            str(ROOT / "nbs/experiments/layout.ipynb"),
            str(executed),
            "-f",
            str(params),
            "-p",
            "seeds",
            "[0]",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    outputs = [o for c in json.loads(executed.read_text())["cells"] for o in c.get("outputs", [])]
    markdown = "".join("".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {}))
    assert "| TxHxW, post-LN | 1 |" in markdown and "| T,H,W, post-LN | 1 |" in markdown and "paper: Speed" in markdown
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the figure
    assert any("T,H|W beats full attention" in "".join(o.get("text", "")) for o in outputs)  # the verdicts


@pytest.mark.slow
def test_bad_parameter_one_line_and_killed_sweep_resumed(tmp_path, bin_dir):
    out = tmp_path / "exp"
    cmd = [str(bin_dir / "vimpac-experiment"), "cl_weight", "--out", str(out), "--rows", "0", "2"]
    r = subprocess.run([*cmd, "-p", "threads", "many"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(
        "vimpac-experiment: error: cl_weight: parameter threads: expected an integer, got 'many'"
    )
    first = out / "cl_weight" / slug("α 0") / "seed0.json"
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):  # the first row done: kill the job, as a scheduler would
            if first.is_file() or p.poll() is not None:
                break
            time.sleep(0.1)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert first.is_file()
    done_at = first.stat().st_mtime_ns
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # the same command again
    assert r.returncode == 0, r.stderr[-2000:]
    assert first.stat().st_mtime_ns == done_at  # the finished row was read back, not run again
    assert "| α 0 | 1 |" in r.stdout and "| α 1 | 1 |" in r.stdout
    # progress as the rows end, before the table; the kernel's log without Jupyter's shutdown noise
    lines = r.stdout.splitlines()
    assert lines[0] == "cl_weight: 1/2 α 0, seed 0: read back", lines[:3]
    assert re.fullmatch(r"cl_weight: 2/2 α 1, seed 0: (\d+ s|[\d.]+ min|read back)", lines[1]), lines[:3]
    log = out / "cl_weight-rows-0-2.kernel.log"
    assert not log.is_file() or "KeyboardInterrupt" not in log.read_text(), log.read_text()


def _tiny_experiment_notebooks(folder: Path) -> Path:
    "A `--notebooks` folder whose cl_weight.ipynb writes the parameters it was given as its results."
    import nbformat

    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": kernel, "language_info": {"name": "python"}})
    params = nbformat.v4.new_code_cell('scale = "toy"\nseeds = [0]\nout = ""\nrows = None\nthreads = 1')
    params.metadata["tags"] = ["parameters"]
    body = (
        "import json, pathlib\n"
        "if not isinstance(threads, int):\n"
        "    raise ValueError(f'parameter threads: expected an integer, got {threads!r}')\n"
        "t = pathlib.Path(out) / 'cl_weight'\n"
        "t.mkdir(parents=True, exist_ok=True)\n"
        "saved = dict(experiment='cl_weight', scale=scale, seeds=seeds, results=[])\n"
        "(t / 'results.json').write_text(json.dumps(saved))\n"
        "(t / 'table.md').write_text('# the parameters given')"
    )
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    folder.mkdir()
    nbformat.write(nb, folder / "cl_weight.ipynb")
    return folder


def test_p_values_are_kept_and_a_refused_rerun_keeps_the_executed_notebook(tmp_path, capsys):
    """Issue 35: `-p scale`, `-p seeds` and `-p out` were silently overridden by the command's defaults; a refused
    re-run (a typo in -p) replaced the executed notebook; bad YAML in -p or -f, or -f of a YAML list, was a
    traceback."""
    nbs, out = _tiny_experiment_notebooks(tmp_path / "nbs"), tmp_path / "exp"
    argv = ["cl_weight", "--notebooks", nbs, "-p", "out", out, "-p", "scale", "cpu", "-p", "seeds", "[1, 2]"]
    code, _, err = run_in_process(experiment_main, argv, capsys)
    assert code == 0, err
    saved = json.loads((out / "cl_weight" / "results.json").read_text())
    assert (saved["scale"], saved["seeds"]) == ("cpu", [1, 2])
    executed = out / "cl_weight.ipynb"
    before = executed.read_bytes()
    code, _, err = run_in_process(
        experiment_main, ["cl_weight", "--notebooks", nbs, "--out", out, "-p", "threads", "many"], capsys
    )
    assert code == 2 and "cl_weight: parameter threads: expected an integer, got 'many'" in err, err
    assert executed.read_bytes() == before and (out / "cl_weight.failed.ipynb").is_file()
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "bad.yaml").write_text("a: [1\n")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00 binary")
    for extra, line in [
        (["--scale", "toy", "-p", "scale", "cpu"], "-p scale: 'cpu' disagrees with --scale toy; give it once"),
        (["-p", "scale", "huge"], "-p scale: expected one of toy, cpu, cluster, got 'huge'"),
        (["-p", "setup", "{a: [1"], "-p setup: not valid YAML ("),
        (["-p", "setup", "{frame_size: '64'}"], "setup: frame_size: expected an int (as 16), got '64'"),
        (["-p", "setup", "{pretrain: {steps: 0}}"], "row 'α 0' of cl_weight: steps: 0 trains nothing; expected >= 1"),
        (["-p", "extra_rows", '[{"label": "m", "pretrain": {"mask_ratio": "a"}}]'], "row 'm' of cl_weight: mask_ratio"),
        (["-f", tmp_path / "bad.yaml"], f"-f {tmp_path / 'bad.yaml'}: not valid YAML ("),
        (["-f", tmp_path / "binary.yaml"], f"-f {tmp_path / 'binary.yaml'}: not UTF-8 text; expected a YAML file"),
        (
            ["-f", tmp_path / "list.yaml"],
            f"-f {tmp_path / 'list.yaml'}: expected a YAML mapping of notebook parameters, got a list",
        ),
    ]:
        code, _, err = run_in_process(experiment_main, ["cl_weight", "--notebooks", nbs, "--out", out, *extra], capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"vimpac-experiment: error: {line}"), err


def test_out_from_a_yaml_file(tmp_path, capsys):
    """Issue 35: `-f` with `out` in its YAML was refused for a missing `--out` before the file was read. Now `out` may
    come from `-f`; a file that sets none is refused in one line, naming it."""
    nbs, out = _tiny_experiment_notebooks(tmp_path / "nbs"), tmp_path / "exp"
    (tmp_path / "job.yaml").write_text(f"out: {out}\nscale: cpu\n")
    code, _, err = run_in_process(
        experiment_main, ["cl_weight", "--notebooks", nbs, "-f", tmp_path / "job.yaml"], capsys
    )
    assert code == 0, err
    saved = json.loads((out / "cl_weight" / "results.json").read_text())
    assert (saved["scale"], saved["seeds"]) == ("cpu", [0])
    (tmp_path / "none.yaml").write_text("scale: cpu\n")
    code, _, err = run_in_process(
        experiment_main, ["cl_weight", "--notebooks", nbs, "-f", tmp_path / "none.yaml"], capsys
    )
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"vimpac-experiment: error: --out: required, and -f {tmp_path / 'none.yaml'} sets no out"), (
        err
    )


def test_a_full_disk_under_papermill_names_its_path(tmp_path, capsys, monkeypatch):
    """Issue 35: a full disk during an experiment printed `[Errno 28]` with no path (papermill's own write of the
    notebook failed too, hiding the kit's line). The line now names the folder and what is free."""
    import errno
    import papermill

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(papermill, "execute_notebook", full)
    nbs, out = _tiny_experiment_notebooks(tmp_path / "nbs"), tmp_path / "exp"
    code, _, err = run_in_process(experiment_main, ["cl_weight", "--notebooks", nbs, "--out", out], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert re.fullmatch(
        rf"vimpac-experiment: error: no space left on {re.escape(str(out))}: 1.0 MB needed, [\d.]+ MB free; free some "
        r"space and run the same command again: the finished rows are read back\n",
        err,
    ), err
    assert not list(out.glob(".*.ipynb"))  # no hidden notebook left


def test_sigterm_during_a_row_is_one_line(tmp_path, bin_dir):
    """Issue 35: a SIGTERM while the notebook's kernel ran a cell printed nbclient's "Task exception was never
    retrieved" traceback after the kit's line (asyncio's report of the abandoned cell, at exit). Now: the one line,
    status 143, and a kernel log without Jupyter's noise."""
    out = tmp_path / "exp"
    cmd = [str(bin_dir / "vimpac-experiment"), "cl_weight", "--out", str(out), "--rows", "0"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):  # the row's pre-training under way in the kernel
            if any((out / "pretrain").glob("*/metrics.jsonl")) or p.poll() is not None:
                break
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=120)[1]
    finally:
        p.kill()
    assert p.returncode == 143 and err == "vimpac-experiment: terminated (SIGTERM)\n", err
    log = out / "cl_weight-rows-0.kernel.log"
    assert not log.is_file() or "without encryption" not in log.read_text(), log.read_text()


@pytest.mark.parametrize(
    "args, line",
    [
        (["--seeds", "0", "0"], "seeds: 0 given twice"),
        (["--rows", "2", "2"], "rows: 'α 1' given twice"),
        (["-p", "extra_rows", '[{"label": "α 0"}]'], "rows: 'α 0' given twice"),
    ],
)
def test_a_seed_or_row_twice_is_refused_before_anything_runs(tmp_path, bin_dir, args, line):
    """Issue 35: `--seeds 0 0` printed "seeds 1 ... ± 0.00" over one run, `--rows 2 2` the same, and an extra row
    labelled like a table row overwrote that row's result. Each is refused in one line before any notebook runs:
    nothing is written under --out."""
    out = tmp_path / "exp"
    r = subprocess.run(
        [str(bin_dir / "vimpac-experiment"), "cl_weight", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and line in r.stderr, r.stderr
    assert not out.exists()


def test_slurm_array_job_is_valid():
    "examples/slurm/experiment.sbatch is valid bash and its command parses; stores.yaml gives store_data's shape."
    import yaml
    from vimpac.experiments import experiment_parser

    script = ROOT / "examples/slurm/experiment.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert '--rows "$SLURM_ARRAY_TASK_ID"' in script.read_text()
    a = experiment_parser().parse_args(
        ["masking_ratio", "--scale", "cluster", "--out", "o", "-f", "s.yaml", "--seeds", "0", "--rows", "3"]
    )
    assert (a.names, a.scale, a.rows, a.seeds) == (["masking_ratio"], "cluster", ["3"], [0])
    stores = yaml.safe_load((ROOT / "examples/slurm/stores.yaml").read_text())["stores"]
    assert set(stores) == {"pretrain", "ucf101"} and set(stores["ucf101"][128]) == {"train", "test"}


def test_a_row_run_with_other_settings_runs_again(tmp_path, monkeypatch):
    "A row's results carry the key of its settings: after the row or the setup changed it runs again, with a warning."
    out = tmp_path / "exp"
    run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 2"])
    f = out / "cl_weight" / slug("α 2") / "seed0.json"
    saved = json.loads(f.read_text())
    f.write_text(json.dumps(dict(saved, key="older")))
    import vimpac.experiments as ex

    def refuse(*a, **k):
        raise RuntimeError("ran again")

    with pytest.warns(UserWarning, match="written with other settings"):  # its runs' folders are keyed: reused
        again = run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 2"])
    assert json.loads(f.read_text()) == saved and again.results == saved["results"]
    monkeypatch.setattr(ex, "finetune", refuse)
    with pytest.raises(RuntimeError, match="ran again"):  # a changed setup: the fine-tuning runs again
        run_experiment("cl_weight", "toy", seeds=[0], out=out, rows=["α 2"], finetune=dict(steps=3))


def test_speed_is_timed_side_by_side_and_paired_by_round():
    """Speed claims compare models timed in turn in one process (`side_by_side_speed`), paired by round: logged
    speeds of separate runs mixed machine loads (identical training logged 70.4 and 113.0 videos/s)."""
    from vimpac.experiments import side_by_side_speed
    from vimpac.model import PRESETS

    small = dict(PRESETS["tiny"], vocab_size=64, token_map=(4, 4), max_clip_len=2)
    configs = {"wide": VimpacConfig(**dict(small, hidden_size=256, mlp_size=1024)), "narrow": VimpacConfig(**small)}
    rounds = side_by_side_speed(configs, batch=4, rounds=3)
    assert set(rounds) == {"wide", "narrow"} and all(len(v) == 3 and min(v) > 0 for v in rounds.values())
    claim = Claim("narrow is faster", "narrow", "wide", "speed")
    results = [dict(row=k, seed=0, dataset="texture", speed=max(v), speed_rounds=v) for k, v in rounds.items()]
    line = verdict(claim, results)[0]
    assert "over 3 interleaved timing rounds" in line and "df 2" in line, line


def test_ssv2_is_judged_on_the_centre_crop_at_the_cluster_scale():
    "Table 12 judges SSV2 on the centre crop only (its actions depend on left and right); every table used 3 x 2."
    from vimpac.experiments import views_for

    s = setup_for("cluster")
    assert views_for(s, "ssv2", "cluster") == "1x2"
    assert views_for(s, "ucf101", "cluster") == views_for(s, "diving48", "cluster") == "3x2"
    assert views_for(setup_for("cpu"), "texture", "cpu") == "1x2"


def _run_of(setup, data, out, name: str, label: str) -> Path:
    "The pre-training run folder of a row of a table at the CPU scale (`pretraining_run`)."
    import vimpac.experiments as ex

    e = EXPERIMENTS[name]
    pre, model = e.row(label).at("cpu")
    model = {"preset": setup.preset, **setup.model, **model}
    folder, _ = ex.pretraining_run({**e.base, **pre}, model, setup.resolution(e.row(label)), 0, "cpu", setup, data, out)
    return folder


def test_the_paper_s_shared_rows_are_one_run_and_the_default_row_is_the_paper_s(tmp_path, monkeypatch):
    """Issue 48: the CPU scale ran i.i.d. masks at 50% and full attention by default, so Table 4's "MP" was Table 5's
    "i.i.d., S 128" run, and the default row of 8 tables was not the method its label names. The default row is the
    paper's (block masks, T,H|W), and the rows the paper prints as one run (Table 4's MP, Table 5's block S 128, Table
    15's 5 blocks, Table 16's α 0; Table 5's and 15's i.i.d. at about 15%) are one pre-training run here too."""
    import vimpac.experiments as ex

    s = setup_for("cpu")
    cfg = PretrainConfig(**{**s.pretrain, "clip_len": s.clip_len})
    assert cfg.mask_strategy == "block" and cfg.mask_spec().blocks(4, 4, 4) == 3
    assert VimpacConfig.from_preset(s.preset, **s.model).layout == "T,H|W"
    monkeypatch.setattr(ex, "_pretrain_run", lambda pool, model, cfg, setup, scale, folder: folder)
    store = type("S", (), {"path": tmp_path / "pool", "token_map": (4, 4)})()
    run = lambda name, label: _run_of(s, {32: {"pool": store}}, tmp_path, name, label)  # noqa: E731
    mp = [
        run("pretraining_tasks", "MP"),
        run("masking_strategy", "block, S 128"),
        run("masking_ratio", "block, 5 blocks (14.5%)"),
        run("cl_weight", "α 0"),
        run("positive_distance", "MP alone (§5.2.3's reference)"),
    ]
    assert len(set(mp)) == 1, mp
    assert run("masking_strategy", "i.i.d., S 128") == run("masking_ratio", "i.i.d., 14.5%")
    default = {
        run(name, label)
        for name, label in (
            ("model_size", "6 x 512"),
            ("input_resolution", "T 5, S 128"),
            ("pretraining_tasks", "MP + CL"),
            ("positive_distance", "d_max ∞"),
            ("negatives", "128 - 1"),
            ("cl_mask", "MP + CL, CL-Mask"),
            ("cl_weight", "α 1"),
        )
    }
    assert len(default) == 1 and default.isdisjoint(mp)


def test_every_row_that_runs_something_else_at_the_cpu_scale_says_so():
    """A row whose CPU run differs from its label (a model size, a block count, seconds, negatives, T and S) prints
    what it runs beside the label, in every table; each table's header prints the CPU setup."""
    from vimpac.experiments import results_table, row_label

    s = setup_for("cpu")
    for e in EXPERIMENTS.values():
        for r in e.rows:
            if r.cpu or r.clip_len or r.frame_size:
                assert r.cpu_label, (e.name, r.label)
    row = EXPERIMENTS["masking_ratio"].row("block, 5 blocks (14.5%)")
    assert row_label(row, "cpu") == "block, 5 blocks (14.5%) → 3 blocks (14.9%)"
    assert row_label(row, "cluster") == row.label
    res = [dict(row=row.label, seed=0, dataset="texture", top1=30.0, mask_acc=40.0, copy_acc=2.0, majority_acc=2.0)]
    assert "| block, 5 blocks (14.5%) → 3 blocks (14.9%) | 1 |" in results_table(
        EXPERIMENTS["masking_ratio"], res, "cpu"
    )
    header = s.describe("cpu")
    for words in (
        "4 x 128",
        "layout T,H|W",
        "block masks, 3 blocks",
        "1200 steps of 32 clip pairs",
        "lr 0.001",
        "4 x 4 x 4",
    ):
        assert words in header, (words, header)


def test_positive_clips_share_the_video_not_its_pixels(tmp_path):
    """Issue 48: the two clips of a positive pair were one board cyclically shifted, so contrastive learning could tell
    videos apart from their colours alone and d_max could not matter. The CPU benchmark's texture changes as it moves
    (`renew`): no clip of a video is another of its clips shifted."""
    import numpy as np

    s = setup_for("cpu")
    data = texture_data(tmp_path, [32], **{**s.data, "pool": 8, "train_per_class": 1, "test_per_class": 1})
    pool, T = data[32]["pool"], s.clip_len
    for i in range(len(pool)):
        v = pool[i].numpy()
        for d in range(1, v.shape[0] - T + 1):
            a, b = v[:T], v[d : d + T]
            assert not any((np.roll(a, (dy, dx), (1, 2)) == b).all() for dy in range(4) for dx in range(4)), (i, d)


def test_a_cluster_store_of_other_tokens_is_refused(tmp_path, sample_store):
    """Issue 48: the cluster scale runs §5 on DALL-E dVAE tokens (V = 8192); a store of the kit's VQ-VAE tokens is
    refused in one line naming the store and its tokenizer, before any run."""
    stores = {
        "pretrain": {128: str(sample_store)},
        "ucf101": {128: {"train": str(sample_store), "test": str(sample_store)}},
    }
    with pytest.raises(
        VimpacError, match=r"holds tokens of .*the cluster scale runs §5 on DALL-E dVAE tokens \(V = 8192\)"
    ):
        run_experiment("cl_weight", "cluster", out=tmp_path / "exp", stores=stores)
    assert not (tmp_path / "exp" / "pretrain").exists()
