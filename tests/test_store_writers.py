"""Two writers of one token store (issue 21): `vimpac-tokenize` locks the store while it checks and writes its settings,
and its shard for the whole write. A second writer gets one line naming the first (pid and host) and exit 2; on
today's main both ran, and meta.json could end up describing tokens written with other settings."""

import json, os, shutil, socket, subprocess
import pytest
from vimpac.store import shard_name
from vimpac.utils import writer_lock
from vimpac.video import sample_videos
from helpers import error_line, run_command


def test_second_writer_is_refused_and_the_lock_is_not_stale(bin_dir, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    shutil.copy(sample_videos()[0], videos)
    out = tmp_path / "store"
    cmd = [bin_dir / "vimpac-tokenize", videos, "--out", out, "--fps", 1, "--frame-size", 32, "--device", "cpu"]
    out.mkdir()
    with writer_lock(out / f".{shard_name(0, 1)}.writer", "test"):  # a first writer at work on shard 0
        r = run_command(*cmd)
    err = error_line(r)
    assert (
        err == f"vimpac-tokenize: error: {out}: shard 0 of 1 is being written by pid {os.getpid()} on "
        f"{socket.gethostname()}; "
        "wait for it to finish, or use another --out"
    ), err
    with writer_lock(out / ".store.writer", "test"):  # a first writer checking the settings
        r = run_command(*cmd)
    assert r.returncode == 2 and f"{out} is being written by pid {os.getpid()}" in r.stderr, r.stderr
    r = run_command(*cmd)  # the holder gone: the lock is free
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "meta.json").read_text())["fps"] == 1


@pytest.fixture
def small_disk(tmp_path):
    "A 48 KiB tmpfs (root only: the CI runs as root; elsewhere the test skips), unmounted at the end."
    d = tmp_path / "small"
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(d)], capture_output=True).returncode
    ):
        pytest.skip("needs root to mount a small tmpfs (a full disk)")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def test_full_disk_is_one_line_and_the_store_resumes(bin_dir, tmp_path, small_disk):
    """Tokenizing onto a full disk: one line "no space left on ...: N MB needed, M MB free" and exit 2 (it was LMDB's
    22-line "mdb_txn_commit: Input/output error" traceback); with room again, the same command finishes the store."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for v in sample_videos():
        shutil.copy(v, videos)
    cmd = [bin_dir / "vimpac-tokenize", videos, "--out", small_disk / "store"]
    cmd += ["--fps", 8, "--frame-size", 128, "--device", "cpu"]
    err = error_line(r := run_command(*cmd))
    assert (
        err.startswith(f"vimpac-tokenize: error: no space left on {small_disk}/store/shard-00000-of-00001.lmdb: ")
        and " MB needed, " in err
        and "run the same command again to go on" in err
        and "Traceback" not in r.stderr
    ), r.stderr
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    r = run_command(*cmd)
    assert r.returncode == 0 and "3 stored" in r.stdout + r.stderr, r.stderr


def small_store(bin_dir, tmp_path):
    "The three sample videos tokenized by `vimpac-tokenize` at 2 FPS, frame size 32, into tmp_path/store."
    videos = tmp_path / "videos"
    videos.mkdir()
    for v in sample_videos():
        shutil.copy(v, videos)
    out = tmp_path / "store"
    r = run_command(
        bin_dir / "vimpac-tokenize", videos, "--out", out, "--fps", 2, "--frame-size", 32, "--device", "cpu"
    )
    assert r.returncode == 0, r.stderr
    return out


CPU_RUN = ["--batch-size", "2", "--device", "cpu", "--no-eval"]


def pretrain(bin_dir, store, out, *argv):
    "`vimpac-pretrain` on `store` into `out` on the CPU, batch size 2, no evaluation, with the options `argv`."
    return run_command(bin_dir / "vimpac-pretrain", "--store", store, "--out", out, *argv, *CPU_RUN)


def test_out_of_range_tokens_name_the_shard_and_video(bin_dir, tmp_path):
    """A store whose tokens lie outside its vocabulary (damaged, or edited by hand) is named by shard, video and view
    when read; on today's main pre-training failed in the model ("tokens: ids ... outside the vocabulary"), no file
    named."""
    import lmdb, numpy as np

    out = small_store(bin_dir, tmp_path)
    shard = out / "shard-00000-of-00001.lmdb"
    with lmdb.open(str(shard)) as env, env.begin(write=True) as txn:  # every token of every video: 30000
        for k, v in list(txn.cursor()):
            if k.startswith(b"v/"):
                txn.put(k, np.full(len(v) // 2, 30000, np.int16).tobytes())
    err = error_line(pretrain(bin_dir, out, tmp_path / "run", "--steps", 1))
    assert (
        err.startswith(f"vimpac-pretrain: error: {shard}: video ")
        and "token ids 30000..30000 outside the store's vocabulary 0.." in err
    ), err


def test_full_disk_during_a_checkpoint_is_one_line(bin_dir, tmp_path, small_disk):
    """A checkpoint that does not fit: one line "no space left on RUN/checkpoints: ..." and exit 2 (it was torch's
    "RuntimeError ... inline_container.cc" traceback), and no partial file left behind."""
    store = small_store(bin_dir, tmp_path)
    out = small_disk / "run"
    err = error_line(r := pretrain(bin_dir, store, out, "--steps", 2, "--save-every", 1))
    assert (
        err.startswith(f"vimpac-pretrain: error: no space left on {out}/checkpoints: ")
        and " MB needed, " in err
        and "--resume" in err
        and "Traceback" not in r.stderr
    ), r.stderr
    assert not list((out / "checkpoints").glob("*.tmp")), list((out / "checkpoints").iterdir())
