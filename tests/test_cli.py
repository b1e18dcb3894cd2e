"Console scripts: bad input gives one clear line naming the file and a non-zero exit; good input writes a store and"

"a run."

import json, subprocess
import pytest
from vimpac.video import sample_videos


def run_script(bin_dir, script, *args, cwd=None):
    return subprocess.run(
        [str(bin_dir / script), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def error_lines(r):
    "stderr lines that are not progress-bar updates (tqdm also writes to stderr)."
    return [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("tokenize shard")]


def assert_one_line_error(r, script, needle):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = error_lines(r)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{script}: error: ") and needle in lines[0], lines[0]


def test_missing_path(bin_dir, tmp_path):
    missing = tmp_path / "nope.mp4"
    r = run_script(bin_dir, "vimpac-tokenize", missing, "--out", tmp_path / "store")
    assert_one_line_error(r, "vimpac-tokenize", f"{missing}: no such file or directory")
    assert not (tmp_path / "store").exists()


def test_not_a_video(bin_dir, tmp_path):
    bad = tmp_path / "notes.mp4"
    bad.write_bytes(b"this is not a video\n" * 100)
    r = run_script(bin_dir, "vimpac-tokenize", bad, "--out", tmp_path / "store", "--frame-size", "64")
    assert_one_line_error(r, "vimpac-tokenize", f"{bad}: not a readable video")
    assert "0 stored, 0 skipped (already stored), 1 failed" in r.stdout


@pytest.mark.slow
def test_failures_do_not_stop_the_run_and_rerun_skips(bin_dir, tmp_path):
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(sample_videos()[1].read_bytes()[:20000])
    text = tmp_path / "readme.txt.mp4"
    text.write_text("hello")
    listing = tmp_path / "videos.txt"
    listing.write_text("\n".join(map(str, sample_videos())) + "\n# a comment\n")
    args = [listing, truncated, text, "--out", tmp_path / "store", *"--frame-size 64 --workers 2".split()]
    r = run_script(bin_dir, "vimpac-tokenize", *args)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "3 stored, 0 skipped (already stored), 2 failed" in r.stdout
    errs = error_lines(r)
    assert len(errs) == 2 and any(str(truncated) in e for e in errs) and any(str(text) in e for e in errs)
    r2 = run_script(bin_dir, "vimpac-tokenize", *args)
    assert "0 stored, 3 skipped (already stored), 2 failed" in r2.stdout
    from vimpac.store import TokenStore

    store = TokenStore(tmp_path / "store")
    assert len(store) == 3 and len(store.failures()) == 2


def test_empty_folder(bin_dir, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_script(bin_dir, "vimpac-tokenize", empty, "--out", tmp_path / "store")
    assert_one_line_error(r, "vimpac-tokenize", f"{empty}: folder holds no video files")


def test_pretrain_bad_store(bin_dir, tmp_path):
    r = run_script(bin_dir, "vimpac-pretrain", tmp_path, "--out", tmp_path / "run")
    assert_one_line_error(r, "vimpac-pretrain", f"{tmp_path}: not a token store")


def test_tokenize_then_pretrain(bin_dir, tmp_path):
    store = tmp_path / "store"
    r = run_script(bin_dir, "vimpac-tokenize", *sample_videos(), "--out", store, "--frame-size", "64")
    assert r.returncode == 0, r.stderr
    meta = json.loads((store / "meta.json").read_text())
    assert meta["tokenizer"]["name"] == "vimpac-vqvae" and meta["views"] == ["1x-center"]
    from vimpac.store import TokenStore

    assert TokenStore(store).lengths == [11, 20, 8]  # 5.3 s, 10 s and 4 s at 2 FPS
    run_dir = tmp_path / "run"
    r = run_script(bin_dir, "vimpac-pretrain", store, "--out", run_dir, "--steps", "12", "--batch-size", "3")
    assert r.returncode == 0, r.stderr
    assert "mask accuracy" in r.stdout
    for f in "model.safetensors config.json metrics.jsonl eval.json training_curves.png".split():
        assert (run_dir / f).is_file(), f
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 3  # steps 0, 10 and the last
    # where and how fast it ran: the run's summary file, and its line in the output
    import torch

    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["steps"] == 12 and summary["device"] == "cpu" and summary["torch"] == torch.__version__
    assert summary["wall_s"] > 0 and summary["videos_per_s"] > 0 and summary["threads"] >= 1
    line = next(x for x in r.stdout.splitlines() if x.startswith("pre-train: 12 steps in "))
    assert f"torch {torch.__version__}" in line and " CPU thread" in line and "videos/s (median" in line, line


def test_tools_hide_resource_warnings(capsys):
    """A `ResourceWarning` (an event loop a library left to the garbage collector, emitted whenever the collector runs)
    is not a line of a tool's output; other warnings are (`run_main`). It once broke a one-line error in CI."""
    import warnings
    from vimpac.utils import run_main

    def fn():
        warnings.warn("unclosed event loop", ResourceWarning)
        warnings.warn("a real warning")
        return 7

    assert run_main("vimpac-x", fn) == 7
    assert capsys.readouterr().err == "vimpac-x: warning: a real warning\n"
