"""Write the run notebooks' parameters from the config dataclasses' fields, or check that they agree.

    python tools/sync_parameters.py           rewrite the generated part of each parameters cell
    python tools/sync_parameters.py --check   exit status 1, naming the notebook, when a cell and the configs differ

Each run notebook's parameters cell (tagged `parameters`) holds its own parameters first (stores, folders, GPUs),
then, after the line `MARKER`, one parameter per knob of the model (`VimpacConfig`, as `vimpac-pretrain`'s model
options: None is the preset's) and of the loop (`PretrainConfig` or `FinetuneConfig`), written by
`vimpac.options.parameter_lines` with the notebook's small defaults (`RUNS`). The notebooks pass them on with
`vimpac.options.config_argv`, through the command-line tools' parsers."""

import argparse
import json
import sys
from pathlib import Path

from vimpac.finetune import FinetuneConfig
from vimpac.model import VimpacConfig
from vimpac.pretrain import PretrainConfig
from vimpac.options import config_fields, parameter_lines

ROOT = Path(__file__).resolve().parents[1]
MARKER = "# ---- generated from the configs' fields by tools/sync_parameters.py: edit the fields, then run it ----"
# notebook: (the loop's config, its fields left out, the defaults that differ from the config's: tiny, CPU-sized runs)
RUNS = {
    "nbs/runs/pretrain.ipynb": (PretrainConfig, (), dict(steps=6, batch_size=3, log_every=1)),
    # `views` is the notebook's own (the stored views, all of which training uses); every loop parameter None: the
    # notebook's `schedule` gives it (toy: a few CPU seconds; table12: the dataset's preset), else the config's default
    "nbs/runs/finetune.ipynb": (
        FinetuneConfig,
        ("views",),
        dict.fromkeys([f.name for f in config_fields(FinetuneConfig, ("views",))]),
    ),
}
NOTES = {FinetuneConfig: "; None: the schedule's, else the config's default"}


def generated(config_class, skip=(), defaults=None) -> list[str]:
    "The generated lines of a parameters cell: the marker, the model's knobs, then the loop's."
    unset = dict.fromkeys([f.name for f in config_fields(VimpacConfig)], None)
    lines = [MARKER, "# the model from scratch (VimpacConfig's fields; None: the preset's)"]
    lines += parameter_lines(VimpacConfig, (), unset)
    lines += [f"# the training loop ({config_class.__name__}'s fields{NOTES.get(config_class, '')})"]
    lines += parameter_lines(config_class, skip, defaults)
    return lines


def parameters_cell(nb: dict) -> dict:
    "The cell of the notebook `nb` tagged `parameters`."
    return next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))


def synced_source(path) -> tuple[str, str]:
    "(the parameters cell's text now, its text with the generated part rewritten) of the run notebook `path`."
    text = "".join(parameters_cell(json.loads(Path(path).read_text()))["source"])
    own = text.split(MARKER)[0].rstrip("\n")
    return text, "\n".join([own, *generated(*RUNS[str(Path(path).relative_to(ROOT))])])


def stale(root=ROOT) -> list[str]:
    "The run notebooks whose parameters cell differs from what the configs' fields give."
    return [name for name in RUNS if len(set(synced_source(Path(root) / name))) == 2]


def write(path):
    "Rewrite the generated part of the parameters cell of the run notebook `path`."
    nb = json.loads(Path(path).read_text())
    parameters_cell(nb)["source"] = synced_source(path)[1].splitlines(keepends=True)
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check; exit status 1 when a cell differs")
    a = p.parse_args(argv)
    names = stale()
    for name in names:
        if a.check:
            print(f"{name}: parameters cell differs from the configs' fields; run python tools/sync_parameters.py")
        else:
            write(ROOT / name)
            print(f"rewrote the parameters of {name}")
    return 1 if a.check and names else 0


if __name__ == "__main__":
    sys.exit(main())
