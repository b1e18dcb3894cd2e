"""Models on the Hugging Face Hub, through `huggingface_hub` and offline (issue 32): `from_pretrained` takes a repo id
resolved from a pre-filled Hub cache with HF_HUB_OFFLINE=1, a missing repo is one line, and `push_to_hub` uploads
what `save_pretrained` writes with a model card."""

import json, os, shutil, subprocess, sys
from pathlib import Path

import pytest
import torch

hub = pytest.importorskip("huggingface_hub", reason="huggingface_hub is not installed (pip install huggingface_hub)")
from vimpac.inference import DEMO_CHECKPOINT
from vimpac.model import VimpacConfig, VimpacForPreTraining, VimpacForVideoClassification, model_card

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _hub_cache(root: Path, repo: str, folder: Path) -> Path:
    "A Hub cache under `root` holding `folder`'s files as the main revision of the model repo `repo` (a download's)."
    base = root / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for f in ("config.json", "model.safetensors", "README.md"):
        shutil.copy(folder / f, snap / f)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(COMMIT)
    return root


def _load(repo: str, cache: Path):
    code = (
        "import sys, torch\n"
        "from vimpac.model import VimpacForPreTraining\n"
        "from vimpac.utils import VimpacError\n"
        "try:\n"
        f"    m = VimpacForPreTraining.from_pretrained({repo!r})\n"
        "except VimpacError as e:\n"
        "    print('error:', e); sys.exit(2)\n"
        "print(sum(float(p.double().sum()) for p in m.parameters()))"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_a_repo_id_loads_from_the_hub_cache_offline(tmp_path):
    cache = _hub_cache(tmp_path / "hub", "vimpac/demo-tiny", DEMO_CHECKPOINT)
    local = VimpacForPreTraining.from_pretrained(DEMO_CHECKPOINT)
    r = _load("vimpac/demo-tiny", cache)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip()) == sum(
        float(p.detach().double().sum()) for p in local.parameters()
    )  # the same weights
    r = _load(f"vimpac/demo-tiny@{COMMIT}", cache)  # a revision: the commit
    assert r.returncode == 0, r.stderr
    r = _load("vimpac/no-such-model", cache)
    assert r.returncode == 2 and r.stdout.strip() == (
        "error: vimpac/no-such-model: not a folder, nor a Hub model repo that can be read (offline: HF_HUB_OFFLINE is "
        "set, and the Hub cache has no copy)"
    ), r.stdout + r.stderr


def test_push_to_hub_uploads_the_saved_files_and_a_card(tmp_path, monkeypatch):
    "With the Hub client replaced by a recorder: the repo is made, and the uploaded folder loads back as the model."
    calls = {}

    class FakeApi:
        def __init__(self, token=None):
            calls["token"] = token

        def create_repo(self, repo_id, private=None, exist_ok=False):
            calls["repo"] = (repo_id, private, exist_ok)

        def upload_folder(self, repo_id, folder_path, commit_message):
            shutil.copytree(folder_path, tmp_path / "uploaded")
            return f"https://huggingface.co/{repo_id}/commit/{COMMIT}"

    monkeypatch.setattr(hub, "HfApi", FakeApi)
    cfg = VimpacConfig.from_preset("tiny", vocab_size=16, token_map=(2, 2), max_clip_len=2)
    model = VimpacForVideoClassification(cfg, num_classes=3)
    url = model.push_to_hub("me/tiny-classifier", card="Trained on nothing: a test.", private=True)
    assert url.endswith(COMMIT) and calls["repo"] == ("me/tiny-classifier", True, True)
    up = tmp_path / "uploaded"
    assert sorted(p.name for p in up.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    card = hub.ModelCard.load(up / "README.md")
    assert card.data.library_name == "vimpac" and card.data.pipeline_tag == "video-classification"
    assert "Trained on nothing: a test." in card.text and "from_pretrained" in card.text
    back = VimpacForVideoClassification.from_pretrained(up)
    assert back.num_classes == 3 and json.loads((up / "config.json").read_text())["num_classes"] == 3
    for a, b in zip(back.parameters(), model.parameters()):
        assert torch.equal(a, b)
    assert model_card(VimpacForPreTraining(cfg)).data.pipeline_tag == "feature-extraction"  # a pre-training model
