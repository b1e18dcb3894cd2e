"""Processes left behind (issue 21): `vimpac-tokenize --workers 1` killed with SIGKILL or SIGTERM. On today's main its
DataLoader worker, the forkserver and the resource tracker ran on for minutes (over 30 s measured). Now the workers
watch their parent (`_ParentWatch`) and SIGTERM unwinds the tool (`_run`), stopping the workers before it exits."""

import os, shutil, signal, subprocess, time
import pytest
from vimpac.video import sample_videos


def descendants(root: int) -> list[int]:
    "Every process below `root`, from /proc (ppid links)."
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_workers_die_with_the_tool(bin_dir, tmp_path, sig):
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(6):
        for v in sample_videos():
            shutil.copy(v, videos / f"{i}-{v.name}")
    p = subprocess.Popen(
        [
            str(bin_dir / "vimpac-tokenize"),
            str(videos),
            "--out",
            str(tmp_path / "store"),
            *"--workers 1 --fps 8 --device cpu".split(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(240):  # the resource tracker, the forkserver and the worker are up
            time.sleep(0.25)
            kids = descendants(p.pid)
            if len(kids) >= 3 or p.poll() is not None:
                break
        time.sleep(1)
        kids = descendants(p.pid)
        assert p.poll() is None and len(kids) >= 3, kids
        p.send_signal(sig)
        rc = p.wait(timeout=60)
        at_exit = [k for k in kids if alive(k)]
        # the workers' watch polls every 0.5 s, then the forkserver and the resource tracker see their pipes close;
        # on a loaded 2-core machine that took over 5 s once (the bug this guards against left them for minutes)
        deadline = time.time() + 20
        while time.time() < deadline and any(alive(k) for k in kids):
            time.sleep(0.1)
        assert not [k for k in kids if alive(k)], f"left running 20 s after the tool died: {kids}"
        if sig == signal.SIGTERM:  # an orderly stop: status 143, one line, the worker already gone
            assert rc == 143 and p.stderr.read().strip().endswith("vimpac-tokenize: terminated (SIGTERM)"), rc
            assert len(at_exit) < len(kids), at_exit
    finally:
        for k in descendants(p.pid) + [p.pid]:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
