"""Bad options are refused before anything is written (issue 10): each ends with exit status 2 and exactly one line,
`PROG: error: ...`, naming the option and what it allows, no traceback, and nothing under --out. Most run in this
process (`tokenize_main(argv)` / `pretrain_main(argv)`); a few run the console scripts as users do."""

import json, os, shutil, subprocess
import pytest
import torch
from vimpac.cli import tokenize_main, pretrain_main
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store
from vimpac.engine import TrainConfig
from vimpac.utils import VimpacError

CPU_ONLY = not torch.cuda.is_available()
NO_GPU_7 = torch.cuda.device_count() < 8
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.fixture(scope="module")
def videos(tmp_path_factory, texture_video):
    d = tmp_path_factory.mktemp("videos")
    return [texture_video(d / f"v{i}.mp4", i, seconds=3, fps=10, size=64) for i in range(3)]


@pytest.fixture(scope="module")
def store(videos, tmp_path_factory):
    "The three videos at 2 FPS, S = 32 (4 x 4 token maps), 6 frames each."
    out = tmp_path_factory.mktemp("store") / "store"
    build_store(videos, load_tokenizer("default"), out, fps=2, frame_size=32, progress=False)
    return out


@pytest.fixture(scope="module")
def finished_run(store, tmp_path_factory):
    "A finished tiny run with a checkpoint, for --init and --resume."
    out = tmp_path_factory.mktemp("run") / "run"
    pretrain_main(
        ["--store", str(store), "--out", str(out), *"--steps 2 --batch-size 3 --device cpu --no-eval".split()]
    )
    return out


def snapshot(path):
    "What is under `path`: {relative file: (size, mtime)}, or None when it does not exist."
    if not path.exists():
        return None
    if path.is_file():
        return {".": (path.stat().st_size, path.stat().st_mtime_ns)}
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def refused(main, argv, capsys):
    "Run `main(argv)` in this process; return its one stderr line after checking exit status 2 and no traceback."
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    return lines[0]


NO_SUCH_GPU = [  # --device naming a GPU that is not here, for both commands
    pytest.param(
        ["--device", "cuda"],
        "argument --device: device 'cuda': no CUDA GPU here",
        marks=pytest.mark.skipif(not CPU_ONLY, reason="a GPU is here"),
    ),
    pytest.param(
        ["--device", "cuda:7"],
        "argument --device: device 'cuda:7': ",
        marks=pytest.mark.skipif(not NO_GPU_7, reason="8 GPUs are here"),
    ),
]


TOKENIZE = [  # (options, what the one line says)
    (["--fps", "0"], "argument --fps: expected a finite number > 0, got '0'"),
    (["--fps", "-2"], "argument --fps: expected a finite number > 0, got '-2'"),
    (["--fps", "nan"], "argument --fps: expected a finite number > 0, got 'nan'"),
    (["--fps", "inf"], "argument --fps: expected a finite number > 0, got 'inf'"),
    (["--frame-size", "0"], "argument --frame-size: expected an integer >= 1, got '0'"),
    (["--frame-size", "-64"], "argument --frame-size: expected an integer >= 1, got '-64'"),
    (["--frame-size", "100"], "frame_size: 100 is not a multiple of the tokenizer's downsample 8 (e.g. 96 or 104)"),
    (["--batch-size", "0"], "argument --batch-size: expected an integer >= 1, got '0'"),
    (["--workers", "-1"], "argument --workers: expected an integer >= 0, got '-1'"),
    ("--num-shards 0 --shard-index 0".split(), "argument --num-shards: expected an integer >= 1, got '0'"),
    ("--num-shards 2 --shard-index 2".split(), "shard_index: expected 0 <= index < num_shards = 2, got 2"),
    (["--device", "foo"], "argument --device: device 'foo': not a device name; expected cpu, cuda or cuda:N"),
    *NO_SUCH_GPU,
]


@pytest.mark.parametrize("options,line", TOKENIZE, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_tokenize_refuses(options, line, videos, tmp_path, capsys):
    out = tmp_path / "store"
    got = refused(tokenize_main, [str(videos[0]), "--out", str(out), *options], capsys)
    assert got.startswith(f"vimpac-tokenize: error: {line}"), got
    assert not out.exists()


PRETRAIN = [
    (["--steps", "0"], "argument --steps: expected an integer >= 1, got '0'"),
    (["--steps", "-3"], "argument --steps: expected an integer >= 1, got '-3'"),
    (["--epochs", "0"], "argument --epochs: expected a finite number > 0, got '0'"),
    (["--lr", "nan"], "argument --lr: expected a finite number > 0, got 'nan'"),
    (["--lr", "0"], "argument --lr: expected a finite number > 0, got '0'"),
    (["--lr", "-0.001"], "argument --lr: expected a finite number > 0, got '-0.001'"),
    (["--dropout", "1"], "argument --dropout: expected a finite number >= 0 and < 1, got '1'"),
    (["--dropout", "-0.1"], "argument --dropout: expected a finite number >= 0 and < 1, got '-0.1'"),
    (["--temperature", "0"], "argument --temperature: expected a finite number > 0, got '0'"),
    (["--log-every", "0"], "argument --log-every: expected an integer >= 1, got '0'"),
    (["--clip-len", "0"], "argument --clip-len: expected an integer >= 1, got '0'"),
    (["--batch-size", "0"], "argument --batch-size: expected an integer >= 2, got '0'"),
    (["--batch-size", "1"], "argument --batch-size: expected an integer >= 2, got '1'"),
    (["--micro-batch-size", "0"], "argument --micro-batch-size: expected an integer >= 1, got '0'"),
    (["--num-workers", "-1"], "argument --num-workers: expected an integer >= 0, got '-1'"),
    (["--save-every", "-1"], "argument --save-every: expected an integer >= 0, got '-1'"),
    (["--keep-last", "-1"], "argument --keep-last: expected an integer >= 1, got '-1' (at least 1 checkpoint is kept"),
    (
        ["--keep-last", "0"],
        "argument --keep-last: expected an integer >= 1, got '0' (at least 1 checkpoint is kept: "
        "a run that keeps none cannot resume)",
    ),  # issue 21: 0 silently kept 1
    (["--d-max", "-1"], "argument --d-max: expected a finite number >= 0, got '-1'"),
    (["--seed", "1.5"], "argument --seed: expected an integer, got '1.5'"),
    (["--device", "foo"], "argument --device: device 'foo': not a device name"),
    *NO_SUCH_GPU,
    (
        "--device cpu --precision fp16".split(),
        "precision fp16: mixed precision needs a CUDA GPU, the device is cpu; use fp32 or auto",
    ),
    (
        "--device cpu --precision bf16".split(),
        "precision bf16: mixed precision needs a CUDA GPU, the device is cpu; use fp32 or auto",
    ),
]


@pytest.mark.parametrize("options,line", PRETRAIN, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_pretrain_refuses(options, line, store, tmp_path, capsys):
    out = tmp_path / "run"
    got = refused(pretrain_main, ["--store", str(store), "--out", str(out), *options], capsys)
    assert got.startswith(f"vimpac-pretrain: error: {line}"), got
    assert not out.exists()


@pytest.mark.parametrize("main,prog", [(tokenize_main, "vimpac-tokenize"), (pretrain_main, "vimpac-pretrain")])
def test_out_is_a_file(main, prog, videos, store, tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("keep me\n")
    first = [str(videos[0])] if main is tokenize_main else ["--store", str(store)]
    got = refused(main, [*first, "--out", str(f)], capsys)
    assert got == f"{prog}: error: argument --out: {f} is a file; expected a folder (new or existing)"
    assert f.read_text() == "keep me\n"
    # below a file: Python's own OSError, caught at the edge as one line
    got = refused(
        main,
        [*first, "--out", str(f / "sub"), *"--device cpu --steps 2 --batch-size 3 --no-eval".split()]
        if main is pretrain_main
        else [*first, "--out", str(f / "sub")],
        capsys,
    )
    assert got.startswith(f"{prog}: error: [Errno") and str(f) in got, got
    assert f.read_text() == "keep me\n"


@pytest.mark.parametrize(
    "options,needle",
    [
        (["--resume", "--preset", "small"], "preset 'small': num_layers 6 (saved: 2)"),
        (["--resume", "--layout", "T,H,W"], "layout 'T,H,W' (saved: 'T,H|W')"),
        (["--resume", "--dropout", "0"], "dropout 0.0 (saved: 0.1)"),
        ("--init RUN --layout TxHxW".split(), "layout 'TxHxW' (saved: 'T,H|W')"),
        ("--init RUN --dropout 0.2".split(), "dropout 0.2 (saved: 0.1)"),
    ],
)
def test_model_options_must_agree_with_the_saved_model(options, needle, finished_run, store, tmp_path, capsys):
    "--preset, --layout and --dropout are not dropped silently with --resume / --init: they must match the saved model."
    if "--resume" in options:
        out = tmp_path / "resumed"
        shutil.copytree(finished_run, out)
    else:
        out = tmp_path / "next"
    before = snapshot(out)
    got = refused(
        pretrain_main,
        [
            "--store",
            str(store),
            "--out",
            str(out),
            *"--steps 4 --batch-size 3 --device cpu".split(),
            *[str(finished_run) if o == "RUN" else o for o in options],
        ],
        capsys,
    )
    assert got.startswith(
        "vimpac-pretrain: error: --resume: the checkpoint"
        if "--resume" in options
        else f"vimpac-pretrain: error: --init: {finished_run} holds another model than asked"
    ), got
    assert needle in got and "leave these options out" in got, got
    assert snapshot(out) == before


def test_refused_run_leaves_no_folder_and_a_correct_run_then_works(videos, tmp_path, capsys):
    "Today's trap: a bad --frame-size wrote meta.json, and the next correct run into that folder was refused."
    out = tmp_path / "store"
    for bad in (["--frame-size", "100"], ["--fps", "inf"]):
        refused(tokenize_main, [*map(str, videos), "--out", str(out), *bad], capsys)
        assert not out.exists()
    tokenize_main([*map(str, videos), "--out", str(out), "--frame-size", "32"])
    assert "3 stored, 0 skipped (already stored), 0 failed" in capsys.readouterr().out
    assert json.loads((out / "meta.json").read_text())["frame_size"] == 32


def test_batch_larger_than_the_store_warns(store, tmp_path, capsys):
    capsys.readouterr()
    pretrain_main(
        [
            "--store",
            str(store),
            "--out",
            str(tmp_path / "run"),
            *"--steps 1 --batch-size 8 --device cpu --no-eval".split(),
        ]
    )
    warns = [l for l in capsys.readouterr().err.splitlines() if "warning" in l]
    assert warns == [
        f"vimpac-pretrain: warning: batch size 8 is larger than the 3 videos of {store}; using 3 "
        "(a batch holds at most one clip pair per video)"
    ]
    # issue 21: pretrain_config.json records the batch size used, not the one asked for
    assert json.loads((tmp_path / "run" / "pretrain_config.json").read_text())["batch_size"] == 3


def test_train_config_refuses_keep_last_0():
    "issue 21: keep_last=0 kept 1 checkpoint without a word; a run that keeps none could not resume."
    with pytest.raises(VimpacError) as e:
        TrainConfig(keep_last=0)
    assert (
        str(e.value)
        == "keep_last: expected an integer >= 1, got 0 (at least 1 checkpoint is kept: a run that keeps none cannot "
        "resume)"
    )
    assert TrainConfig(keep_last=1).keep_last == 1


def test_resume_passes_over_a_corrupt_newest_checkpoint(store, tmp_path, capsys):
    out = tmp_path / "run"
    args = [
        "--store",
        str(store),
        "--out",
        str(out),
        *"--batch-size 3 --device cpu --no-eval --save-every 2 --log-every 1".split(),
    ]
    pretrain_main([*args, "--steps", "4"])
    ckpts = sorted((out / "checkpoints").glob("step-*.pt"))
    assert [c.name for c in ckpts] == ["step-00000002.pt", "step-00000004.pt"]
    ckpts[1].write_bytes(ckpts[1].read_bytes()[:2000])  # the newest, truncated
    capsys.readouterr()
    pretrain_main([*args, "--steps", "6", "--resume"])
    warns = [l for l in capsys.readouterr().err.splitlines() if "warning" in l]
    assert len(warns) == 1 and warns[0].startswith(
        "vimpac-pretrain: warning: --resume: passed over 1 unreadable checkpoint(s)"
    )
    assert f"{ckpts[1]}: not a readable torch file" in warns[0] and warns[0].endswith("resuming from step-00000002.pt")
    assert [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()] == list(range(6))
    # none loads: one error line naming the newest; an empty file says so
    for c in (out / "checkpoints").glob("step-*.pt"):
        c.write_bytes(b"")
    got = refused(pretrain_main, [*args, "--steps", "8", "--resume"], capsys)
    assert got.startswith(
        f"vimpac-pretrain: error: --resume: none of the 3 checkpoint(s) in {out / 'checkpoints'} loads; "
        f"the newest: {out / 'checkpoints' / 'step-00000006.pt'}: empty file (0 bytes)"
    ), got


@pytest.mark.parametrize(
    "script,options,line",
    [
        ("vimpac-tokenize", ["--fps", "inf"], "argument --fps: expected a finite number > 0, got 'inf'"),
        (
            "vimpac-tokenize",
            ["--frame-size", "100"],
            "frame_size: 100 is not a multiple of the tokenizer's downsample 8",
        ),
        ("vimpac-pretrain", ["--lr", "nan"], "argument --lr: expected a finite number > 0, got 'nan'"),
        (
            "vimpac-pretrain",
            ["--keep-last", "0"],
            "argument --keep-last: expected an integer >= 1, got '0' (at least 1",
        ),
        ("vimpac-pretrain", ["--device", "cuda:7"], "argument --device: device 'cuda:7': "),
    ],
)
def test_console_scripts(script, options, line, bin_dir, videos, store, tmp_path):
    if "cuda:7" in options and not NO_GPU_7:
        pytest.skip("8 GPUs are here")
    out = tmp_path / "out"
    first = [str(videos[0])] if script == "vimpac-tokenize" else ["--store", str(store)]
    r = subprocess.run(
        [str(bin_dir / script), *first, "--out", str(out), *options],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: {line}"), r.stderr
    assert not out.exists()
