"""`make wheelhouse`: on a machine with a package index, the wheels that `make bench-gpu WHEELS=DIR` installs on an
offline GPU box (issue 34): the kit's dependencies and its `bench` extra with all of theirs, and the build backend
(setuptools) for the kit's own editable install, for the GPU box's Python version and platform. Torch is left out:
the GPU box keeps its own build (a CUDA or NGC torch, pre-releases such as 2.5.0a0+... included).

    python3 tools/wheelhouse.py --dest wheelhouse --python-version 3.12 --platform manylinux_2_28_x86_64

The resolution runs with a stand-in torch (a metadata-only wheel of version `--torch`+wheelhouse, never
downloaded): pip resolves the rest as it would beside that torch without fetching torch or its CUDA libraries.
Then each resolved distribution but torch and the kit is downloaded as a wheel (`pip download --no-deps
--only-binary=:all:`). Exit status: pip's where it fails, 2 for bad options; one line on stderr.
"""

from __future__ import annotations  # the system's Python runs this, whichever it is

import argparse, json, os, subprocess, sys, tempfile, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# platform tags pip should accept for a platform given as manylinux_2_N_ARCH: every older glibc's too
LEGACY = {"x86_64": ["manylinux2014_x86_64", "manylinux1_x86_64"], "aarch64": ["manylinux2014_aarch64"]}
SKIP = {"torch", "vimpac"}  # the GPU box's own torch; the kit itself is installed from the checkout


def platforms(platform: str) -> list[str]:
    """`platform` and the older tags it implies: manylinux_2_28_x86_64 → manylinux_2_28 ... manylinux_2_17 and the
    legacy aliases (pip matches each tag exactly); any other tag as it is."""
    parts = platform.split("_")
    if platform.startswith("manylinux_2_") and len(parts) >= 4 and parts[2].isdigit():
        arch, glibc = "_".join(parts[3:]), int(parts[2])
        return [f"manylinux_2_{n}_{arch}" for n in range(glibc, 16, -1)] + LEGACY.get(arch, [])
    return [platform]


def stub_torch(folder: Path, version: str) -> str:
    "Write a metadata-only torch wheel of `version`+wheelhouse into `folder`; return that version."
    v = f"{version.split('+')[0]}+wheelhouse"
    info = f"torch-{v}.dist-info"
    with zipfile.ZipFile(folder / f"torch-{v}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {v}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: vimpac\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return v


def resolve(python_version: str, tags: list[str], torch_version: str, extra: str) -> list[tuple[str, str]]:
    """(name, version) of every distribution `pip install ROOT[extra]` would install for that Python and platform
    beside a torch of `torch_version`, torch and the kit left out."""
    with tempfile.TemporaryDirectory(prefix="vimpac-wheelhouse-") as tmp:
        tmp = Path(tmp)
        v = stub_torch(tmp, torch_version)
        (tmp / "constraints.txt").write_text(f"torch=={v}\n")
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        cmd += ["--report", str(tmp / "report.json"), "--only-binary=:all:", "--implementation", "cp"]
        cmd += ["--python-version", python_version, *[f"--platform={t}" for t in tags], "--target", str(tmp / "t")]
        cmd += ["--find-links", str(tmp), "-c", str(tmp / "constraints.txt"), f"{ROOT}[{extra}]", "setuptools>=77"]
        subprocess.run(cmd, check=True)
        report = json.loads((tmp / "report.json").read_text())
    got = [(i["metadata"]["name"], i["metadata"]["version"]) for i in report["install"]]
    return [(n, ver) for n, ver in got if n.lower() not in SKIP]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", default="wheelhouse", help="folder of the wheels (made if missing)")
    ap.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    ap.add_argument("--platform", default="manylinux_2_28_x86_64", help="the GPU box's newest platform tag")
    ap.add_argument("--torch", default=None, help="the GPU box's torch version (default: this Python's, else 2.5)")
    ap.add_argument("--extra", default="bench")
    a = ap.parse_args(argv)
    if not a.python_version.replace(".", "").isdigit() or a.python_version.count(".") != 1:
        print(
            f"wheelhouse: error: --python-version: expected MAJOR.MINOR such as 3.12, got {a.python_version!r}",
            file=sys.stderr,
        )
        return 2
    torch_version = a.torch
    if torch_version is None:
        try:
            import torch

            torch_version = torch.__version__
        except ImportError:
            torch_version = "2.5.0"
    tags = platforms(a.platform)
    try:
        dists = resolve(a.python_version, tags, torch_version, a.extra)
        dest = Path(a.dest)
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
        cmd += ["--implementation", "cp", "--python-version", a.python_version, *[f"--platform={t}" for t in tags]]
        subprocess.run(cmd + [f"{n}=={v}" for n, v in dists], check=True)
    except subprocess.CalledProcessError as e:
        print(f"wheelhouse: error: pip failed (exit status {e.returncode}); see its output above", file=sys.stderr)
        return e.returncode or 1
    n = len(list(dest.glob("*.whl")))
    print(
        f"wheelhouse: {len(dists)} distributions for Python {a.python_version} on {a.platform}: {n} wheels in "
        f"{dest} (torch {torch_version} left to the GPU box)"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    sys.exit(main())
