"""`vimpac-tokenize VIDEO_ROOT --dataset NAME --split-dir DIR --split N`: tiny datasets in the official layouts (a
`folder` one, a `ucf101` one with CRLF split files and a missing video, an `ssv2` one) through the command line, and
the labelled stores they give (classes, labels, views, frame rate), read back by `LabelledClipDataset`."""

import contextlib, io, json, os
from pathlib import Path
import numpy as np
import pytest
import torch
from vimpac.cli import tokenize_main
from vimpac.data import LabelledClipDataset
from vimpac.store import TokenStore
from vimpac.tokenizer import VQVAE, VQVAEConfig
from vimpac.video import VIEW_SETS
from helpers import run_command

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    "An untrained tiny VQ-VAE saved as a folder (the stores do not care how good it is)."
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("tok")
    VQVAE(VQVAEConfig(vocab_size=64, channels=(8, 16, 16), code_dim=8, num_res_blocks=1)).save_pretrained(d)
    return str(d)


def cli(argv):
    "(exit status, stdout, stderr) of vimpac-tokenize run in this process."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            tokenize_main([str(a) for a in argv])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def tiny(tokenizer, views=None):
    "The options of every store written here: frame size 32, the tiny `tokenizer`, the CPU (and `--views views`)."
    return ["--frame-size", 32, "--tokenizer", tokenizer, "--device", "cpu", *(["--views", views] if views else [])]


def by_name(store):
    "Video name (relative to the video root) -> label."
    return {store.record(k)["name"]: y for k, y in zip(store.keys(), store.labels)}


def test_folder_dataset(tmp_path, tokenizer, texture_video):
    root = tmp_path / "ds"
    for i, n in enumerate(
        [
            "train/run/a.mp4",
            "train/run/b.mp4",
            "train/jump/a.mp4",
            "train/jump/c.mp4",
            "test/jump/d.mp4",
            "test/run/e.mp4",
        ]
    ):
        texture_video(root / n, i)
    args = [root, "--dataset", "folder", "--out", tmp_path / "out", *tiny(tokenizer)]
    code, out, err = cli(args)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "folder split 1: 4 train and 2 test videos, 2 classes"
    assert lines[1].startswith(f"{tmp_path / 'out' / 'train'}: 4 stored") and lines[2].startswith(
        f"{tmp_path / 'out' / 'test'}: 2 stored"
    )
    train, test = TokenStore(tmp_path / "out" / "train"), TokenStore(tmp_path / "out" / "test")
    assert train.classes == test.classes == ["jump", "run"]
    # keys relative to the video root: train/jump/a.mp4 and train/run/a.mp4 stay apart
    assert by_name(train) == {"train/jump/a.mp4": 0, "train/jump/c.mp4": 0, "train/run/a.mp4": 1, "train/run/b.mp4": 1}
    assert by_name(test) == {"test/jump/d.mp4": 0, "test/run/e.mp4": 1}
    assert train.views == VIEW_SETS["all"] and len(train.views) == 12 and train.fps == 2.0
    assert train.token_map == (4, 4) and train.record(train.keys()[0])["frames"] == 4
    meta = json.loads((tmp_path / "out" / "train" / "meta.json").read_text())
    assert meta["classes"] == ["jump", "run"] and meta["format"] == "vimpac-token-store/3"
    ds = LabelledClipDataset(train, clip_len=3, seed=1)
    x, y = ds[2]
    assert x.shape == (3, 4, 4) and x.dtype == torch.int64 and y == train.labels[2]
    view, start = ds.choice(2)
    assert torch.equal(x, torch.from_numpy(train.clip(train.keys()[2], start, 3, view).astype(np.int64)))
    assert len({ds.choice(0, e)[0] for e in range(60)}) >= 10  # the 12 views are drawn
    # a re-run skips what is stored
    code, out, err = cli(args)
    assert code == 0 and "0 stored, 4 skipped" in out.splitlines()[1]


def test_ucf101_dataset_subprocess(tmp_path, tokenizer, bin_dir, texture_video):
    root, lists = tmp_path / "UCF-101", tmp_path / "ucfTrainTestlist"
    lists.mkdir()
    (lists / "classInd.txt").write_bytes(b"1 ApplyEyeMakeup\r\n2 YoYo\r\n")
    (lists / "trainlist01.txt").write_bytes(
        b"ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\r\nYoYo/v_YoYo_g08_c01.avi 2\r\n"
        b"YoYo/v_YoYo_g09_c01.avi 2\r\nYoYo/v_YoYo_g10_c01.avi 2\r\n\r\n"
    )
    (lists / "testlist01.txt").write_bytes(
        b"ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\r\nYoYo/v_YoYo_g01_c01.avi\r\n"
    )
    for i, n in enumerate(
        [
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi",
            "YoYo/v_YoYo_g08_c01.avi",
            "YoYo/v_YoYo_g09_c01.avi",
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi",
            "YoYo/v_YoYo_g01_c01.avi",
        ]
    ):
        texture_video(root / n, 10 + i)  # v_YoYo_g10_c01.avi is listed but missing
    ucf101 = [bin_dir / "vimpac-tokenize", root, "--dataset", "ucf101", "--split-dir", lists]
    r = run_command(*ucf101, "--split", 1, "--out", tmp_path / "ucf", *tiny(tokenizer, "center"))
    assert r.returncode == 0, r.stderr
    preset = r.stdout.splitlines()[:4]  # the preset's values first, the frame size and views given
    assert preset == [
        "vimpac-tokenize: dataset preset ucf101 (Table 12, §4.2); an option given replaces its value",
        "  fps = 16.0 (the authors' 16 FPS tokens, sub-sampled to §4.2's 2 FPS in fine-tuning)",
        "  frame_size = 32 (given; the preset's is 256, §4.2)",
        "  views = center (given; the preset's is all, Table 12: 2 sizes x 3 crops x flip)",
    ]
    assert r.stdout.splitlines()[4] == (
        f"ucf101 split 1: 3 train and 2 test videos, 2 classes; 1 listed but not found "
        f"under {root} (1 train, 0 test; e.g. {root / 'YoYo/v_YoYo_g10_c01.avi'})"
    )
    train, test = TokenStore(tmp_path / "ucf" / "train"), TokenStore(tmp_path / "ucf" / "test")
    assert train.classes == test.classes == ["ApplyEyeMakeup", "YoYo"]
    assert by_name(train) == {
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi": 0,
        "YoYo/v_YoYo_g08_c01.avi": 1,
        "YoYo/v_YoYo_g09_c01.avi": 1,
    }
    assert by_name(test) == {"ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi": 0, "YoYo/v_YoYo_g01_c01.avi": 1}
    assert train.fps == 16.0 and train.views == ["1x-center"]  # the authors' 16 FPS (issue 31); --views given
    # a split number UCF101 lacks: one line, exit 2, nothing written
    r = run_command(*ucf101, "--split", 5, "--out", tmp_path / "ucf5")
    assert (r.returncode, r.stderr) == (2, "vimpac-tokenize: error: split: ucf101 has splits 1 to 3, got 5\n")
    assert not (tmp_path / "ucf5").exists()


def test_ssv2_defaults(tmp_path, tokenizer, texture_video):
    root, d = tmp_path / "videos", tmp_path / "labels"
    d.mkdir()
    (d / "labels.json").write_text(
        json.dumps({"Pushing something from left to right": "0", "Pushing something from right to left": "1"})
    )
    (d / "train.json").write_text(
        json.dumps(
            [
                {
                    "id": "1",
                    "label": "pushing a pen from left to right",
                    "template": "Pushing [something] from left to right",
                    "placeholders": ["a pen"],
                },
                {
                    "id": "2",
                    "label": "pushing a cup from right to left",
                    "template": "Pushing [something] from right to left",
                    "placeholders": ["a cup"],
                },
            ]
        )
    )
    (d / "validation.json").write_text(
        json.dumps(
            [
                {
                    "id": "3",
                    "label": "pushing a box from right to left",
                    "template": "Pushing [something] from right to left",
                    "placeholders": ["a box"],
                }
            ]
        )
    )
    for i in (1, 2, 3):
        texture_video(root / f"{i}.mp4", i)  # read_split takes .mp4 where .webm is absent
    code, out, err = cli([root, "--dataset", "ssv2", "--split-dir", d, "--out", tmp_path / "out", *tiny(tokenizer)])
    assert code == 0, err
    train = TokenStore(tmp_path / "out" / "train")
    assert train.fps == 16.0 and train.views == VIEW_SETS["noflip"] and len(train.views) == 6  # 16 FPS, no flips
    assert by_name(train) == {"1.mp4": 0, "2.mp4": 1} and by_name(TokenStore(tmp_path / "out" / "test")) == {"3.mp4": 1}
    assert train.record(train.keys()[0])["frames"] == 32  # 2 s at 16 FPS


@pytest.mark.slow
def test_symlinked_folders_followed_and_loops_warned(tmp_path, tokenizer, bin_dir, texture_video):
    """Issue 21: class sub-folders that are symbolic links to folders elsewhere (how a dataset is assembled on a shared
    filesystem) were skipped by the folder scan (3 of 9 videos stored, exit 0; all linked: "folder holds no video
    files"). They are followed, by `vimpac-tokenize FOLDER` and `--dataset folder`; a link back to a folder that
    contains
    it (a loop) is skipped with one warning, and the scan ends."""
    real = tmp_path / "real"
    for c in "abc":
        for i in range(3):
            texture_video(real / c / f"{c}{i}.mp4", ord(c) + i, seconds=1, size=32)
    ds, linked = tmp_path / "ds", tmp_path / "linked"
    (ds / "a").mkdir(parents=True)
    for i in range(3):
        (real / "a" / f"a{i}.mp4").rename(ds / "a" / f"a{i}.mp4")  # one real class folder, two links
    (ds / "b").symlink_to(real / "b")
    (ds / "c").symlink_to(real / "c")
    (ds / "a" / "loop").symlink_to(ds)  # a loop inside the real one
    linked.mkdir()
    (linked / "b").symlink_to(real / "b")
    (linked / "c").symlink_to(real / "c")  # every class folder a link
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }

    def tokenize(*argv):
        return run_command(bin_dir / "vimpac-tokenize", *argv, *tiny(tokenizer, "center"), env=env)

    warning = (
        f"vimpac-tokenize: warning: {ds / 'a' / 'loop'}: symbolic link to {ds}, a folder it lies in (a loop); "
        "not followed"
    )
    r = tokenize(ds, "--out", tmp_path / "s1")
    assert r.returncode == 0, r.stderr
    assert f"{tmp_path / 's1'}: 9 stored, 0 skipped (already stored), 0 failed" in r.stdout
    assert [l for l in r.stderr.splitlines() if "warning" in l] == [warning], r.stderr
    names = sorted(TokenStore(tmp_path / "s1").record(k)["name"] for k in TokenStore(tmp_path / "s1").keys())
    assert names == [f"{c}/{c}{i}.mp4" for c in "abc" for i in range(3)]  # named under the links' paths
    r = tokenize(linked, "--out", tmp_path / "s2")
    assert r.returncode == 0 and f"{tmp_path / 's2'}: 6 stored, 0 skipped" in r.stdout, r.stderr
    for i in range(2):
        texture_video(real / "more" / f"m{i}.mp4", 50 + i, seconds=1, size=32)
    (real / "b" / "deeper").symlink_to(real / "more")  # a link inside a linked class folder
    r = tokenize(ds, "--dataset", "folder", "--out", tmp_path / "s3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "folder split 1: 11 train and 0 test videos, 3 classes"
    assert by_name(TokenStore(tmp_path / "s3" / "train")) == {
        **{f"a/a{i}.mp4": 0 for i in range(3)},
        **{f"b/b{i}.mp4": 1 for i in range(3)},
        **{f"b/deeper/m{i}.mp4": 1 for i in range(2)},
        **{f"c/c{i}.mp4": 2 for i in range(3)},
    }  # named under the links
