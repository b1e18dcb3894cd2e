"""Two writers of one token store (issue 21): `vimpac-tokenize` locks the store while it checks and writes its settings,
and its shard for the whole write. A second writer gets one line naming the first (pid and host) and exit 2; on
today's main both ran, and meta.json could end up describing tokens written with other settings."""
import json, os, shutil, socket, subprocess
from vimpac.store import writer_lock, shard_name
from vimpac.video import sample_videos


def test_second_writer_is_refused_and_the_lock_is_not_stale(bin_dir, tmp_path):
    videos = tmp_path / "videos"; videos.mkdir()
    shutil.copy(sample_videos()[0], videos)
    out = tmp_path / "store"
    cmd = [str(bin_dir / "vimpac-tokenize"), str(videos), "--out", str(out), "--fps", "1", "--frame-size", "32", "--device", "cpu"]
    out.mkdir()
    with writer_lock(out / f".{shard_name(0, 1)}.writer", "test"):          # a first writer at work on shard 0
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip().splitlines()[-1]
    assert err == f"vimpac-tokenize: error: {out}: shard 0 of 1 is being written by pid {os.getpid()} on {socket.gethostname()}; " \
                  "wait for it to finish, or use another --out", err
    with writer_lock(out / ".store.writer", "test"):                          # a first writer checking the settings
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and f"{out} is being written by pid {os.getpid()}" in r.stderr, r.stderr
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)     # the holder gone: the lock is free
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "meta.json").read_text())["fps"] == 1

