"""`make bench-gpu WHEELS=DIR` on an offline GPU box (issue 34), on this CPU: `make wheelhouse` writes the wheels of
everything the suite installs but torch; then `make bench-venv` with `PIP_NO_INDEX=1` makes the suite's venv from a
system Python that is itself a venv holding only torch and its own dependencies (a GPU image's /opt/torch/.venv):
the new venv sees that torch, and the kit, pytest and nbdev come from the wheelhouse alone. Before issue 34 the
install needed setuptools>=77 from an index, and `--system-site-packages` did not expose a venv's torch."""

import hashlib, importlib.metadata as md, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
LEFT_OUT = {"..", "__pycache__", "_distutils_hack", "setuptools", "pip"}  # a bare venv's own, or not torch's


def torch_closure() -> list[str]:
    "Top-level entries of the site-packages that torch and its dependencies (installed here) occupy."
    seen, todo = set(), ["torch"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for r in md.requires(name) or []:
            dep = re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower()
            if "extra ==" not in r and dep != "setuptools":
                try:
                    md.distribution(dep)
                    todo.append(dep)
                except md.PackageNotFoundError:
                    pass
    tops = {str(f).split("/")[0] for n in seen for f in md.distribution(n).files}
    return sorted(t for t in tops if t not in LEFT_OUT and not t.endswith(".pth") and not t.startswith("setuptools"))


def gpu_image_python(folder: Path) -> Path:
    "A venv whose site-packages hold only links to this torch and its dependencies: the GPU image's python3."
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = folder / "lib" / f"python{PY}" / "site-packages"
    here = Path(md.distribution("torch").locate_file(""))
    for top in torch_closure():
        (site / top).symlink_to(here / top)
    return folder / "bin" / "python"


@pytest.fixture(scope="module")
def wheelhouse():
    "The wheelhouse for this Python, made once per pyproject.toml in the user's cache (about a minute, 140 MB)."
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dest = cache / "vimpac" / f"wheelhouse-test-py{PY}-{key}"
    if not (dest / "done").exists():
        make = ["make", "--no-print-directory", "wheelhouse", f"WHEELS={dest}", f"WHEEL_PYTHON={PY}"]
        r = subprocess.run([*make, f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True, text=True, timeout=900)
        if r.returncode and ("Could not find" in r.stderr or "Network" in r.stderr or "connection" in r.stderr):
            pytest.skip(f"make wheelhouse needs a package index: {r.stderr.strip().splitlines()[-1]}")
        assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-3000:]
        (dest / "done").touch()
    return dest


@pytest.mark.slow
def test_bench_venv_installs_offline_from_the_wheelhouse(wheelhouse, tmp_path):
    system = gpu_image_python(tmp_path / "image")
    assert subprocess.run([system, "-c", "import nbdev"], capture_output=True).returncode != 0  # only torch's
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_NO_INDEX": "1"}
    cmd = ["make", "--no-print-directory", "bench-venv", f"VENV={venv}", f"PYTHON={system}", f"WHEELS={wheelhouse}"]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-3000:]
    probe = (
        "import torch, vimpac, pytest, nbdev; print(torch.__file__); print(torch.__version__); print(vimpac.__file__)"
    )
    out = subprocess.run([venv / "bin" / "python", "-c", probe], capture_output=True, text=True, check=True)
    torch_file, version, kit = out.stdout.split()
    import torch

    assert Path(torch_file).resolve() == Path(torch.__file__).resolve() and version == torch.__version__
    assert Path(kit).resolve().parent == ROOT / "vimpac"
    assert (venv / "bin" / "vimpac-pretrain").exists()
