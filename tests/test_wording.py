"""What a user reads names the paper's parts as the paper does (issue 32): tables by their numbers, never by their
LaTeX labels (`tab:scale`), and the analysis appendix by the letter the paper gives it."""

import contextlib, io, json, re
from pathlib import Path

from vimpac.experiments import EXPERIMENTS, experiment_main

ROOT = Path(__file__).resolve().parents[1]
PAPER = json.loads((ROOT / "tests" / "fixtures" / "paper" / "paper.json").read_text())  # what the tests need of it


def _labels() -> list[str]:
    "The paper's table labels, in the order the tables are numbered (each caption's label)."
    return PAPER["table_labels"]


def _appendix_letters() -> dict[str, str]:
    "Each appendix section's title mapped to its letter (A, B, ... after `\\appendix`)."
    return {t: chr(ord("A") + i) for i, t in enumerate(PAPER["appendix_sections"])}


def _user_text() -> dict[str, str]:
    "The notebooks' cells (the chapters, the experiments, the runs), the README and `vimpac-experiment --list`."
    texts = {"README.md": (ROOT / "README.md").read_text()}
    for nb in sorted((ROOT / "nbs").rglob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        texts[str(nb.relative_to(ROOT))] = "\n".join("".join(c["source"]) for c in cells)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        experiment_main(["--list"])
    texts["vimpac-experiment --list"] = out.getvalue()
    return texts


def test_tables_are_named_by_number_not_by_label():
    labels = _labels()
    assert labels[:4] == ["tab:results", "tab:scale", "tab:input_resolution", "tab:non_pretraining"], labels
    pattern = re.compile(r"\b(" + "|".join(re.escape(label) for label in labels) + r")\b")
    found = {name: pattern.findall(text) for name, text in _user_text().items()}
    assert not {k: v for k, v in found.items() if v}, found
    for e in EXPERIMENTS.values():  # each experiment names its table by the paper's number
        number = int(e.table.removeprefix("Table "))
        assert labels[number - 1].removeprefix("tab:") in (
            e.name,
            {
                "model_size": "scale",
                "pretraining_tasks": "non_pretraining",
                "positive_distance": "cl_distribution",
                "negatives": "batch_size",
                "cl_mask": "mask_in_cl",
                "cl_weight": "loss_ratio",
                "masking_ratio": "appen_masking_ratio",
            }.get(e.name),
        ), (e.name, e.table)


def test_the_analysis_appendix_has_the_papers_letter():
    letter = _appendix_letters()["Additional Analysis Results"]
    assert letter == "F"
    wrong = {chr(c) for c in range(ord("A"), ord("H"))} - {letter}
    for e in EXPERIMENTS.values():
        assert not any(f"appendix {w}" in e.section for w in wrong), (e.name, e.section)
    for nb in sorted((ROOT / "nbs" / "experiments").glob("*.ipynb")):
        title = "".join(json.loads(nb.read_text())["cells"][0]["source"]).splitlines()[0]
        assert not any(f"appendix {w}" in title for w in wrong), (nb.name, title)
