"""The method learns on real video: on the sample videos, pre-training with both losses lowers the loss, and mask
accuracy on fresh block masks beats always predicting the most frequent code (issue 2, item 6)."""

import numpy as np
import pytest
from vimpac.video import sample_videos
from vimpac.tokenizer import load_tokenizer
from vimpac.store import build_store, TokenStore
from vimpac.pretrain import PretrainConfig, pretrain, evaluate_masking


@pytest.mark.slow
def test_pretraining_learns_on_sample_videos(tmp_path):
    videos = sample_videos()
    tok = load_tokenizer("default")
    build_store(videos, tok, tmp_path / "store", fps=2, frame_size=64, progress=False)
    store = TokenStore(tmp_path / "store", tokenizer=tok)
    cfg = PretrainConfig(steps=80, batch_size=3, lr=2e-3, log_every=10, seed=1)
    before = evaluate_masking(
        pretrain(store, "tiny", PretrainConfig(steps=0, batch_size=3, seed=1), device="cpu", progress=False)[0],
        store,
        cfg,
    )
    model, hist = pretrain(store, "tiny", cfg, device="cpu", progress=False)
    after = evaluate_masking(model, store, cfg)
    first = np.mean([h["loss"] for h in hist[:2]])
    last = np.mean([h["loss"] for h in hist[-3:]])
    assert last < first - 1.0, (first, last)
    assert after.mask_acc > after.majority_acc + 0.05, after
    assert after.mask_acc > before.mask_acc + 0.05, (before, after)
    assert after.masked_tokens > 1000
    assert after.cl_acc > 0.9  # three videos: telling their clips apart is easy once trained
