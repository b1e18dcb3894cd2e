"Console scripts: bad input gives one clear line naming the file and a non-zero exit; good input writes a store and a run."
import json, subprocess
import pytest
from vimpac.video import sample_videos


def run(bin_dir, script, *args, cwd=None):
    return subprocess.run([str(bin_dir / script), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)


def assert_one_line_error(r, script, needle):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{script}: error: ") and needle in lines[0], lines[0]


def test_missing_path(bin_dir, tmp_path):
    missing = tmp_path / "nope.mp4"
    r = run(bin_dir, "vimpac-tokenize", missing, "--out", tmp_path / "store")
    assert_one_line_error(r, "vimpac-tokenize", f"{missing}: no such file or directory")
    assert not (tmp_path / "store").exists()


def test_not_a_video(bin_dir, tmp_path):
    bad = tmp_path / "notes.mp4"
    bad.write_bytes(b"this is not a video\n" * 100)
    r = run(bin_dir, "vimpac-tokenize", sample_videos()[2], bad, "--out", tmp_path / "store", "--tokenizer-steps", "2")
    assert_one_line_error(r, "vimpac-tokenize", f"{bad}: not a readable video")
    assert not (tmp_path / "store" / "meta.json").exists()


def test_empty_folder(bin_dir, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(bin_dir, "vimpac-tokenize", empty, "--out", tmp_path / "store")
    assert_one_line_error(r, "vimpac-tokenize", f"{empty}: folder holds no video files")


def test_pretrain_bad_store(bin_dir, tmp_path):
    r = run(bin_dir, "vimpac-pretrain", tmp_path, "--out", tmp_path / "run")
    assert_one_line_error(r, "vimpac-pretrain", f"{tmp_path}: not a token store")


def test_tokenize_then_pretrain(bin_dir, tmp_path):
    store = tmp_path / "store"
    r = run(bin_dir, "vimpac-tokenize", *sample_videos(), "--out", store, "--size", "64", "--tokenizer-steps", "30")
    assert r.returncode == 0, r.stderr
    meta = json.loads((store / "meta.json").read_text())
    assert [v["frames"] for v in meta["videos"]] == [11, 20, 8]  # 5.3 s, 10 s and 4 s at 2 FPS
    assert (store / "tokenizer" / "model.safetensors").is_file()
    # a second run reuses the saved tokenizer, so the store is identical
    r2 = run(bin_dir, "vimpac-tokenize", *sample_videos(), "--out", tmp_path / "store2", "--size", "64",
             "--tokenizer", store / "tokenizer")
    assert r2.returncode == 0, r2.stderr
    assert (tmp_path / "store2" / "tokens.safetensors").read_bytes() == (store / "tokens.safetensors").read_bytes()
    run_dir = tmp_path / "run"
    r = run(bin_dir, "vimpac-pretrain", store, "--out", run_dir, "--steps", "12", "--batch-size", "3")
    assert r.returncode == 0, r.stderr
    assert "mask accuracy" in r.stdout
    for f in ["model.safetensors", "config.json", "metrics.jsonl", "eval.json", "training_curves.png"]:
        assert (run_dir / f).is_file(), f
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 3  # steps 0, 10 and the last
