"""The GPU path (issue 13): MFU through the command line on a CPU, the GPU suite's steady-state figures, and the
CUDA-only checks, marked `gpu`."""

import json, sys
from pathlib import Path
import pytest
import torch
from vimpac.cli import pretrain_main
from vimpac.engine import choose_precision, device_capability, sync_batchnorm
from vimpac.memory import peak_flops
from vimpac.model import VimpacConfig, model_flops
from helpers import run_argv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from pretrain_speed import steady_state  # noqa: E402 (benchmarks/ is not a package)
import bench_gpu  # noqa: E402


SHORT_RUN = ["--steps", 3, "--batch-size", 2, "--log-every", 1]  # 3 logged steps of 2 clips


def test_mfu_on_cpu_with_peak_tflops(sample_store, tmp_path):
    out = tmp_path / "run"
    pretrain_main(run_argv(sample_store, out, "--no-eval", *SHORT_RUN, "--peak-tflops", 0.5))
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    saved = json.loads((out / "config.json").read_text())
    cfg = VimpacConfig(**{k: v for k, v in saved.items() if k in VimpacConfig.__dataclass_fields__})
    assert len(recs) == 3
    flops_per_video = 2 * model_flops(cfg, 5, 0.15)  # two clips of T = 5, 15% masked
    for r in recs:
        assert r["mfu"] == pytest.approx(r["videos_per_s"] * flops_per_video / 0.5e12, rel=1e-9)
        assert 0 < r["mfu"] < 1
    # the suite's figure (benchmarks/pretrain_speed.py): steps 1 and 2, one step each, averaged by time
    ss = steady_state(recs, skip=1)
    v = 2 / (1 / recs[1]["videos_per_s"] + 1 / recs[2]["videos_per_s"])
    assert ss["steps"] == 2 and ss["records"] == 2 and ss["peak_mem_gb"] is None
    assert ss["videos_per_s"] == pytest.approx(v, rel=1e-9)
    assert ss["mfu"] == pytest.approx(v * flops_per_video / 0.5e12, rel=1e-9)


def test_steady_state_weights_by_time():
    """A record covers the steps since the previous one, a skipped bad step's record included: 10 steps at 2 videos/s,
    5 at 10 and 4 at 4 take 5 + 0.5 + 1 s."""
    recs = [
        dict(step=0, videos_per_s=0.1, mfu=0.001, peak_mem_gb=3.0),
        dict(step=10, videos_per_s=2.0, mfu=0.02, peak_mem_gb=5.0),
        dict(step=15, videos_per_s=10.0, mfu=0.1, skipped="non-finite loss or gradient"),
        dict(step=19, videos_per_s=4.0, mfu=0.04, peak_mem_gb=4.0),
    ]
    ss = steady_state(recs, skip=1)
    assert ss["steps"] == 19 and ss["records"] == 3 and ss["peak_mem_gb"] == 5.0
    assert ss["videos_per_s"] == pytest.approx(19 / 6.5) and ss["mfu"] == pytest.approx(0.19 / 6.5)
    assert steady_state(recs, skip=9)["steps"] == 4  # the last record always stays
    assert steady_state([dict(step=0, videos_per_s=1.0)])["mfu"] is None  # no peak known: no MFU
    with pytest.raises(ValueError):
        steady_state([])


def test_suite_plan_fits_its_budget(tmp_path):
    "The GPU run's parts (built without a GPU): every benchmark of issue 13 §2 is there, and their budgets fit"
    "`PLANNED_S`."
    ps = bench_gpu.parts("cuda", False, tmp_path)
    names = [p["name"] for p in ps]
    for want in (
        "gpu tests",
        "attention backends",
        "compiled",
        "Base",
        "Large-Half",
        "T=10 S=256",
        "block masks",
        "tokenizer",
        "vimpac-pretrain",
        "fine-tuning",
        "3x10",
    ):
        assert any(want in n for n in names), want
    assert sum(p["budget_s"] for p in ps) <= bench_gpu.PLANNED_S
    pre = next(p for p in ps if "vimpac-pretrain" in p["name"])
    assert "--quick" not in pre["cmd"] and all(p["budget_s"] is None for p in bench_gpu.parts("cpu", True, tmp_path))


def test_gpu_notebooks_found_by_flag(tmp_path):
    "The suite's notebook part picks the notebooks with a `#| gpu` code cell, in subfolders too, and no others."

    def nb(path, *cells):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(cells=[dict(cell_type=t, source=src, metadata={}) for t, src in cells])))

    nb(tmp_path / "a.ipynb", ("code", ["#| gpu\n", "x = 1\n"]))
    nb(tmp_path / "runs" / "b.ipynb", ("code", "#| export\n#| gpu\ny = 2"))
    nb(tmp_path / "c.ipynb", ("markdown", "#| gpu"), ("code", "# a cell about #| gpu flags\nz = 3"))
    assert bench_gpu.gpu_notebooks(tmp_path) == [tmp_path / "a.ipynb", tmp_path / "runs" / "b.ipynb"]


def test_suite_part_failure_and_time_limit():
    "A part that exits non-zero fails, and so does one stopped at twice its budget; the suite's exit status follows."
    py = sys.executable
    bad = bench_gpu.run(
        dict(
            name="bad",
            cmd=[py, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
            out=None,
            budget_s=None,
        )
    )
    assert not bad["ok"] and "boom" in bad["error"]
    slow = bench_gpu.run(dict(name="slow", cmd=[py, "-c", "import time; time.sleep(30)"], out=None, budget_s=0.5))
    assert not slow["ok"] and "stopped after 1 s" in slow["error"] and slow["seconds"] < 20
    good = bench_gpu.run(dict(name="good", cmd=[py, "-c", "print('fine')"], out=None, budget_s=None))
    assert good["ok"] and good["tail"] == ["fine"]


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
    p.grad = torch.full_like(p, float("nan"))
    opt.found_inf = torch.ones((), device="cuda")
    opt.step()
    assert torch.equal(p.detach(), torch.ones(3, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "extra",
    [
        ["--precision", "bf16"],
        ["--precision", "fp16"],
        ["--precision", "bf16", "--compile"],
        ["--precision", "bf16", "--gradient-checkpointing"],
    ],
    ids=["bf16-autocast", "fp16-gradscaler", "compile", "checkpointing"],
)
def test_pretrain_on_gpu(sample_store, tmp_path, extra):
    "`vimpac-pretrain` on CUDA in each precision and mode, with a data-loading worker (pinned memory): finite"
    "losses, memory and MFU logged."
    out = tmp_path / "run"
    argv = ["--no-eval", *SHORT_RUN, "--num-workers", 1, "--peak-tflops", 100, *extra]
    pretrain_main(run_argv(sample_store, out, *argv, device="cuda", precision=None))
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 1, 2]
    assert all(r["loss"] == r["loss"] and r["peak_mem_gb"] > 0 and 0 < r["mfu"] < 1 for r in recs)


@pytest.mark.gpu
def test_default_tokenizer_on_gpu_matches_cpu():
    "The default VQ-VAE gives the CPU's codes on CUDA (up to ties broken by TF32 rounding), in fp32 and channels_last."
    from vimpac.tokenizer import load_tokenizer
    from vimpac.video import read_views, sample_videos

    frames = torch.from_numpy(read_views(sample_videos()[1], 2.0, 128)["1x-center"][:8])
    ref = load_tokenizer("default").encode(frames)
    tok = load_tokenizer("default", device="cuda")
    assert (tok.encode(frames).cpu() == ref).float().mean() > 0.98
    tok.to(memory_format=torch.channels_last)
    assert (tok.encode(frames).cpu() == ref).float().mean() > 0.98


@pytest.mark.gpu
def test_sync_batchnorm_under_nccl(monkeypatch):
    """A one-process NCCL group: `sync_batchnorm` gives `GlobalBatchNorm1d` on CUDA too (torch's `nn.SyncBatchNorm`
    reads the device on the host every step), whose all-reduce path (taken here by a world size reported as 2) then
    normalises like BatchNorm1d, also from bf16 input."""
    import socket
    import torch.distributed as dist
    import vimpac.engine as E
    from vimpac.engine import GlobalBatchNorm1d

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))

    class WorldOfTwo:
        def __getattr__(self, k):
            return getattr(dist, k)

        @staticmethod
        def get_world_size(group=None):
            return 2

    try:
        bn = torch.nn.BatchNorm1d(16).cuda()
        x = torch.randn(32, 16, device="cuda")
        ref = bn(x)
        m = sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm1d(16)).cuda(), torch.device("cuda"))
        assert isinstance(m[0], GlobalBatchNorm1d)
        torch.testing.assert_close(m(x), ref)
        monkeypatch.setattr(E, "dist", WorldOfTwo())
        torch.testing.assert_close(m(x), ref)
        y = m(x.bfloat16())
        assert y.dtype == torch.bfloat16
        torch.testing.assert_close(y.float(), bn(x.bfloat16().float()), rtol=0, atol=3e-2)
    finally:
        dist.destroy_process_group()
