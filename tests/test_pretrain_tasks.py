"""The two pre-training switches of the paper's analyses (§5.2): `mask_then_predict` (MP off: pure CL pre-training,
L = α·γ·L_cl; Table 4 tab:non_pretraining, Table 16 tab:loss_ratio row α = ∞*) and `cl_mask` (CL-Mask off: the
InfoNCE features of the unmasked clips; Table 9 tab:mask_in_cl). Each path is checked on one micro-batch against a
direct forward of the model and InfoNCE written out by hand, then through `pretrain` itself; the defaults are the
paper's tied input, which the other pre-training tests keep bit for bit."""

import json, math, os
import pytest
import torch
import vimpac.pretrain as P
from vimpac.data import ClipPairDataset
from vimpac.engine import Engine, start_run
from vimpac.model import VimpacConfig, VimpacForPreTraining
from vimpac.pretrain import PretrainConfig, evaluate_masking, pretrain
from vimpac.utils import VimpacError
from helpers import error_line, run_argv, run_command
from test_pretrain_knobs import TokenVideos, grouped_reference

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def first_micro_batch(cfg: PretrainConfig, monkeypatch=None):
    """The first micro-batch of 4 clip pairs of `TokenVideos` as the loop builds it (`MaskedPairs`, `fetch_step`),
    a tiny model without dropout (so a direct forward repeats the loop's), its `Engine`, and the loss and stats of
    `micro_batch_loss`; with `monkeypatch`, also the features the loop hands to InfoNCE."""
    c = VimpacConfig.from_preset("tiny", vocab_size=50, token_map=(8, 8), max_clip_len=cfg.clip_len, dropout=0.0)
    torch.manual_seed(0)
    model = VimpacForPreTraining(c)
    data = ClipPairDataset(TokenVideos(), cfg.clip_len, c.pad_id, cfg.seed, masking=cfg.mask_spec())
    batch = P.MaskedPairs(c, cfg)([data[(0, i)] for i in range(4)])
    run = start_run(None, False, "cpu", "fp32")
    mbs, _ = P.fetch_step(iter([batch]), 1, run)
    eng = Engine(model, cfg, 1, run)
    seen = []
    if monkeypatch is not None:
        nce = P.info_nce_distributed

        def record(f1, f2, *a, **k):
            seen.append(torch.cat([f1, f2]).detach().clone())
            return nce(f1, f2, *a, **k)

        monkeypatch.setattr(P, "info_nce_distributed", record)
    loss, stats = P.micro_batch_loss(eng.forward, cfg)(mbs[0])
    return model, mbs[0], loss, stats, seen


def test_mp_off_trains_alpha_gamma_info_nce_only():
    """MP off: the loss is α·γ·L_cl, L_cl the InfoNCE of the model's own features (Eq. 4-5 by hand), the token head gets
    no gradient; the token loss and mask accuracy are still measured on the masked clips."""
    cfg = PretrainConfig(batch_size=4, clip_len=5, mask_then_predict=False, alpha=0.5, temperature=0.3)
    model, (inputs, labels, positions, _, m, clean, n_masked), loss, stats, _ = first_micro_batch(cfg)
    assert clean is None and (inputs == model.config.mask_id).any()  # CL-Mask on: the masked clips
    direct = model(inputs, labels, n_masked)
    expected = 0.5 * 0.3 * grouped_reference(direct.features[:m], direct.features[m:], 0.3, m)
    torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-6)
    with_mp = 1.0 * direct.loss + expected  # what the default objective would be: MP really is left out
    assert abs(loss.item() - with_mp.item()) > 1.0
    loss.backward()
    assert all(p.grad is None for p in model.token_head.parameters())
    assert model.backbone.embeddings.token.weight.grad.abs().sum() > 0  # the backbone trains
    torch.testing.assert_close(stats[0], direct.loss.detach() * n_masked)  # measured, not trained
    torch.testing.assert_close(stats[1], (direct.logits.argmax(-1) == direct.targets).sum().float())


def test_cl_mask_off_takes_the_features_of_the_unmasked_clips(monkeypatch):
    """CL-Mask off with MP: InfoNCE gets the model's [CLS] features of the unmasked clips (a direct forward), not those
    of the masked ones, while the token loss is the masked clips' (the default objective otherwise)."""
    cfg = PretrainConfig(batch_size=4, clip_len=5, cl_mask=False)
    model, (inputs, labels, _, _, m, clean, n_masked), loss, stats, seen = first_micro_batch(cfg, monkeypatch)
    assert clean.shape == inputs.shape  # the pairs' tokens as clips [c_1..c_n, c'_1..c'_n], and no [MASK]
    assert not (clean == model.config.mask_id).any() and (inputs == model.config.mask_id).any()
    assert torch.equal(clean[inputs != model.config.mask_id], inputs[inputs != model.config.mask_id])
    (features,) = seen
    unmasked, masked = model(clean).features, model(inputs).features
    torch.testing.assert_close(features, unmasked.detach(), rtol=1e-5, atol=1e-6)
    assert (features - masked.detach()).abs().max() > 1e-3  # the masked clips' features differ
    direct = model(inputs, labels, n_masked)
    torch.testing.assert_close(stats[0], direct.loss.detach() * n_masked)  # MP on the masked clips
    expected = direct.loss.double() + 0.2 * grouped_reference(unmasked[:m], unmasked[m:], 0.2, m)
    torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-6)


def test_neither_mp_nor_cl_mask_masks_nothing(monkeypatch):
    "MP and CL-Mask off: one forward of the unmasked clips, InfoNCE on their features, no masked token counted."
    cfg = PretrainConfig(batch_size=4, clip_len=5, mask_then_predict=False, cl_mask=False)
    model, (inputs, labels, positions, _, m, clean, n_masked), loss, stats, seen = first_micro_batch(cfg, monkeypatch)
    assert labels is None and positions is None and clean is None and n_masked.item() == 0
    assert not (inputs == model.config.mask_id).any()
    (features,) = seen
    direct = model(inputs).features
    torch.testing.assert_close(features, direct.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        loss.double(), 0.2 * grouped_reference(direct[:m], direct[m:], 0.2, m), rtol=1e-5, atol=1e-6
    )
    assert stats[0].item() == stats[1].item() == 0


def test_config_refuses_nothing_to_train():
    c = PretrainConfig()
    assert (c.mask_then_predict, c.cl_mask, c.masks()) == (True, True, True)
    assert PretrainConfig(mask_then_predict=False, cl_mask=False).masks() is False
    with pytest.raises(VimpacError, match="^mask_then_predict, alpha: without mask-then-predict .* alpha 0 leaves"):
        PretrainConfig(mask_then_predict=False, alpha=0.0)
    PretrainConfig(alpha=0.0)  # MP alone (Table 16's α = 0 row) is fine
    with pytest.raises(VimpacError, match="cl_mask: expected True or False, got 'no'"):
        PretrainConfig(cl_mask="no")


def test_pretrain_without_mp_leaves_the_token_head(labelled, tmp_path):
    """A run without MP moves the backbone and leaves the token head as it was, bit for bit (frozen: no AdamW step,
    no weight decay); it logs L = α·γ·L_cl and the measured mask accuracy, and gives the model back trainable."""
    cfg = PretrainConfig(steps=3, batch_size=6, clip_len=3, lr=1e-3, log_every=1, mask_then_predict=False)
    c = VimpacConfig.from_preset("tiny", vocab_size=labelled.vocab_size, token_map=labelled.token_map, max_clip_len=3)
    model = VimpacForPreTraining(c)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model, hist = pretrain(labelled, model, cfg, device="cpu", out=tmp_path / "run", progress=False)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("token_head."))
    assert not torch.equal(before["backbone.embeddings.token.weight"], after["backbone.embeddings.token.weight"])
    assert all(p.requires_grad for p in model.parameters())
    for r in hist:
        assert math.isclose(r["loss"], cfg.alpha * cfg.temperature * r["cl_loss"], rel_tol=1e-6)
        assert 0 <= r["mask_acc"] <= 1 and r["mask_loss"] > 0
    assert '"mask_then_predict": false' in (tmp_path / "run" / "pretrain_config.json").read_text()


@pytest.mark.parametrize("mp", [True, False])
def test_pretrain_without_cl_mask_runs(labelled, tmp_path, mp):
    """Without CL-Mask, with MP (two forwards) and without (no masking: no mask fields logged), a run logs finite
    losses and `evaluate_masking` measures the InfoNCE accuracy on the unmasked clips."""
    cfg = PretrainConfig(steps=2, batch_size=6, clip_len=3, lr=1e-3, log_every=1, mask_then_predict=mp, cl_mask=False)
    model, hist = pretrain(labelled, "tiny", cfg, device="cpu", out=tmp_path / "run", progress=False)
    assert all(math.isfinite(r["loss"]) for r in hist)
    assert ("mask_acc" in hist[0]) == mp and ("mask_loss" in hist[0]) == mp
    ev = evaluate_masking(model, labelled, cfg, batches=2)
    assert 0 <= ev.cl_acc <= 1 and ev.masked_tokens > 0


@pytest.mark.slow
@pytest.mark.parametrize("flags", [["--no-cl-mask"], ["--no-mask-then-predict", "--no-cl-mask"]])
def test_two_processes_agree_at_step_0(bin_dir, labelled, tmp_path, flags):
    """Under torchrun (two gloo processes), the step without CL-Mask (two forwards through DDP before one backward)
    and the step without any masking compute the one-process step 0 (float summation order; 1e-4 relative: the
    default path's own check, `test_pretrain_runs.py`, measures about 1.2e-5 on the InfoNCE on this project's CPU)
    and train on. `--no-mask-then-predict --alpha 0` stops in one line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    args = ["--no-eval", "--log-every", 1, "--steps", 3, "--batch-size", 6, "--clip-len", 3, "--dropout", 0, *flags]
    cmd = lambda out: [bin_dir / "vimpac-pretrain", *run_argv(labelled.path, out, *args)]
    one = run_command(*cmd(tmp_path / "one"), env=env, timeout=600)
    assert one.returncode == 0, one.stderr
    two = run_command(
        bin_dir / "torchrun", "--standalone", "--nproc-per-node", "2", *cmd(tmp_path / "two"), env=env, timeout=600
    )
    assert two.returncode == 0, two.stderr[-3000:]
    curve = lambda out: [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    c1, c2 = curve(tmp_path / "one"), curve(tmp_path / "two")
    assert [r["step"] for r in c1] == [r["step"] for r in c2] == [0, 1, 2]
    keys = [k for k in ("loss", "mask_loss", "cl_loss", "mask_acc", "cl_acc") if k in c1[0]]
    assert ("mask_loss" in keys) == ("--no-mask-then-predict" not in flags)
    for k in keys:
        assert abs(c1[0][k] - c2[0][k]) <= 1e-4 * max(abs(c1[0][k]), 1e-6), (k, c1[0][k], c2[0][k])
    assert all(math.isfinite(r["loss"]) for r in c2)
    r = run_command(*cmd(tmp_path / "none"), "--no-mask-then-predict", "--alpha", 0, env=env, timeout=600)
    assert error_line(r).startswith("vimpac-pretrain: error: mask_then_predict, alpha: without mask-then-predict")
