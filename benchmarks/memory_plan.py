"""The kit's memory plan against an independent count, per preset, with and without gradient checkpointing (issue 34).

    .venv/bin/python benchmarks/memory_plan.py [--presets tiny small base large_half] [--out
    benchmarks/results/memory_plan.json]

For each preset and workload (`roofline.WORKLOADS`: pre-training at T = 5 on 16 x 16 tokens, one sample = two clips;
fine-tuning at T = 10 on 32 x 32 tokens, one sample = one clip), bf16 autocast, as a CUDA device runs the step
(`vimpac.memory.CudaStandIns`: CUDA's fp32 autocast list, the attention kernels the kit pins):
- the plan: the micro-batch the kit takes on a GPU with 80 GiB free at the workload's default global batch
  (`vimpac.memory.memory_model(..., cuda=True)` and `vimpac.engine.plan_steps`, as `pretrain` / `finetune` plan with
  `--micro-batch-size auto`), and the plan's peak there;
- the plan before issue 34's second pass (`cuda=False`: the CPU's autocast and attention, no accumulator), at the same
  micro-batch;
- the independent count: the peak of live tensors over a whole step at that micro-batch
  (`vimpac.memory.step_peak_bytes`: torch's `MemTracker` on fake tensors, forward, backward with its
  recomputation, AdamW), plus `RESERVED_BYTES`, the CUDA context and workspaces that no count of tensors sees;
- where `results/gpu-h100-attention.json` has a measured peak for the same step (fine-tuning Small at 16 clips, and at
  64 and 128 with checkpointing), the count and the plan at that micro-batch beside it.

Everything is counted on fake tensors (shapes and dtypes, no values, no memory): seconds per row on a CPU, and the same
numbers on any machine.
"""

import argparse, json, sys, time
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_utils import machine_name  # noqa: E402
from roofline import GPU_BYTES, PRESET_ORDER, WORKLOADS, check_presets, plan_setup  # noqa: E402

H100 = HERE / "results" / "gpu-h100-attention.json"


def h100_peaks() -> dict:
    "(preset, workload, checkpointing) → {micro-batch: peak allocated bytes} measured on an H100 (issue 34)."
    if not H100.exists():
        return {}
    runs = json.loads(H100.read_text())["runs"]
    out = {}
    for r in runs.get("run2/ft16", []) + runs.get("run2/ftck", []):
        micro = int(r["case"].split(":")[3])
        out.setdefault(("small", "finetune", bool(r["checkpointing"])), {})[micro] = r["peak_mem_gb"] * 1e9
    return out


def row(preset: str, workload: str, checkpointing: bool, measured: dict) -> dict:
    "The plan, the old plan and the independent count of one preset, workload and checkpointing (bytes)."
    from vimpac.engine import plan_steps
    from vimpac.memory import RESERVED_BYTES, memory_model, step_peak_bytes

    make_model, make_inputs, cfg, least = plan_setup(preset, workload, checkpointing)
    t = time.perf_counter()
    model = make_model()
    plan = memory_model(model, make_inputs, torch.bfloat16, cuda=True)
    old = memory_model(model, make_inputs, torch.bfloat16)
    micro = plan_steps(cfg, 10**6, 1, plan, GPU_BYTES, least=least)[1]
    micros = sorted({micro, *measured})
    counted = {m: step_peak_bytes(make_model, make_inputs, m, torch.bfloat16, cuda=True) for m in micros}
    return dict(
        preset=preset,
        workload=workload,
        sample=WORKLOADS[workload]["sample"],
        checkpointing=checkpointing,
        micro=micro,
        plan_fixed=plan.fixed,
        plan_per_sample=plan.per_sample,
        old_plan_per_sample=old.per_sample,
        at={
            m: dict(
                plan=plan.peak(m),
                old_plan=old.peak(m),
                counted=counted[m],
                counted_with_reserve=counted[m] + RESERVED_BYTES,
                measured=measured.get(m),
            )
            for m in micros
        },
        seconds=time.perf_counter() - t,
    )


def table(rows: list[dict]) -> str:
    "The README's table: one line per (row, micro-batch), GiB."

    def g(b):
        return "-" if b is None else f"{b / 2**30:.1f}"

    out = [
        "| preset, workload (sample) | checkpointing | micro-batch | the plan | independent count + reserve"
        " | plan / count | plan before (no CUDA stand-ins) | measured on an H100 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for m, a in sorted(r["at"].items(), key=lambda kv: int(kv[0])):
            planned = " (planned on 80 GiB)" if int(m) == r["micro"] else ""
            out.append(
                f"| {r['preset']}, {r['workload']} ({r['sample']}) | {'on' if r['checkpointing'] else 'off'} "
                f"| {m}{planned} | {g(a['plan'])} | {g(a['counted_with_reserve'])} "
                f"| {a['plan'] / a['counted_with_reserve']:.2f} | {g(a['old_plan'])} | {g(a['measured'])} |"
            )
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESET_ORDER))
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--out", type=Path, help="write the rows as JSON")
    a = p.parse_args(argv)
    try:
        presets = check_presets(a.presets)
    except ValueError as e:
        print(f"memory_plan.py: error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    peaks, rows = h100_peaks(), []
    for preset in presets:
        for workload in a.workloads:
            for checkpointing in (False, True):
                r = row(preset, workload, checkpointing, peaks.get((preset, workload, checkpointing), {}))
                rows.append(r)
                print(
                    f"{preset} {workload} checkpointing {'on' if checkpointing else 'off'}: micro-batch {r['micro']}, "
                    f"plan {r['at'][r['micro']]['plan'] / 2**30:.1f} GiB, count "
                    f"{r['at'][r['micro']]['counted_with_reserve'] / 2**30:.1f} GiB ({r['seconds']:.0f} s)",
                    flush=True,
                )
    print(table(rows))
    if a.out:
        meta = dict(machine=machine_name("cpu"), torch=torch.__version__, gpu_bytes=GPU_BYTES)
        a.out.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
