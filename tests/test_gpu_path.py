"""The GPU path (issue 13): MFU through the command line on a CPU, and the CUDA-only checks, marked `gpu`."""
import json
import pytest
import torch
from vimpac.cli import pretrain_main
from vimpac.engine import choose_precision, device_capability, peak_flops
from vimpac.model import VimpacConfig, model_flops
from test_pretrain_runs import store  # noqa: F401 (the fixture: 6 sample videos at 4 x 4 tokens)


def test_mfu_on_cpu_with_peak_tflops(store, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    pretrain_main(["--store", str(store), "--out", str(out), "--device", "cpu", "--precision", "fp32", "--no-eval",
                   "--steps", "2", "--batch-size", "2", "--log-every", "1", "--peak-tflops", "0.5"])
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    saved = json.loads((out / "config.json").read_text())
    cfg = VimpacConfig(**{k: v for k, v in saved.items() if k in VimpacConfig.__dataclass_fields__})
    assert len(recs) == 2
    for r in recs:
        assert r["mfu"] == pytest.approx(r["videos_per_s"] * 2 * model_flops(cfg, 5, 0.15) / 0.5e12, rel=1e-9)
        assert 0 < r["mfu"] < 1


@pytest.mark.gpu
def test_precision_and_peak_on_this_gpu():
    dev = torch.device("cuda")
    dtype, scaler = choose_precision("auto", "cuda", device_capability(dev))
    assert dtype in (torch.bfloat16, torch.float16, None)
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        y = torch.nn.Linear(64, 64).cuda()(torch.randn(8, 64, device=dev))
    assert torch.isfinite(y).all()
    assert peak_flops(dev, 1.0) == 1e12


@pytest.mark.gpu
def test_fused_adamw_skips_on_device():
    p = torch.nn.Parameter(torch.ones(3, device="cuda"))
    opt = torch.optim.AdamW([p], lr=0.1, fused=True)
    p.grad = torch.full_like(p, float("nan")); opt.found_inf = torch.ones((), device="cuda"); opt.step()
    assert torch.equal(p.detach(), torch.ones(3, device="cuda"))
