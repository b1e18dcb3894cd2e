"""The speed model of benchmarks/roofline.py (issue 20): its counts on fake tensors against the kit's `model_flops`
and the paper-scale figure, its bytes, the prediction's monotonicity, the compiled ratio it reads, the saved-tensor
count, and its command line."""

import json, subprocess, sys
from pathlib import Path
import pytest
import torch
from vimpac.model import VimpacConfig, model_flops
from helpers import H100_ATTENTION

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import roofline as rl  # noqa: E402 (benchmarks/ is not a package)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def small():
    return rl.count("small", "pretrain", "fp32", gpu=False)


def _kit_flops(preset):
    c = VimpacConfig.from_preset(preset, max_clip_len=5, token_map=(16, 16))
    return 2 * model_flops(c, 5)  # a video is two clips


def test_small_pretraining_flops_match_the_kit_and_the_paper_scale(small):
    "Small at T = 5, 16 x 16: FlopCounterMode's count per video within 10% of `model_flops` and of about 400 GFLOP."
    assert small["flops"] == pytest.approx(_kit_flops("small"), rel=0.1)
    assert small["flops"] == pytest.approx(400e9, rel=0.1)
    assert small["samples"] == rl.COUNT_SAMPLES and small["params"] > 20e6


def test_flops_scale_with_layers_and_width_as_the_presets_say(small):
    """Tiny (2 layers, width 128) and Large-Half (24 layers, width 1024) against Small (6 layers, 512): the counted
    ratio is the kit's formula's within 10%, and the order follows depth x width."""
    tiny = rl.count("tiny", "pretrain", "fp32")
    assert tiny["flops"] / small["flops"] == pytest.approx(_kit_flops("tiny") / _kit_flops("small"), rel=0.1)
    lh = rl.count("large_half", "pretrain", "fp32")
    assert lh["flops"] / small["flops"] == pytest.approx(_kit_flops("large_half") / _kit_flops("small"), rel=0.1)
    assert tiny["flops"] < small["flops"] < lh["flops"]


def test_bytes_split_and_bf16_moves_fewer(small):
    """Bytes are counted on both sides (matmul-like, memory-bound > 0); on fake tensors they are what `traffic.py`
    counts on real ones for the same step (tiny, fp32); bf16 autocast moves fewer matmul-like bytes and saves fewer
    bytes for backward than fp32, for the same FLOPs; the GPU's fused attention keeps the FLOPs and moves fewer
    bytes."""
    from traffic import EagerBytes, make_step

    assert small["matmul_bytes"] > 0 and small["memory_bytes"] > 0
    model, step = make_step("tiny", 16, 5, rl.COUNT_SAMPLES, fused_attention=False)  # the CPU's path, as --path cpu
    step(model)
    model.zero_grad()  # as traffic.py: a warm-up, then the counted step
    with EagerBytes() as real:
        step(model)
    fake = rl.count("tiny", "pretrain", "fp32", gpu=False)
    split = real.split()
    assert fake["matmul_bytes"] == pytest.approx(split["matmul"] / rl.COUNT_SAMPLES, rel=0.01)
    assert fake["memory_bytes"] == pytest.approx(split["memory"] / rl.COUNT_SAMPLES, rel=0.01)
    bf16 = rl.count("small", "pretrain", "bf16", gpu=False)
    assert bf16["flops"] == pytest.approx(small["flops"], rel=1e-6)
    assert bf16["matmul_bytes"] < 0.75 * small["matmul_bytes"]
    assert 0 < bf16["saved_bytes"] < small["saved_bytes"]
    gpu = rl.count("small", "pretrain", "bf16", gpu=True)
    assert gpu["flops"] == pytest.approx(small["flops"], rel=1e-6)
    assert 0 < gpu["memory_bytes"] < bf16["memory_bytes"] and 0 < gpu["saved_bytes"] < bf16["saved_bytes"]


def test_gpu_stand_ins_fused_attention_and_cuda_fp32_list():
    """On real tensors: attention through `GpuStandIns` counted as cuDNN (a fused kernel without an accumulator) gives
    plain SDPA's output and gradients and is counted as one kernel each way (q, k, v, output, log-sum-exp; backward
    adds the gradients), none of the math path's ops; under
    CPU autocast, LayerNorm runs in fp32 as on CUDA (bf16 without the stand-ins)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(6, 2, 5, 8, requires_grad=True) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    gref = torch.autograd.grad(ref.sum(), (q, k, v))
    moved, saved = rl.Bytes(), rl.SavedBytes()
    with moved:
        with saved.hooks(), rl.GpuStandIns(moved, saved, attention="cudnn"):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        g = torch.autograd.grad(out.sum(), (q, k, v), torch.ones(()))
    torch.testing.assert_close(out, ref)
    for a, b in zip(g, gref):
        torch.testing.assert_close(a, b)
    t, lse = q.numel() * 4, 6 * 2 * 5 * 4
    assert moved.ops["_scaled_dot_product_fused_attention"] == 4 * t + lse
    assert moved.ops["_scaled_dot_product_fused_attention_backward"] == 8 * t + lse
    assert not any("softmax" in name or name == "bmm" for name in moved.ops), moved.ops
    assert saved.total == 4 * t + lse
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.nn.functional.layer_norm(x.bfloat16(), (8,)).dtype == torch.bfloat16
        with rl.GpuStandIns(rl.Bytes(), rl.SavedBytes()):
            assert torch.nn.functional.layer_norm(x.bfloat16(), (8,)).dtype == torch.float32
            assert torch.mm(x, x.T).dtype == torch.bfloat16  # matmuls still in bf16


H100 = H100_ATTENTION


def test_attention_workspace_matches_the_h100():
    """The padded fp32 accumulators the roofline counts for flash and memory-efficient attention (and none for cuDNN)
    against the backward workspaces measured on an H100 (`results/gpu-h100-attention.json`, peak above inputs,
    output and gradients): the accumulator is the bulk of every measured workspace, 75-100% of it (the rest is about
    one to three q's worth of other buffers), for every row shape of Small and Large-Half; cuDNN and math count none.
    Flash's padding to 128 rows costs twice the memory-efficient kernel's 64 at head dim 64."""
    rows = [r for r in json.loads(H100.read_text())["sdpa"]["rows"] if "error" not in r and not r["masked"]]
    assert len(rows) == 32
    for r in rows:
        counted = rl.attention_workspace(r["backend"], r["R"], r["heads"], r["length"], r["head_dim"])
        measured = r["extra_mib"] * 2**20
        if r["backend"] in ("flash", "efficient"):
            assert 0.75 * measured <= counted <= measured, (r["preset"], r["rows"], r["backend"], counted, measured)
        else:
            assert counted == 0, r
    assert rl.attention_workspace("flash", 1, 1, 6, 64) == 2 * rl.attention_workspace("efficient", 1, 1, 6, 64)


def test_pinned_attention_counts_math_for_the_temporal_rows():
    """`--attention pinned` counts each call as the kit's CUDA pin: on tiny at the pre-training size (6-position
    temporal rows of head dim 32: math; 17-position spatial rows: 544 > 512, memory-efficient), the math rows by
    their own ops (softmax among them) and the others as fused kernels with their accumulator; forcing math
    everywhere moves more bytes than the pin, and flash's padded accumulator more matmul-like bytes than efficient's."""
    pinned, math_, flash, eff = (
        rl.count("tiny", "pretrain", "bf16", attention=a) for a in ("pinned", "math", "flash", "efficient")
    )
    assert pinned["attention_calls"] == {"math": 2, "efficient": 4}, pinned["attention_calls"]
    assert math_["attention_calls"] == {"math": 6} and flash["attention_calls"] == {"flash": 6}
    assert math_["memory_bytes"] > pinned["memory_bytes"] > flash["memory_bytes"]


def test_prediction_is_monotone_and_compiled_is_not_slower(small):
    "More bytes never predict more videos/s; a compiled ratio under 1 never predicts fewer videos/s than eager."
    for gpu in rl.GPUS.values():
        base = rl.predict(small["flops"], small["matmul_bytes"], small["memory_bytes"], gpu)
        more = rl.predict(small["flops"], small["matmul_bytes"], 2 * small["memory_bytes"], gpu)
        assert more["per_s"] < base["per_s"] and more["mfu"] < base["mfu"]
        assert (
            rl.predict(small["flops"], small["matmul_bytes"], 0.7 * small["memory_bytes"], gpu)["per_s"] > base["per_s"]
        )
        assert 0 < base["mfu"] < rl.MATMUL_EFFICIENCY
        assert base["per_s"] * small["flops"] == pytest.approx(base["mfu"] * gpu["peak_flops"])
    # the H100's bandwidth and peak are both higher than the A100's: faster on every count
    h, a = (
        rl.predict(small["flops"], small["matmul_bytes"], small["memory_bytes"], g)["per_s"] for g in rl.GPUS.values()
    )
    assert h > a


def test_compiled_ratio_read_from_traffic_results(tmp_path):
    "The ratio is compiled / eager memory-bound bytes of the preset's own traffic file, else Small's, and is named."

    def write(name, preset, eager, compiled):
        (tmp_path / name).write_text(
            json.dumps(
                dict(
                    preset=preset,
                    token_map=16,
                    clip_len=5,
                    eager=dict(matmul=1, memory=eager),
                    compiled=dict(matmul=1, memory=compiled),
                )
            )
        )

    write("traffic_small_cpu.json", "small", 100.0, 80.0)
    write("traffic_tiny_cpu.json", "tiny", 200.0, 220.0)
    (tmp_path / "traffic_base_cpu.json").write_text(
        json.dumps(dict(preset="base", eager=dict(matmul=1, memory=5)))
    )  # no compiled count
    ratios = rl.compiled_ratios(tmp_path)
    assert set(ratios) == {"small", "tiny"}
    assert rl.pick_ratio("tiny", ratios)[0] == pytest.approx(1.1)
    r, why = rl.pick_ratio("base", ratios)
    assert r == pytest.approx(0.8) and "traffic_small_cpu.json" in why and "not base's own" in why
    assert rl.pick_ratio("small", {})[0] == 1.0
    rows = rl.roofline(["tiny"], ["pretrain"], traffic_dir=tmp_path)
    assert rows[0]["compiled_memory_bytes"] == pytest.approx(1.1 * rows[0]["memory_bytes"])
    for g in rl.GPUS:  # a ratio over 1 (tiny's here) predicts compiled slower: the model does not flatter compile
        assert rows[0][g]["compiled"]["per_s"] < rows[0][g]["eager"]["per_s"]


def test_saved_bytes_count_each_storage_once_and_leave_out_parameters():
    "y = relu(x @ W): autograd saves x (for W's gradient), W (excluded) and relu's output; a second save of x is free."
    x, W = torch.randn(32, 16, requires_grad=True), torch.nn.Parameter(torch.randn(16, 8))
    s = rl.SavedBytes(exclude=[W])
    with s.hooks():
        y = torch.relu(x @ W)
        z = (x * 2).sum() + y.sum()  # mul by a constant saves nothing from x
        w = (x * x).sum()  # saves x twice (already counted)
    (z + w).backward()
    assert s.total == x.numel() * 4 + y.numel() * 4


def test_kit_plan_fits_the_fine_tuning_batch_on_80_gib():
    """Fine-tuning Small (Table 12: 128 clips of T = 10 on 32 x 32 tokens) on one 80 GiB GPU: the kit's plan is a
    micro-batch that divides 128, below it (the whole batch would need about 260 GiB), and predicted to fit."""
    micro, peak = rl.kit_plan("small", "finetune")
    assert 1 <= micro < 128 and 128 % micro == 0 and peak <= rl.GPU_BYTES, (micro, peak / 2**30)


def test_cli_writes_json(tmp_path, capsys):
    out = tmp_path / "r" / "roofline.json"
    assert rl.main([*"--presets tiny --workloads pretrain --out".split(), str(out)]) == 0
    res = json.loads(out.read_text())
    row = res["rows"][0]
    assert row["preset"] == "tiny" and row["workload"] == "pretrain" and row["flops"] > 0
    assert set(rl.GPUS) <= set(row) and row["H100 SXM"]["compiled"]["per_s"] > 0
    assert res["matmul_efficiency"] == rl.MATMUL_EFFICIENCY and "compiled_ratio_source" in row
    printed = capsys.readouterr().out
    assert "| tiny | pretrain" in printed and "compiled memory-bound bytes = eager x" in printed


def test_every_attention_backend_in_one_table(tmp_path, capsys):
    """`--attention all`: one prediction per backend, eager and compiled with that backend, in one table and JSON.
    The math path moves the most memory-bound bytes (its scores and softmax are ops of their own); the fused kernels
    move the same memory-bound bytes, and flash's accumulator (rows padded to 128) is no smaller than the
    memory-efficient kernel's (64 rows, head dim at least 64: the same at tiny's head dim 32)."""
    out = tmp_path / "by_attention.json"
    assert rl.main([*"--presets tiny --workloads pretrain --attention all --out".split(), str(out)]) == 0
    rows = {b: rs[0] for b, rs in json.loads(out.read_text())["by_attention"].items()}
    assert list(rows) == list(rl.ATTENTION)
    mb = {b: r["memory_bytes"] for b, r in rows.items()}
    assert mb["math"] == max(mb.values()) and mb["flash"] == mb["efficient"] == mb["cudnn"], mb
    kernels = {b: r["matmul_bytes"] for b, r in rows.items()}
    assert kernels["flash"] >= kernels["efficient"] > kernels["cudnn"], kernels
    printed = capsys.readouterr().out
    assert "| tiny | pretrain" in printed and all(f"{b}: eager / compiled" in printed for b in rl.ATTENTION)


def test_fused_linear_cross_entropy_counts_one_kernel():
    """`fused=("linear_ce",)`: the token head's linear layer and its cross-entropy counted as one kernel (Liger's fused
    linear cross-entropy). Pre-training then moves fewer memory-bound and matmul-like bytes and saves fewer bytes (no
    (M, V) logits kept), and does the head's forward matmul once more (the mask accuracy's logits, which the fused
    kernel does not return); fine-tuning has no token head and counts the same."""
    plain, fused = (rl.count("tiny", "pretrain", fused=f) for f in ((), ("linear_ce",)))
    assert fused["memory_bytes"] < 0.9 * plain["memory_bytes"] and fused["saved_bytes"] < plain["saved_bytes"]
    assert fused["matmul_bytes"] < plain["matmul_bytes"]
    assert plain["flops"] < fused["flops"] < 1.1 * plain["flops"], (plain["flops"], fused["flops"])
    ft = [rl.count("tiny", "finetune", fused=f)["memory_bytes"] for f in ((), ("linear_ce",))]
    assert ft[0] == ft[1]


def test_fused_add_norm_and_linear_gelu_stand_ins_on_real_tensors():
    """On real tensors (fp32, dropout 0 so that the values compare): `layer_norm(x + dropout(h))` through `GpuStandIns`
    with `add_norm` gives the plain output and gradients, counts one kernel each way (h, x, the sum, the output, the
    row statistics; backward the sum again, the statistics and the gradients), and leaves no dropout, add or
    LayerNorm op in the count, nor the dropout's saved mask. `gelu(linear(x))` with its weight in `gelu_weights` gives
    the plain values and gradients, moves no GELU bytes and no bias reduction, and the epilogue's write and read of
    the GEMM's output count as matmul-like."""
    torch.manual_seed(0)
    M, D = 12, 8
    h, x = torch.randn(M, D, requires_grad=True), torch.randn(M, D, requires_grad=True)
    ln, drop = torch.nn.LayerNorm(D), torch.nn.Dropout(0.0)

    def block():
        return ln(x + drop(h))

    ref = block()
    dy = torch.randn_like(ref)
    gref = torch.autograd.grad(ref, (h, x, ln.weight, ln.bias), dy)
    moved, saved = rl.Bytes(), rl.SavedBytes(exclude=list(ln.parameters()))
    with moved:
        with saved.hooks(), rl.GpuStandIns(moved, saved, add_norm=True):
            out = block()
        g = torch.autograd.grad(out, (h, x, ln.weight, ln.bias), dy)
    torch.testing.assert_close(out, ref)
    for a, b in zip(g, gref):
        torch.testing.assert_close(a, b)
    n, stats, params = 4 * M * D, 8 * M, 8 * D
    assert moved.ops["_fused_add_layer_norm"] == 4 * n + stats + params  # h, x → s, y
    assert moved.ops["_fused_add_layer_norm_backward"] == 4 * n + stats + 2 * params  # dy, s → dh, dx; dw, db
    left = {
        k: v for k, v in moved.ops.items() if v and ("dropout" in k or k.startswith("native_layer_norm") or k == "add")
    }
    assert left == {}, left
    assert saved.total == n + stats

    lin = torch.nn.Linear(D, 4 * D)
    ref = torch.nn.functional.gelu(lin(x))
    dy = torch.randn_like(ref)
    gref = torch.autograd.grad(ref, (x, lin.weight, lin.bias), dy)
    moved, saved = rl.Bytes(), rl.SavedBytes(exclude=list(lin.parameters()))
    with moved:
        with saved.hooks(), rl.GpuStandIns(moved, saved, gelu_weights=(lin.weight,)):
            out = torch.nn.functional.gelu(lin(x))
        g = torch.autograd.grad(out, (x, lin.weight, lin.bias), dy)
    torch.testing.assert_close(out, ref)
    for a, b in zip(g, gref):
        torch.testing.assert_close(a, b)
    assert not any("gelu" in k for k in moved.ops) and moved.ops.get("sum", 0) == 0, moved.ops
    y = 4 * M * 4 * D
    plain = rl.Bytes()
    with plain:
        torch.nn.functional.linear(x, lin.weight, lin.bias)
    assert moved.ops["addmm"] == plain.ops["addmm"] + y  # the epilogue writes the activation beside y
    assert saved.total == 4 * M * D + y  # x for the weight gradient, y for the GELU's gradient


def test_fused_paths_counted_per_preset(tmp_path, capsys):
    """Each fused path on tiny's pre-training and fine-tuning: the same FLOPs (add_ln, gelu_epilogue); add_ln moves
    fewer memory-bound bytes and keeps no dropout masks, gelu_epilogue moves fewer memory-bound bytes and more
    matmul-like ones (the epilogues) and keeps the same; together, fewer than each. The compiled prediction does not
    change with add_ln (inductor fuses that group already) and does with gelu_epilogue (`--fused each`, one table and
    JSON); a path of another name is refused."""
    for wl in ("pretrain", "finetune"):
        plain, add_ln, gelu, both = (
            rl.count("tiny", wl, fused=f) for f in ((), ("add_ln",), ("gelu_epilogue",), ("add_ln", "gelu_epilogue"))
        )
        assert plain["flops"] == add_ln["flops"] == gelu["flops"] == both["flops"]
        assert add_ln["memory_bytes"] < 0.95 * plain["memory_bytes"] and add_ln["saved_bytes"] < plain["saved_bytes"]
        assert add_ln["matmul_bytes"] == plain["matmul_bytes"]
        assert gelu["memory_bytes"] < 0.97 * plain["memory_bytes"] and gelu["matmul_bytes"] > plain["matmul_bytes"]
        assert gelu["saved_bytes"] == plain["saved_bytes"]
        assert both["memory_bytes"] < min(add_ln["memory_bytes"], gelu["memory_bytes"])
    out = tmp_path / "fused.json"  # `--fused each`: as now, each path, all of them, in one table and JSON
    assert rl.main([*"--presets tiny --workloads pretrain --fused each --out".split(), str(out)]) == 0
    rows = {k: rs[0] for k, rs in json.loads(out.read_text())["by_fused"].items()}
    assert list(rows) == ["none", *rl.FUSED, " + ".join(rl.FUSED)]
    assert rows["add_ln"]["compiled_memory_bytes"] == pytest.approx(rows["none"]["compiled_memory_bytes"], rel=1e-9)
    assert rows["add_ln"]["memory_bytes"] < rows["none"]["memory_bytes"]
    assert rows["gelu_epilogue"]["compiled_memory_bytes"] < rows["none"]["compiled_memory_bytes"]
    printed = capsys.readouterr().out
    assert "| tiny | pretrain" in printed and all(f"{f}: eager / compiled" in printed for f in (*rl.FUSED, "all"))
    with pytest.raises(rl.RooflineError, match="fused: expected paths of linear_ce, add_ln, gelu_epilogue, got 'x'"):
        rl.count("tiny", fused=("x",))


def test_bad_preset_one_line_no_traceback():
    r = subprocess.run(
        [sys.executable, str(Path(rl.__file__)), "--presets", "tiny", "huge"], capture_output=True, text=True
    )
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "Traceback" not in r.stderr
    assert "huge" in r.stderr and "small" in r.stderr
    with pytest.raises(rl.RooflineError, match="workload"):
        rl.count("tiny", "evaluate")
