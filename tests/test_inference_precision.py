"""Inference under autocast and with one device read (issue 20, points 2, 4 and 6), on CPU stand-ins: the kit refuses
bf16 on a CPU, so `inference_precision` is made to answer bf16 as it does on a recent GPU, and CPU autocast runs the
path a GPU takes. On today's main (before issue 20) evaluation ran in fp32 whatever the device, read the device once
per batch, and `evaluate_masking` ran a whole batch in one forward."""

import sys
import pytest
import torch
import vimpac.evaluate as EV
import vimpac.pretrain as PT

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def autocast_seen(model):
    "Whether autocast was on at each forward of `model`'s backbone."
    seen = []
    model.backbone.register_forward_pre_hook(lambda m, a: seen.append(torch.is_autocast_enabled("cpu")))
    return seen


def reads_from(module, monkeypatch, functions=None):
    "The host reads (`cpu`, `item`, `tolist`) made by code of `module`'s file (in `functions`, given by name, if"
    "given)."
    reads = []
    for name in ("cpu", "item", "tolist"):
        orig = getattr(torch.Tensor, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            code = sys._getframe(1).f_code
            if code.co_filename == module.__file__ and (functions is None or code.co_name in functions):
                reads.append(_name)
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, wrapped)
    return reads


def test_evaluation_runs_under_the_precision_asked(labelled, monkeypatch):
    """`evaluate` and `extract_features` run the model under the autocast `inference_precision` gives (bf16, as on an
    H100): the scores stay float32 rows summing to 1, close to fp32's; on a CPU, `auto` stays fp32."""
    from vimpac.finetune import finetune_model

    model = finetune_model(labelled, "tiny", clip_len=4)
    seen = autocast_seen(model)
    ref = EV.evaluate(model, labelled, "1x2", batch_size=4, progress=False)
    ref_f = EV.extract_features(labelled, model, views="1x2", progress=False)
    assert seen and not any(seen)
    seen.clear()
    monkeypatch.setattr(EV, "inference_precision", lambda precision, device: torch.bfloat16)
    ev = EV.evaluate(model, labelled, "1x2", batch_size=4, progress=False)
    f = EV.extract_features(labelled, model, views="1x2", progress=False)
    assert seen and all(seen), seen
    assert ev.scores.dtype == torch.float32 and torch.allclose(ev.scores.sum(1), torch.ones(len(ev.scores)))
    assert (ev.scores - ref.scores).abs().max() < 0.05
    assert (
        f.features.dtype == torch.float32
        and torch.nn.functional.cosine_similarity(f.features, ref_f.features).min() > 0.99
    )


def test_bf16_on_a_cpu_is_one_clear_error(labelled):
    from vimpac.finetune import finetune_model
    from vimpac.utils import VimpacError

    model = finetune_model(labelled, "tiny", clip_len=4)
    with pytest.raises(VimpacError, match="precision bf16: mixed precision needs a CUDA GPU"):
        EV.evaluate(model, labelled, "1x2", progress=False, precision="bf16")


def test_multiview_reads_the_device_once(labelled, monkeypatch):
    "`pooled_views` sums the views on the model's device and reads the (N, C) result once, not once per batch."
    from vimpac.finetune import finetune_model

    model = finetune_model(labelled, "tiny", clip_len=4)
    reads = reads_from(EV, monkeypatch, ("pooled_views", "run", "flush", "fn", "multiview_scores"))
    EV.evaluate(model, labelled, "1x2", batch_size=2, progress=False)  # 6 videos x 2 views: 6 batches
    assert reads == ["cpu"], reads


def test_evaluate_masking_autocast_micro_batches_one_read(labelled, monkeypatch):
    """`evaluate_masking` runs its batch in micro-batches (3 forwards for 6 pairs by 2), under the precision's autocast,
    and reads its counts once."""
    from vimpac.model import VimpacConfig, VimpacForPreTraining

    c = VimpacConfig.from_preset("tiny", vocab_size=labelled.vocab_size, token_map=labelled.token_map, max_clip_len=3)
    model = VimpacForPreTraining(c)
    seen = autocast_seen(model)
    monkeypatch.setattr(PT, "inference_precision", lambda precision, device: torch.bfloat16)
    reads = reads_from(PT, monkeypatch)
    ev = PT.evaluate_masking(
        model, labelled, PT.PretrainConfig(batch_size=6, clip_len=3), batches=1, micro_batch_size=2
    )
    assert seen == [True] * 3, seen
    assert reads == ["tolist"], reads
    assert ev.masked_tokens > 0 and 0 <= ev.mask_acc <= 1 and 0 <= ev.cl_acc <= 1
