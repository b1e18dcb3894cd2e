"""Fine-tuning through `vimpac-finetune` (issue 12 §3), as users run it: on a tiny labelled store of a toy whose
classes one frame tells apart, it learns (loss falls, held-out accuracy far above chance); a run killed with
SIGKILL and resumed ends with the same weights, bit for bit; bad input is one line and exit status 2."""

import contextlib, json, os, shutil, signal
from pathlib import Path
import pytest
import torch
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store, TokenStore
from vimpac.model import VimpacConfig, VimpacForVideoClassification
from vimpac.cli import finetune_main
from helpers import COLOURS, killed_at, run_argv, run_command, toy_store, weights

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    "Train: 3 videos per colour in the 6 unflipped views; test: 2 held-out videos per colour, centre view (4 x 4"
    "token maps)."
    d = tmp_path_factory.mktemp("toy")
    return dict(
        train=toy_store(d, "train", 3, 0, views="noflip"),
        test=toy_store(d, "test", 2, 1000, views="center"),
        plain=toy_store(d, "plain", 1, 0, classes=("red", "green"), labelled=False),
        more=toy_store(d, "more", 1, 0, classes=("red", "green"), views="center"),
    )


def ft(store, out, *extra):
    return run_argv(store, out, "--clip-len", 4, *extra)


def one_line_error(capsys, argv):
    with pytest.raises(SystemExit) as e:
        finetune_main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith("vimpac-finetune: error: "), err
    return err[0]


def test_finetune_learns_the_toy(stores, tmp_path, capsys):
    args = ["--steps", 40, "--batch-size", 9, "--micro-batch-size", 3, "--lr", 1e-3, "--log-every", 5]
    finetune_main(ft(stores["train"], tmp_path / "run", "--test-store", stores["test"], *args))
    recs = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train, test = [r for r in recs if "loss" in r], [r["test_acc"] for r in recs if "test_acc" in r]
    assert train[-1]["loss"] < train[0]["loss"] - 0.5 and train[-1]["acc"] > 0.9, train
    assert test == [pytest.approx(test[0])] and test[0] > 0.9  # 6 held-out videos, chance 1/3
    assert json.loads((tmp_path / "run" / "classes.json").read_text()) == list(COLOURS)
    cfg = json.loads((tmp_path / "run" / "finetune_config.json").read_text())
    assert (cfg["batch_size"], cfg["micro_batch_size"], cfg["weight_decay"], cfg["betas"]) == (9, 3, 0.01, [0.9, 0.999])
    assert cfg["fps"] == TokenStore(stores["train"]).fps > 0  # vimpac-predict decodes new videos at this rate
    assert VimpacForVideoClassification.from_pretrained(tmp_path / "run").num_classes == 3
    assert "test accuracy" in capsys.readouterr().out


@pytest.mark.slow
def test_resume_after_sigkill_is_bitwise(bin_dir, stores, tmp_path):
    args = ["--steps", 30, "--batch-size", 6, "--lr", 1e-3, "--save-every", 5, "--keep-last", 2, "--log-every", 1]
    cmd = lambda out, *extra: [str(bin_dir / "vimpac-finetune"), *ft(stores["train"], out, *args, *extra)]
    r = run_command(*cmd(tmp_path / "full"), env=ENV)
    assert r.returncode == 0, r.stderr
    killed = tmp_path / "killed"
    code = killed_at(cmd(killed), killed / "checkpoints" / "step-00000010.pt", ENV)
    assert code == -signal.SIGKILL and not (killed / "model.safetensors").exists(), (
        "the run finished before it could be killed"
    )
    r = run_command(*cmd(killed, "--resume"), env=ENV)
    assert r.returncode == 0, r.stderr
    a, b = weights(tmp_path / "full"), weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [json.loads(l)["step"] for l in (killed / "metrics.jsonl").read_text().splitlines()] == list(range(30))


def test_bad_input_is_one_line(stores, tmp_path, capsys):
    line = one_line_error(capsys, ft(stores["plain"], tmp_path / "a", "--steps", 1))
    assert line.endswith(
        "plain.store: token store has no labels; fine-tuning needs a labelled store (vimpac-tokenize "
        "--dataset NAME --split-dir DIR, or build_store(labels=, classes=))"
    )
    line = one_line_error(capsys, ft(stores["more"], tmp_path / "b", "--test-store", stores["train"], "--steps", 1))
    assert "the test store has 1 class(es) the train store" in line and "['blue']" in line
    VimpacForVideoClassification(VimpacConfig.from_preset("tiny", vocab_size=512, token_map=(4, 4)), 2).save_pretrained(
        tmp_path / "two"
    )
    line = one_line_error(capsys, ft(stores["train"], tmp_path / "c", "--init", tmp_path / "two", "--steps", 1))
    assert (
        "its classification head has 2 classes, the store" in line and "has 3; pass new_head=True (--new-head)" in line
    )
    line = one_line_error(capsys, ft(stores["train"], tmp_path / "d", "--views", "sideways", "--steps", 1))
    assert "views: sideways: not a view of" in line
    line = one_line_error(capsys, ft(stores["train"], tmp_path / "e", "--resume", "--steps", 1))
    assert "--resume: no checkpoint in" in line
    line = one_line_error(capsys, ft(stores["train"], tmp_path / "f", "--init", tmp_path / "two", "--official", "x.pt"))
    assert "not allowed with argument" in line
    # issue 21: a test store of another tokenizer was scored, an empty one reported "test accuracy 0.000"
    other = tmp_path / "other.store"
    shutil.copytree(stores["test"], other)
    meta = json.loads((other / "meta.json").read_text())
    meta["tokenizer"] = dict(name="vimpac-vqvae", hash="0123456789abcdef")
    (other / "meta.json").write_text(json.dumps(meta))
    line = one_line_error(capsys, ft(stores["train"], tmp_path / "h", "--test-store", other, "--steps", 1))
    assert line == (
        f"vimpac-finetune: error: {other}: store was built by tokenizer {meta['tokenizer']}, but the model "
        f"fine-tuned on {stores['train']} was trained on tokens of {TokenStore(stores['train']).tokenizer_id}"
    ), line
    build_store(
        [],
        load_tokenizer("default"),
        tmp_path / "empty.store",
        fps=2,
        frame_size=32,
        labels={},
        classes=list(COLOURS),
        progress=False,
    )
    line = one_line_error(
        capsys, ft(stores["train"], tmp_path / "i", "--test-store", tmp_path / "empty.store", "--steps", 1)
    )
    assert (
        line
        == f"vimpac-finetune: error: {tmp_path / 'empty.store'}: the test store holds no video; there is no accuracy "
        "to measure"
    )
    assert not any((tmp_path / n).exists() for n in "abcdhi")  # nothing written by a refused run
    # a new head is what --new-head asks for: the run goes on
    finetune_main(
        ft(stores["train"], tmp_path / "g", "--init", tmp_path / "two", "--new-head", "--steps", 1, "--batch-size", 3)
    )
    assert VimpacForVideoClassification.from_pretrained(tmp_path / "g").num_classes == 3


def test_config_records_the_batch_size_used_and_the_model_is_written_last(stores, tmp_path, capsys, monkeypatch):
    """issue 21: a batch of 8 over a 2-video store trains on 2 per step; finetune_config.json said 8. The run folder's
    files are written with `model.safetensors` last, so that a folder with it is whole even when the writer was
    killed in between (the experiments reuse a run by that file)."""
    import vimpac.utils as utils

    written, atomic_path = [], utils.atomic_path

    @contextlib.contextmanager
    def recorded(path, *a, **k):
        with atomic_path(path, *a, **k) as tmp:
            yield tmp
        written.append(Path(path).name)

    monkeypatch.setattr(utils, "atomic_path", recorded)
    finetune_main(ft(stores["more"], tmp_path / "run", "--steps", 1, "--batch-size", 8))
    assert json.loads((tmp_path / "run" / "finetune_config.json").read_text())["batch_size"] == 2
    last = [name for name in written if not name.startswith("step-")]
    assert last[-1] == "model.safetensors", written
    assert {"finetune_config.json", "classes.json", "config.json"} <= set(last[:-1]), written


@pytest.mark.slow
def test_two_processes_follow_one(bin_dir, stores, tmp_path):
    "Under torchrun, two gloo processes with a micro-batch of 3 each follow the one-process loss curve (dropout 0)."
    losses, args = [], ["--steps", 6, "--batch-size", 6, "--lr", 1e-3, "--log-every", 1, "--dropout", 0]
    for n in (1, 2):
        out = tmp_path / f"run{n}"
        r = run_command(
            bin_dir / "torchrun",
            "--nproc-per-node",
            n,
            bin_dir / "vimpac-finetune",
            *ft(stores["train"], out, *args),
            env=ENV,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        losses.append([json.loads(l)["loss"] for l in (out / "metrics.jsonl").read_text().splitlines()])
    assert len(losses[0]) == 6 and losses[0] == pytest.approx(losses[1], rel=1e-3)


def test_clip_fps_subsamples_the_store(stores, tmp_path, capsys):
    """issue 23: `--clip-fps 1` on stores tokenized at 2 FPS trains on every other stored frame, records the clip rate
    for evaluation and prediction, and `evaluate` with the run's record takes the same stride (the authors' 16 FPS
    sub-sampling); a store rate that is not a multiple of the clip rate is one line, before anything is written."""
    from vimpac.evaluate import evaluate, multiview_scores, store_videos
    from vimpac.runs import read_run

    line = one_line_error(capsys, ft(stores["train"], tmp_path / "bad", "--clip-fps", 3, "--steps", 1))
    assert f"{stores['train']}: tokens at 2.0 FPS cannot give clips at clip_fps=3" in line, line
    assert not (tmp_path / "bad").exists()
    finetune_main(ft(stores["train"], tmp_path / "run", "--clip-fps", 1, "--steps", 2, "--batch-size", 3))
    rec = json.loads((tmp_path / "run" / "finetune_config.json").read_text())
    assert (rec["clip_fps"], rec["fps"], rec["store_fps"]) == (1, 1, 2.0)
    saved, model = read_run(tmp_path / "run"), VimpacForVideoClassification.from_pretrained(tmp_path / "run")
    assert saved.fps == 1.0
    test = TokenStore(stores["test"])
    ev = evaluate(model, test, "1x2", run=saved, progress=False)
    by_hand = [multiview_scores(model, store_videos(test, ["1x-center"]), "1x2", stride=s) for s in (2, 1)]
    torch.testing.assert_close(ev.scores, by_hand[0])
    assert not torch.allclose(by_hand[0], by_hand[1])  # the stride matters: the check is not vacuous


def test_stop_signal_checkpoints_and_resumes_bitwise(stores, tmp_path, capsys, monkeypatch):
    """Issue 31: fine-tuning shares the engine's stop: SIGUSR1 (SLURM's warning) during step 4 of a run with the
    default checkpoint options writes the checkpoint of 5 steps, `vimpac-finetune` exits with 138 and one line, the
    signal handlers are the ones before the run again, and `--resume` ends bit for bit as the run nothing stopped."""
    import vimpac.engine as E

    args = ["--steps", 10, "--batch-size", 6, "--lr", 1e-3, "--log-every", 1]
    finetune_main(ft(stores["train"], tmp_path / "full", *args))
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    accumulate, calls = E.Engine.accumulate, []

    def signalled(self, micro_batches, loss_fn):
        calls.append(1)
        if len(calls) == 5:
            os.kill(os.getpid(), signal.SIGUSR1)  # as SLURM's --signal=USR1 does, in the middle of a step
        return accumulate(self, micro_batches, loss_fn)

    monkeypatch.setattr(E.Engine, "accumulate", signalled)
    out = tmp_path / "stopped"
    with pytest.raises(SystemExit) as e:
        finetune_main(ft(stores["train"], out, *args))
    ckpt = out / "checkpoints" / "step-00000005.pt"
    assert e.value.code == 138 and [p.name for p in (out / "checkpoints").glob("*.pt")] == [ckpt.name]
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"vimpac-finetune: fine-tuning stopped by SIGUSR1 after step 5; checkpoint {ckpt}; run the same command "
        "with --resume to go on"
    )
    assert {s: signal.getsignal(s) for s in before} == before and not (out / "model.safetensors").exists()
    monkeypatch.setattr(E.Engine, "accumulate", accumulate)
    finetune_main(ft(stores["train"], out, *args, "--resume"))
    a, b = weights(tmp_path / "full"), weights(out)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()] == list(range(10))
