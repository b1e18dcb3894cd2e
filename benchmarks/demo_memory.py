"""The demo over many requests: the server's resident memory (RSS) and its files, measured, not asserted (issue 35).

Starts `vimpac-demo` (the shipped demo model) on a free port of 127.0.0.1 in its own process, sends `--requests`
reconstructions of the bundled sample videos through `gradio_client` one after another (varying the seed, so no
answer comes from a cache), and records after every `--every` requests the server's RSS (from /proc) and the files
and bytes under its temporary folders (`vimpac-demo-*` and Gradio's cache). A flat RSS and bounded folders are what
the issue asks for; the slope over the second half of the requests is printed.

    .venv/bin/python benchmarks/demo_memory.py --requests 500 --out benchmarks/results/demo_memory_cpu.json
"""

import argparse, json, os, platform, shutil, socket, subprocess, sys, tempfile, time
from pathlib import Path


def rss_mib(pid: int) -> float:
    "The resident memory of process `pid` in MiB (VmRSS of /proc/PID/status)."
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def folder_size(paths) -> tuple[int, float]:
    "(files, MiB) under the folders `paths`."
    files = [f for p in paths for f in Path(p).rglob("*") if f.is_file()]
    return len(files), sum(f.stat().st_size for f in files) / 2**20


def slope(points: list) -> float:
    "Least-squares slope of (x, y) `points`."
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--every", type=int, default=25, help="requests between two measurements")
    p.add_argument("--out", default=None, help="JSON file of the measurements")
    a = p.parse_args()
    from gradio_client import Client, handle_file
    from vimpac.video import sample_videos

    tmp = Path(tempfile.mkdtemp(prefix="vimpac-bench-demo-"))
    env = {**os.environ, "TMPDIR": str(tmp), "GRADIO_TEMP_DIR": str(tmp / "gradio"), "OMP_NUM_THREADS": "1"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = Path(sys.executable).parent / "vimpac-demo"
    server = subprocess.Popen(
        [str(demo), "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        client = None
        for _ in range(600):
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False, analytics_enabled=False)
                break
            except Exception:
                if server.poll() is not None:
                    raise SystemExit(f"vimpac-demo exited: {server.stderr.read().decode()[-2000:]}")
                time.sleep(1)
        videos, rows, t0 = sample_videos(), [], time.perf_counter()
        rows.append(dict(requests=0, rss_mib=rss_mib(server.pid), files=folder_size([tmp])[0]))
        for i in range(1, a.requests + 1):
            client.predict(
                handle_file(str(videos[i % len(videos)])), "block", 15, 0, i, "spatial", api_name="/reconstruct"
            )
            if i % a.every == 0 or i == a.requests:
                files, mib = folder_size([tmp])
                rows.append(dict(requests=i, rss_mib=round(rss_mib(server.pid), 1), files=files, tmp_mib=round(mib, 1)))
                print(rows[-1], flush=True)
        half = [(r["requests"], r["rss_mib"]) for r in rows if r["requests"] >= a.requests / 2]
        result = dict(
            machine=f"{platform.machine()}, {os.cpu_count()} CPU cores",
            requests=a.requests,
            seconds=round(time.perf_counter() - t0, 1),
            rss_slope_mib_per_request_second_half=round(slope(half), 4),
            rows=rows,
        )
        print(
            f"RSS {rows[0]['rss_mib']:.0f} -> {rows[-1]['rss_mib']:.0f} MiB over {a.requests} requests; "
            f"slope over the second half {result['rss_slope_mib_per_request_second_half']:.3f} MiB a request; "
            f"{rows[-1]['files']} files ({rows[-1]['tmp_mib']} MiB) under the demo's temporary folders"
        )
        if a.out:
            Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
