"""`vimpac-showcase`, the job behind `make demo` (issue 24): its outputs stay under --out (the README's figures change
only with --images, `make figures`), the figure's clip holds no scene cut and masks a token in every frame, and the
console and the figure each say which mask accuracy they give."""

import dataclasses, json
import numpy as np
import pytest
import torch
from vimpac.cli import showcase_main
from vimpac.showcase import ShowcaseSummary, demo_clip, demo_mask
from vimpac.masking import blocks_for_ratio
from vimpac.synthetic import write_video
from vimpac.tokenizer import load_tokenizer


def test_the_figure_clip_avoids_a_scene_cut(tmp_path):
    "A pan over one scene, then a cut to another: the 5-frame clip lies within one scene (either)."
    rng = np.random.default_rng(0)
    big = np.ones((1, 16, 16, 1), np.uint8)  # 16-pixel squares of random colours: a pan changes half the tokens
    a, b = (np.kron(rng.integers(0, 256, (1, 4, 4, 3), dtype=np.uint8), big) for _ in range(2))
    tok = load_tokenizer("default")
    for cut in (6, 3, 8):  # frames [0, cut) show a, the rest b; 12 frames in all
        frames = np.concatenate([np.roll(a if t < cut else b, t, axis=2) for t in range(12)])
        write_video(frames, tmp_path / f"cut{cut}.mp4", fps=2)
        clip, start = demo_clip(tmp_path / f"cut{cut}.mp4", 2.0, 64, 5, tok)
        assert clip.shape == (5, 64, 64, 3) and not start < cut < start + 5, (cut, start)


@pytest.mark.parametrize("seed", range(6))
def test_the_figure_mask_covers_every_frame(seed):
    "The block mask drawn for the figure masks a token in each frame, with appendix B.1's block count."
    mask = demo_mask(5, 16, seed)
    assert mask.shape == (5, 16, 16) and mask.dtype == torch.bool
    assert mask.flatten(1).any(1).all()
    assert 0.03 < mask.float().mean() < 0.5 and blocks_for_ratio(5, 16, 16) >= 1


def test_showcase_writes_under_out_only(tmp_path, monkeypatch, capsys):
    "Run from a clean folder: everything goes under --out, nothing into images/; the console names both accuracies."
    monkeypatch.chdir(tmp_path)
    showcase_main(["--out", "runs/demo", "--steps", "2", "--frame-size", "64", "--device", "cpu"])
    out = capsys.readouterr().out
    assert not (tmp_path / "images").exists()
    run = tmp_path / "runs" / "demo"
    for name in ("reconstruction.png", "training_curves.png", "summary.json", "model/model.safetensors"):
        assert (run / name).is_file(), name
    s = json.loads((run / "summary.json").read_text())
    assert list(s) == [f.name for f in dataclasses.fields(ShowcaseSummary)]  # run_demo's record, as it returns it
    assert s["figure_video"] == "bikes.mp4" and 0 <= s["figure_acc"] <= 1 and 0 < s["figure_masked"] < 1
    assert s["threads"] >= 1 and 0 <= s["mask_acc"] <= 1
    # the console and the figure state the same two accuracies, each with what it measures
    overall = f"{s['mask_acc']:.1%} of {s['masked_tokens']} masked tokens"
    assert f"mask accuracy (masked tokens predicted exactly) over the three videos, fresh block masks: {overall}" in out
    clip = f"{s['figure_acc']:.0%} of those predicted exactly"
    assert f"the figure's clip (bikes.mp4, from frame {s['figure_start']}): {s['figure_masked']:.0%}" in out
    assert clip in out and clip in s["figure_title"], (out, s["figure_title"])
    title = s["figure_title"]
    assert f"fresh block masks, {s['masked_tokens']} masked tokens): {s['mask_acc']:.1%}" in title, title
    assert f"the same cell from the nearest visible frame: {s['copy_acc']:.1%})" in out  # the copy floor beside it
    assert f"the same cell from the nearest visible frame {s['copy_acc']:.1%}" in title, title  # in the figure too
    assert "wrote runs/demo/reconstruction.png" in out
    showcase_main(["--out", "runs/demo", "--steps", "2", "--frame-size", "64", "--images", "figs", "--device", "cpu"])
    assert (tmp_path / "figs" / "reconstruction.png").is_file()  # --images: the README's figures, asked for
