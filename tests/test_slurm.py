"""The SLURM examples (`examples/slurm/*.sbatch`) run as a cluster would run them, with `srun`, `torchrun`, `scontrol`
and the kit's console scripts replaced by stubs that record their command lines: every command a script starts must
parse with the kit's own option parser, array tasks must split the work as their comments say, a re-submitted job
must resume, the stores are tokenized with DALL-E's dVAE as the paper's, and SLURM's warning signal before the time
limit (`--signal=B:USR1@120`, sent to the batch shell only) reaches the training run (issue 31)."""

import json, os, shlex, signal, subprocess, sys, time, tomllib
import pytest
from pathlib import Path
from helpers import parser_of

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "examples" / "slurm"
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
WRITE = 'import json, os, sys; open(os.environ["STUB_LOG"], "a").write(json.dumps(sys.argv[1:]) + "\\n")'
RECORD = f"exec \"{{python}}\" -c '{WRITE}' "
STUBS = {
    "srun": 'exec "$@"',
    "scontrol": "echo node-a; echo node-b",
    # torchrun's own options (--name=value or --name value) up to the script it starts, then the script's argv
    "torchrun": 'while [ "${1#--}" != "$1" ]; do\n'
    + 'case "$1" in *=*) shift;; --standalone) shift;; *) shift 2;; esac\ndone\n'
    + RECORD
    + '"$(basename "$1")" "${@:2}"',
}


def run_script(name: str, args: list, tmp: Path, code: int = 0, **env) -> list[list[str]]:
    """Run `examples/slurm/NAME` with `args` in the folder `tmp` under stubs; returns the commands it started (its exit
    status must be `code`)."""
    p = start_script(name, args, tmp, **env)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    log = tmp / "commands.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def start_script(name: str, args: list, tmp: Path, stubs: dict | None = None, **env) -> subprocess.Popen:
    "Start `examples/slurm/NAME` with `args` in the folder `tmp` under stubs (`stubs`: tool: bash body, replacing)."
    stubs_dir = tmp / "stubs"
    stubs_dir.mkdir(exist_ok=True)
    tools = {**STUBS, **{s: RECORD + '"$(basename "$0")" "$@"' for s in SCRIPTS}, **(stubs or {})}
    for tool, body in tools.items():
        (stubs_dir / tool).write_text("#!/bin/bash\n" + body.replace("{python}", sys.executable) + "\n")
        (stubs_dir / tool).chmod(0o755)
    (tmp / ".venv" / "bin").mkdir(parents=True, exist_ok=True)
    (tmp / ".venv" / "bin" / "activate").write_text(f'export PATH="{stubs_dir}:$PATH"\n')
    log = tmp / "commands.jsonl"
    log.unlink(missing_ok=True)
    slurm = dict(SLURM_JOB_ID="7", SLURM_JOB_NODELIST="node-[a-b]", SLURM_NNODES="2", SLURM_GPUS_ON_NODE="8")
    env = {**os.environ, **slurm, "STUB_LOG": str(log), "PATH": f"{stubs_dir}:{os.environ['PATH']}", **env}
    return subprocess.Popen(
        ["bash", str(SLURM / name), *args], cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def parsed(command: list[str]):
    "The command's options as the console script it names parses them (a bad option fails the test)."
    return parser_of(SCRIPTS[command[0]]).parse_args(command[1:])


def test_every_example_is_valid_bash_and_documented():
    "Each script parses as bash and its header shows how to submit it."
    scripts = sorted(SLURM.glob("*.sbatch"))
    assert {s.name for s in scripts} >= {"tokenize.sbatch", "pretrain.sbatch", "finetune.sbatch", "evaluate.sbatch"}
    for s in scripts:
        assert subprocess.run(["bash", "-n", str(s)]).returncode == 0, s.name
        assert "sbatch " in s.read_text() and f"examples/slurm/{s.name}" in s.read_text(), s.name


DALLE = "dalle:dalle/encoder.pkl,dalle/decoder.pkl"  # the official files, in dalle/ where the job is submitted


def test_tokenize_array_task_writes_its_shard(tmp_path):
    "Array task 3 of 0-15 writes shard 3 of 16; options after OUT reach vimpac-tokenize."
    (tmp_path / "dalle").mkdir()
    (tmp_path / "dalle" / "encoder.pkl").write_bytes(b"")  # the stub tokenizes nothing: its presence is what counts
    array = dict(SLURM_ARRAY_TASK_ID="3", SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_COUNT="16")
    (cmd,) = run_script("tokenize.sbatch", ["videos.txt", "runs/store128"], tmp_path, **array)
    a = parsed(cmd)
    assert (a.inputs, a.out, a.num_shards, a.shard_index, a.dataset) == (["videos.txt"], "runs/store128", 16, 3, None)
    extra = ["--dataset", "ucf101", "--split-dir", "split"]
    (cmd,) = run_script("tokenize.sbatch", ["UCF-101", "runs/ucf101", *extra], tmp_path, **array)
    a = parsed(cmd)
    assert (a.dataset, a.split_dir, a.shard_index) == ("ucf101", "split", 3)
    one = dict(SLURM_ARRAY_TASK_ID="5", SLURM_ARRAY_TASK_MIN="5", SLURM_ARRAY_TASK_COUNT="1")  # --array=5
    assert parsed(run_script("tokenize.sbatch", ["v", "o"], tmp_path, **one)[0]).shard_index == 0


def test_tokenize_uses_the_dalle_dvae(tmp_path):
    """Issue 31: the stores are tokenized with DALL-E's dVAE (the paper's tokens, §3.1) from the official files in
    dalle/ or the folder DALLE; missing files stop the task with one line before anything runs; a --tokenizer after OUT
    replaces it. The commands of stores.yaml's header use it too."""
    p = start_script("tokenize.sbatch", ["videos.txt", "runs/store128"], tmp_path)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and not (tmp_path / "commands.jsonl").exists()
    assert err.strip().splitlines() == [
        "tokenize.sbatch: dalle/encoder.pkl not found: download DALL-E's encoder.pkl and decoder.pkl into dalle "
        "(or set DALLE to their folder, or pass --tokenizer)"
    ]
    (tmp_path / "dalle").mkdir()
    (tmp_path / "dalle" / "encoder.pkl").write_bytes(b"")
    assert parsed(run_script("tokenize.sbatch", ["v", "o"], tmp_path)[0]).tokenizer == DALLE
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "encoder.pkl").write_bytes(b"")
    a = parsed(run_script("tokenize.sbatch", ["v", "o"], tmp_path, DALLE=str(tmp_path / "w"))[0])
    assert a.tokenizer == f"dalle:{tmp_path}/w/encoder.pkl,{tmp_path}/w/decoder.pkl"
    (tmp_path / "dalle" / "encoder.pkl").unlink()
    assert (
        parsed(run_script("tokenize.sbatch", ["v", "o", "--tokenizer", "default"], tmp_path)[0]).tokenizer == "default"
    )
    header = (SLURM / "stores.yaml").read_text().split("\nstores:")[0]
    lines = " ".join(l.lstrip("# ").rstrip() for l in header.splitlines()).replace("\\ ", "")
    commands = [shlex.split("vimpac-tokenize " + c.strip()) for c in lines.split("vimpac-tokenize ")[1:]]
    assert len(commands) == 2 and all(parsed(c).tokenizer == DALLE for c in commands), commands


def test_pretrain_runs_torchrun_per_node_and_resumes(tmp_path):
    "One torchrun per node through srun, rendezvous on the first node; --resume once a checkpoint exists."
    (cmd,) = run_script("pretrain.sbatch", ["runs/store128", "runs/small"], tmp_path)
    a = parsed(cmd)
    assert (cmd[0], a.store, a.out, a.preset, a.batch_size, a.resume) == (
        "vimpac-pretrain",
        "runs/store128",
        "runs/small",
        "small",
        1024,
        False,
    )
    (tmp_path / "runs/small/checkpoints").mkdir(parents=True)
    (tmp_path / "runs/small/checkpoints/step-00001000.pt").write_bytes(b"")
    assert parsed(run_script("pretrain.sbatch", ["runs/store128", "runs/small"], tmp_path)[0]).resume


# the authors' scripts/pretrain/small.sh (§5's analyses) and large.sh (§4's final model), as data: their lr, warm-up,
# epochs, CLS head (--nce-proj-layers, --nce-proj-hid-dim), model, T, S and AdamW's betas
AUTHORS_SCRIPTS = {
    "pretrain.sbatch": dict(
        preset="small", lr=1e-3, warmup_ratio=0.1, epochs=10, cls_head_layers=2, cls_head_hidden=2048, clip_len=5
    ),
    "pretrain_large.sbatch": dict(
        preset="large_half", lr=3e-4, warmup_ratio=0.05, epochs=100, cls_head_layers=3, cls_head_hidden=4096, clip_len=5
    ),
}


@pytest.mark.parametrize("script", sorted(AUTHORS_SCRIPTS))
def test_pretrain_scripts_run_the_authors_settings(tmp_path, script):
    """Issue 48: pretrain.sbatch ran --steps 100000 --lr 1e-3 with the default 5% warm-up and 3 x 4096 CLS head,
    neither small.sh (10 epochs, 1e-3, 10%, 2 x 2048) nor large.sh (100 epochs, 3e-4, 5%, 3 x 4096). Each script now
    runs one of them, batch 1024, betas (0.9, 0.98), gradient clipping 1."""
    (cmd,) = run_script(script, ["runs/store128", "runs/x"], tmp_path)
    a = parsed(cmd)
    assert {k: getattr(a, k) for k in AUTHORS_SCRIPTS[script]} == AUTHORS_SCRIPTS[script]
    assert (a.batch_size, tuple(a.betas), a.grad_clip) == (1024, (0.9, 0.98), 1.0) and "--steps" not in cmd


def test_finetune_then_evaluate_with_the_dataset_preset(tmp_path):
    "Fine-tune from a run with Table 12's preset, then evaluate with the dataset's views; a re-submission resumes."
    args = ["ucf101", "runs/ucf101", "runs/small", "runs/ft"]
    ft, ev = run_script("finetune.sbatch", args, tmp_path)
    a, e = parsed(ft), parsed(ev)
    assert (ft[0], a.dataset, a.init, a.resume, a.store, a.test_store) == (
        "vimpac-finetune",
        "ucf101",
        "runs/small",
        False,
        "runs/ucf101/train",
        "runs/ucf101/test",
    )
    assert (ev[0], e.checkpoint, e.dataset, e.test, e.out) == (
        "vimpac-evaluate",
        "runs/ft",
        "ucf101",
        "runs/ucf101/test",
        "runs/ft/eval",
    )
    (tmp_path / "runs/ft/checkpoints").mkdir(parents=True)
    (tmp_path / "runs/ft/checkpoints/step-00000500.pt").write_bytes(b"")
    a = parsed(run_script("finetune.sbatch", args, tmp_path)[0])
    assert a.resume and a.init is None  # the run continues; --init would be refused beside --resume's saved model
    ft, _ = run_script("finetune.sbatch", ["ssv2", "s", "-", "o2", "--official", "c.pt"], tmp_path)
    a = parsed(ft)
    assert (a.official, a.init, a.dataset) == ("c.pt", None, "ssv2")  # "-": no run to start from, options instead


def test_evaluate_a_classifier_or_a_probe(tmp_path):
    "DATASET: multi-view evaluation with its views; linear / knn: a probe fitted on the train store."
    (cmd,) = run_script("evaluate.sbatch", ["runs/ft", "runs/ucf101", "ssv2", "runs/ft/eval"], tmp_path)
    a = parsed(cmd)
    assert (a.dataset, a.probe, a.train, a.out) == ("ssv2", None, "runs/ucf101/train", "runs/ft/eval")
    (cmd,) = run_script("evaluate.sbatch", ["runs/small", "runs/ucf101", "knn", "runs/knn", "--k", "10"], tmp_path)
    a = parsed(cmd)
    assert (a.probe, a.dataset, a.k) == ("knn", None, 10)


def test_experiment_array_task_runs_its_row(tmp_path):
    "An array task runs one row of the table at the cluster scale on this node's GPUs; the task without an index none."
    args = ["masking_ratio", "runs/experiments", "stores.yaml", "0", "1"]
    (cmd,) = run_script("experiment.sbatch", args, tmp_path, SLURM_ARRAY_TASK_ID="4")
    a = parsed(cmd)
    assert (a.names, a.scale, a.rows, a.seeds, a.f) == (["masking_ratio"], "cluster", ["4"], [0, 1], "stores.yaml")
    assert a.p == [["setup", '{"gpus": 8}']]
    (cmd,) = run_script("experiment.sbatch", args, tmp_path)
    assert parsed(cmd).rows is None


# a torchrun that runs until a signal: it records USR1 (and the signals torchrun would pass on) and exits as the
# training run does after its checkpoint, with 128 + 10
WAITING_TORCHRUN = (
    'trap \'echo "USR1 $TORCHELASTIC_SIGNALS_TO_HANDLE" >> "$STUB_LOG.signals"; exit 138\' USR1\n'
    'touch "$STUB_LOG.started"\n'
    "while true; do sleep 0.05; done"
)


@pytest.mark.parametrize(
    "name,args",
    [
        ("pretrain.sbatch", ["runs/store128", "runs/small"]),
        ("finetune.sbatch", ["ucf101", "runs/ucf101", "runs/small", "runs/ft"]),
    ],
)
def test_slurm_warning_signal_reaches_the_run(tmp_path, name, args):
    """Issue 31: the job asks SLURM for SIGUSR1 two minutes before its time limit, sent to the batch shell only
    (`--signal=B:USR1@120`); the shell passes it on to torchrun (through srun for pre-training), which is told to pass
    it on to its workers; the job ends with the run's status (138), and fine-tuning's evaluation does not run."""
    assert "#SBATCH --signal=B:USR1@120\n" in (SLURM / name).read_text()
    p = start_script(name, args, tmp_path, stubs={"torchrun": WAITING_TORCHRUN})
    log = tmp_path / "commands.jsonl"
    started, deadline = Path(f"{log}.started"), time.time() + 30
    while not started.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert started.exists(), p.communicate()[1]
    os.kill(p.pid, signal.SIGUSR1)  # what SLURM does to the batch shell
    _, err = p.communicate(timeout=30)
    assert p.returncode == 138, err
    (got,) = Path(f"{log}.signals").read_text().splitlines()
    assert got.startswith("USR1 ") and "SIGUSR1" in got.split()[1].split(",")
    assert not log.exists()  # no vimpac-evaluate after a stopped fine-tuning run
