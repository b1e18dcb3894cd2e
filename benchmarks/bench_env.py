"""`make bench-gpu`'s check of the environment, run by the system's Python before anything is installed (imports no
torch): a `.venv` whose torch is a CPU build, on a machine where `nvidia-smi` sees a GPU, is a stale CPU venv (made by
`make install` on a machine without a GPU, or before the system's CUDA torch was there). The suite would run on the
CPU or fail; it is refused with one line naming the fix, exit status 1.

    python3 benchmarks/bench_env.py --venv .venv --device cuda
    python3 benchmarks/bench_env.py --link-site .venv   # after `python3 -m venv --system-site-packages .venv`

`--link-site` (issue 34): where the system's `python3` is itself a virtual environment (a GPU image's
/opt/torch/.venv, say), `--system-site-packages` exposes the base interpreter's packages, not that environment's
torch; a `.pth` file in the new venv adds that environment's site-packages after its own.
"""

from __future__ import annotations  # the system's Python runs this, whichever it is
import argparse, shutil, subprocess, sys
from pathlib import Path


def stale_venv_message(
    venv_exists: bool,
    venv_torch_cuda: str | None,
    torch_version: str | None,
    gpu_seen: bool,
    device: str = "cuda",
    venv: str = ".venv",
) -> str | None:
    """The one-line refusal for `make bench-gpu`, or None to go on. `venv_exists`: `venv`/bin/python is there;
    `venv_torch_cuda`: its `torch.version.cuda` (None for a CPU build, or where torch does not import);
    `torch_version`: its `torch.__version__` (None where torch does not import); `gpu_seen`: `nvidia-smi -L` lists a
    GPU; `device`: the suite's `--device`. Refused: a CUDA run (`device` cuda...) on a machine with a GPU, from an
    existing venv whose torch imports and has no CUDA. A venv without torch is not refused (the install step adds
    the CPU wheel only where no torch imports, and a `--system-site-packages` venv sees the system's)."""
    if not (venv_exists and gpu_seen and device.startswith("cuda")) or torch_version is None or venv_torch_cuda:
        return None
    return (
        f"bench-gpu: {venv} has a CPU-only torch ({torch_version}) but nvidia-smi sees a GPU: run `make clean-venv`, "
        f"then `make bench-gpu` again (it makes a venv that keeps the system's CUDA torch)"
    )


def venv_torch(python: Path) -> tuple[str | None, str | None]:
    "(torch.__version__, torch.version.cuda) of the interpreter `python`; (None, None) where torch does not import."
    try:
        r = subprocess.run(
            [str(python), "-c", "import torch; print(torch.__version__); print(torch.version.cuda)"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    lines = r.stdout.split()
    if r.returncode or len(lines) < 2:
        return None, None
    return lines[0], None if lines[1] == "None" else lines[1]


def gpu_seen() -> bool:
    "Whether `nvidia-smi -L` lists a GPU (False where there is no nvidia-smi, or it fails)."
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        r = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def link_site(venv: Path) -> Path | None:
    """Where this Python runs in a virtual environment, write `venv`'s `_vimpac_parent_site.pth` naming this
    environment's site-packages (so that `venv`, made with `--system-site-packages`, sees its torch) and return the
    file; None where this Python is no venv (the system site-packages are already seen)."""
    import site, sysconfig

    if sys.prefix == sys.base_prefix:
        return None
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    target = Path(venv) / "lib" / version / "site-packages" / "_vimpac_parent_site.pth"
    paths = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    target.write_text("".join(f"{p}\n" for p in paths if Path(p).is_dir()))
    return target


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", default=".venv")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--link-site", metavar="VENV", help="make VENV see this Python's own site-packages (a venv's)")
    a = ap.parse_args(argv)
    if a.link_site:
        link_site(Path(a.link_site))
        return 0
    python = Path(a.venv) / "bin" / "python"
    exists = python.exists()
    if not (exists and a.device.startswith("cuda")):
        return 0
    seen = gpu_seen()
    version, cuda = venv_torch(python) if seen else (None, None)
    msg = stale_venv_message(exists, cuda, version, seen, a.device, a.venv)
    if msg:
        print(msg, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
