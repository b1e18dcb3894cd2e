"""Pre-training under interruption and distribution (issue 6), through the command-line tool as users run it:
- a run killed with SIGKILL and resumed ends with the same weights, bit for bit, as an uninterrupted run;
- two CPU processes under torchrun (gloo) compute the one-process step (1e-5 relative at step 0) and follow its
curve."""

import json, os, shutil, signal
from pathlib import Path
import pytest
import torch
from vimpac.video import sample_videos
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store
from helpers import killed_at, run, run_argv, weights

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    "Two copies of the three sample videos (6 videos) at 2 FPS, frame size 32 (4 x 4 token maps)."
    d = tmp_path_factory.mktemp("videos")
    for copy in range(2):
        for v in sample_videos():
            shutil.copy(v, d / f"{copy}-{v.name}")
    out = tmp_path_factory.mktemp("store") / "store"
    build_store([d], load_tokenizer("default"), out, fps=2, frame_size=32, progress=False)
    return out


def pretrain_cmd(bin_dir, store, out, *extra):
    return [bin_dir / "vimpac-pretrain", *run_argv(store, out, "--no-eval", "--log-every", 1, *extra)]


def test_resume_after_sigkill_is_bitwise(bin_dir, store, tmp_path):
    args = ["--steps", 200, "--batch-size", 3, "--lr", 2e-3, "--save-every", 10, "--keep-last", 2]
    r = run(*pretrain_cmd(bin_dir, store, tmp_path / "full", *args), env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr

    killed = tmp_path / "killed"
    code = killed_at(pretrain_cmd(bin_dir, store, killed, *args), killed / "checkpoints" / "step-00000020.pt", ENV)
    assert code == -signal.SIGKILL
    assert not (killed / "model.safetensors").exists(), "the run finished before it could be killed"
    assert len(list((killed / "checkpoints").glob("step-*.pt"))) <= 2  # keep-last, no stray temporary files
    assert not list((killed / "checkpoints").glob(".*.tmp"))

    r = run(*pretrain_cmd(bin_dir, store, killed, *args, "--resume"), env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr
    a, b = weights(tmp_path / "full"), weights(killed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    steps = [json.loads(l)["step"] for l in (killed / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(200))  # no step logged twice


def test_resume_errors_are_one_line(bin_dir, store, tmp_path):
    r = run(
        *pretrain_cmd(bin_dir, store, tmp_path / "none", "--steps", 2, "--batch-size", 3, "--resume"),
        env=ENV,
        timeout=600,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("vimpac-pretrain: error: --resume: no checkpoint in")
    (tmp_path / "bad" / "checkpoints").mkdir(parents=True)
    bad = tmp_path / "bad" / "checkpoints" / "step-00000002.pt"
    bad.write_bytes(b"")  # empty: named, one line
    r = run(
        *pretrain_cmd(bin_dir, store, tmp_path / "bad", "--steps", 2, "--batch-size", 3, "--resume"),
        env=ENV,
        timeout=600,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"vimpac-pretrain: error: --resume: none of the 1 checkpoint(s) in {bad.parent} loads; the newest: {bad}: "
        "empty file (0 bytes), expected a vimpac pre-training checkpoint"
    ]


def test_two_processes_follow_one(bin_dir, store, tmp_path):
    args = ["--steps", 8, "--batch-size", 4, "--lr", 3e-4, "--dropout", 0]
    one = run(*pretrain_cmd(bin_dir, store, tmp_path / "one", *args), env=ENV, timeout=600)
    assert one.returncode == 0, one.stderr
    two = run(
        bin_dir / "torchrun",
        "--standalone",
        "--nproc-per-node",
        "2",
        *pretrain_cmd(bin_dir, store, tmp_path / "two", *args),
        env=ENV,
        timeout=600,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    curve = lambda run: [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    c1, c2 = curve(tmp_path / "one"), curve(tmp_path / "two")
    assert [r["step"] for r in c1] == [r["step"] for r in c2] == list(range(8))
    # Step 0 is the same computation split over two processes: every logged value agrees to float summation order
    # (a wrong normalisation of either loss under DDP, or InfoNCE negatives from one process only, shows here: they
    # move a loss by a factor or by log 2). Measured on this project's 2-core machine under load: the InfoNCE loss
    # 1.2e-5 apart (relative), so the bound is 1e-4.
    for k in ("loss", "mask_loss", "cl_loss", "mask_acc", "cl_acc"):
        assert abs(c1[0][k] - c2[0][k]) <= 1e-4 * max(abs(c1[0][k]), 1e-6), (k, c1[0][k], c2[0][k])
    # After it, Adam turns that noise into +-lr moves of parameters whose gradient is tiny, which the CLS head's
    # BatchNorm over 8 clips amplifies: the InfoNCE term drifts apart (2.1% by step 4 on this project's 2-core
    # machine, where the earlier 0.5% bound failed), the token loss much less (within 1e-4 measured).
    for a, b in zip(c1, c2):
        for k, tol in (("mask_loss", 1e-3), ("loss", 1e-2), ("cl_loss", 5e-2)):
            assert abs(a[k] - b[k]) <= tol * abs(a[k]), (a["step"], k, a[k], b[k])
    assert c1[-1]["loss"] < c1[0]["loss"]  # and it is learning


def test_stale_checkpoint_tmp_files_removed_at_start(bin_dir, store, tmp_path):
    """Issue 21: a checkpoint write killed midway left its `.step-*.pt.*.tmp` file in the run's checkpoints folder
    forever. A run that starts or resumes there removes them (one warning), and touches no other file."""
    env = {
        **ENV,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")])
        ),
    }
    out, ck = tmp_path / "run", tmp_path / "run" / "checkpoints"
    ck.mkdir(parents=True)
    stale = [ck / ".step-00000002.pt.k3_x9q2a.tmp", ck / ".step-00000004.pt.abcdefgh.tmp"]
    for p in stale:
        p.write_bytes(b"\0" * 300_000)  # what a killed torch.save leaves
    kept = [
        ck / "notes.tmp",
        ck / ".step-00000002.pt.tmp",
        ck / "step-mine.tmp",
        out / ".step-00000002.pt.abcdefgh.tmp",
    ]
    for p in kept:
        p.write_text("the user's")
    warning = (
        f"vimpac-pretrain: warning: {ck}: removed 2 temporary checkpoint file(s) of 0.6 MB left by writes that were "
        "stopped midway"
    )
    r = run(
        *pretrain_cmd(bin_dir, store, out, "--steps", 2, "--batch-size", 3, "--save-every", 2), env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr
    assert [l for l in r.stderr.splitlines() if "temporary checkpoint" in l] == [warning], r.stderr
    assert not any(p.exists() for p in stale) and all(p.read_text() == "the user's" for p in kept)
    assert [p.name for p in ck.glob("step-*.pt")] == ["step-00000002.pt"] and (out / "model.safetensors").is_file()
    stale[0].write_bytes(b"\0" * 100)  # and when it resumes
    r = run(
        *pretrain_cmd(bin_dir, store, out, "--steps", 4, "--batch-size", 3, "--save-every", 2, "--resume"),
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert f"vimpac-pretrain: warning: {ck}: removed 1 temporary checkpoint file(s) of 0.0 MB" in r.stderr
    assert not stale[0].exists() and all(p.read_text() == "the user's" for p in kept)
    assert sorted(p.name for p in ck.glob("step-*.pt"))[-1] == "step-00000004.pt"
