"""Two pre-training knobs the paper varies (issue 22): `mask_strategy` (block masking, §3.1, or the i.i.d. masking
Table 5 compares it with) and `negatives` (the negatives of an InfoNCE group, n = 1 + negatives in Table 8). Their
defaults leave the loop as it was; each is checked against an independent reference."""

import math
import pytest
import torch
import torch.nn.functional as F
from vimpac.data import ClipPairDataset
from vimpac.masking import MaskSpec
from vimpac.losses import info_nce_distributed
from vimpac.model import VimpacConfig
from vimpac.pretrain import PretrainConfig, mask_clip_pairs, pretrain
from vimpac.utils import VimpacError

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


class TokenVideos:
    "Four videos of 12 frames of 8 x 8 random tokens: an in-memory store for `ClipPairDataset`."

    path, vocab_size, fps = "memory", 50, 2.0

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.randint(0, 50, (12, 8, 8), generator=torch.Generator().manual_seed(i))


@pytest.mark.parametrize("ratio", [0.119, 0.145, 0.3])
def test_iid_masks_hit_the_ratio(ratio):
    """i.i.d. masks from the loader's keyed uniforms mask `mask_ratio` of the tokens (to a binomial tolerance), each
    token on its own; the block masks of the same loader keep their (2, K, 6) uniforms."""
    cfg = PretrainConfig(mask_strategy="iid", mask_ratio=ratio, clip_len=5)
    data = ClipPairDataset(TokenVideos(), 5, pad_id=50, masking=cfg.mask_spec())
    c = VimpacConfig.from_preset("tiny", vocab_size=50, token_map=(8, 8), max_clip_len=5)
    masks = []
    for epoch in range(40):
        items = [data[(epoch, i)] for i in range(len(data))]
        pairs, u = torch.stack([p for p, _ in items]), torch.stack([u for _, u in items])
        assert u.shape == (4, 2, 5, 8, 8)
        inputs, labels, mask = mask_clip_pairs(pairs, c, cfg, mask_u=u)
        assert (inputs[mask] == c.mask_id).all() and (labels[mask] == torch.cat([pairs[:, 0], pairs[:, 1]])[mask]).all()
        masks.append(mask)
    m = torch.stack(masks).float()
    n = m.numel()
    assert abs(m.mean().item() - ratio) < 4 * math.sqrt(ratio * (1 - ratio) / n), (m.mean().item(), ratio)
    per_token = m.mean(dim=(0, 1))  # each token position masked at the same rate
    assert (per_token - ratio).abs().max() < 0.1
    block = ClipPairDataset(TokenVideos(), 5, pad_id=50)[0][1]
    assert block.shape == (2, MaskSpec().blocks(5, 8, 8), 6)


def grouped_reference(f1, f2, temperature, group):
    """Eq. 4-5 written out clip by clip for each group of `group` pairs alone (no `vimpac.losses` code): the mean over
    groups of the group's InfoNCE (its 2g clips' terms, each against the other 2g - 1 clips, averaged per side)."""
    losses = []
    for lo in range(0, len(f1), group):
        z = F.normalize(torch.cat([f1[lo : lo + group], f2[lo : lo + group]]).double(), dim=-1)
        terms = []
        for i in range(2 * group):
            positive = (i + group) % (2 * group)
            others = [j for j in range(2 * group) if j != i]
            logits = torch.stack([z[i] @ z[j] / temperature for j in others])
            terms.append(-(logits[others.index(positive)] - torch.logsumexp(logits, 0)))
        losses.append(sum(terms[:group]) / group + sum(terms[group:]) / group)
    return sum(losses) / len(losses)


@pytest.mark.parametrize("group", [2, 3, 4, 12])
def test_grouped_info_nce_is_the_mean_of_the_groups(group):
    g = torch.Generator().manual_seed(group)
    f1, f2 = torch.randn(12, 16, generator=g), torch.randn(12, 16, generator=g)
    total, _ = info_nce_distributed(f1, f2, 0.2, group=group)
    torch.testing.assert_close(total.double() / 12, grouped_reference(f1, f2, 0.2, group), rtol=1e-5, atol=1e-5)
    if group == 12:  # one group: the whole micro-batch, as before
        torch.testing.assert_close(total, info_nce_distributed(f1, f2, 0.2)[0])


def test_config_checks_the_knobs():
    assert (PretrainConfig().mask_strategy, PretrainConfig().negatives) == ("block", None)
    with pytest.raises(VimpacError, match="mask_strategy: expected one of block, iid, got 'random'"):
        PretrainConfig(mask_strategy="random")
    with pytest.raises(VimpacError, match="negatives: groups of 2 \\+ 1 pairs do not divide the batch size 8"):
        PretrainConfig(batch_size=8, negatives=2)
    with pytest.raises(VimpacError, match="negatives"):
        PretrainConfig(negatives=0)


def test_pretrain_runs_with_both_knobs(labelled, tmp_path):
    """A short run with i.i.d. masking and groups of 2 pairs (1 negative) logs finite losses and saves the knobs;
    groups that do not divide the micro-batch stop it before anything is written."""
    cfg = PretrainConfig(steps=3, batch_size=6, clip_len=3, lr=1e-3, log_every=1, mask_strategy="iid", negatives=1)
    _, hist = pretrain(labelled, "tiny", cfg, device="cpu", out=tmp_path / "run", progress=False)
    assert [r["step"] for r in hist] == [0, 1, 2] and all(math.isfinite(r["loss"]) for r in hist)
    assert all(0 <= r["cl_acc"] <= 1 for r in hist)
    saved = (tmp_path / "run" / "pretrain_config.json").read_text()
    assert '"mask_strategy": "iid"' in saved and '"negatives": 1' in saved
    odd = PretrainConfig(steps=1, batch_size=6, micro_batch_size=3, clip_len=3, negatives=1)
    with pytest.raises(VimpacError, match="negatives: groups of 2 pairs do not divide the 3 pairs of a micro-batch"):
        pretrain(labelled, "tiny", odd, device="cpu", out=tmp_path / "odd", progress=False)
    assert not (tmp_path / "odd" / "metrics.jsonl").exists()


def test_the_mask_is_specified_once_per_run(labelled, monkeypatch):
    """Issue 33: `--mask-ratio` goes option -> `PretrainConfig` -> one `MaskSpec`, made and checked once, which the
    dataset and every micro-batch share; a changed field makes a new one."""
    made, check = [], MaskSpec.__post_init__

    def counted(self):
        made.append(self)
        check(self)

    monkeypatch.setattr(MaskSpec, "__post_init__", counted)
    cfg = PretrainConfig(steps=2, batch_size=6, clip_len=3, log_every=1, mask_strategy="iid", mask_ratio=0.2)
    assert len(made) == 1
    pretrain(labelled, "tiny", cfg, device="cpu", progress=False)
    assert len(made) == 1 and cfg.mask_spec() is made[0]
    cfg.mask_ratio = 0.3
    assert cfg.mask_spec().mask_ratio == 0.3 and len(made) == 2
