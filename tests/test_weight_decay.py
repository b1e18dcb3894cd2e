"""Weight decay as the authors' optimizers apply it (issue 23): `param_groups` on the kit's models made from the
authors' tiny checkpoints (tests/fixtures/official, written by their code) splits the parameters as their rule splits
their names. Their rule (airsplay/vimpac at 0760d19): a parameter does not decay when its name contains one of the
substrings below (`vimpac/pretrain.py` lines 157-161, `vimpac/finetune.py` lines 108-109); the rest decay."""

from pathlib import Path
import pytest
import torch
from vimpac.engine import param_groups
from vimpac.official import load_official_classifier, load_official_pretraining

FIX = Path(__file__).resolve().parent / "fixtures" / "official"
AUTHORS_NO_DECAY = {
    "pretrain": (".bias", "LayerNorm.weight", ".ln.weight", "ln_1.weight", "ln_2.weight", "ln_3.weight")
    + ("ln_pre.weight", "ln_post.weight"),
    "finetune": ("bias", "LayerNorm.weight", "ln_1.weight", "ln_2.weight", ".ln.weight", "ln_pre.weight")
    + ("ln_post.weight",),
}
BUFFERS = ("running_mean", "running_var", "num_batches_tracked")
TIED = ("mlm_head.decoder.weight", "mlm_head.decoder.bias")  # the embedding and `mlm_head.bias`, listed once by torch


def _marked(sd: dict, rule: tuple) -> dict:
    "The authors' state dict with each parameter set to +1 where their rule decays it, -1 where it does not."
    out = {}
    for k, v in sd.items():
        if k.endswith(BUFFERS):
            out[k] = v.clone()
        else:
            out[k] = torch.full_like(v, -1.0 if any(s in k for s in rule) else 1.0)
    return out


def _kit_groups(model) -> tuple[set, set]:
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = param_groups(model, 0.05)
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.05, 0.0)
    return {names[id(p)] for p in decay["params"]}, {names[id(p)] for p in no_decay["params"]}


@pytest.mark.parametrize("kind", ["pretrain", "finetune"])
def test_param_groups_follow_the_authors(tmp_path, kind):
    """Each kit parameter carries the sign of the authors' parameters it is made of (+1 decay, -1 not; [CLS] is the
    sum of two decayed ones: +2), and `param_groups` puts it in the group that sign says."""
    sd = torch.load(FIX / ("pretrain_tiny.pt" if kind == "pretrain" else "classifier_tiny.pt"), weights_only=True)
    theirs = [k for k in sd if not k.endswith(BUFFERS) and k not in TIED]
    assert sum(any(s in k for s in AUTHORS_NO_DECAY[kind]) for k in theirs) > 0  # both groups are non-empty
    torch.save(_marked(sd, AUTHORS_NO_DECAY[kind]), tmp_path / "classifier.pt")
    load = load_official_pretraining if kind == "pretrain" else load_official_classifier
    model = load(tmp_path / "classifier.pt", num_heads=4)
    expected_decay, expected_spared = set(), set()
    for n, p in model.named_parameters():
        signs = set(torch.sign(p.detach()).unique().tolist())
        assert len(signs) == 1 and 0 not in signs, (n, signs)  # every kit parameter comes from one group of theirs
        (expected_decay if signs == {1.0} else expected_spared).add(n)
    decay, spared = _kit_groups(model)
    assert (decay, spared) == (expected_decay, expected_spared)
    assert {"backbone.embeddings.token.weight", "backbone.cls", "backbone.embeddings.pos_t"} <= decay
    assert "backbone.layers.0.blocks.0.norm.weight" in spared
    if kind == "pretrain":  # names that match none of their patterns: decayed in their runs, and in the kit's
        assert {"token_head.norm.weight", "cls_head.1.weight"} <= decay
