"""What `haiprof run` adds to a short script's whole run: wall time and CPU time (user + system, every process of
the run together: haiprof's own, the script's python, the sampler), against plain `python` on the same script,
the two interleaved pair by pair.

Two scripts: one that never imports torch (haiprof's fixed cost alone: its own start, the sampler, the report),
and one that trains 20 tiny steps (torch's import and teardown are the script's own, paid under python too).

    python benchmarks/startup_cost.py --pairs 9
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = {
    "no torch": "import json\nprint(json.dumps({'ok': True}))\n",
    "torch, 20 steps": (
        "import torch\n"
        "m = torch.nn.Linear(64, 64); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(20):\n"
        "    o.zero_grad(); m(torch.randn(32, 64)).pow(2).mean().backward(); o.step()\n"),
}


def timed(cmd: list[str], cwd: str) -> tuple[float, float]:
    """(wall s, CPU s of the command and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=9)
    args = ap.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, source) in enumerate(SCRIPTS.items()):
            script = Path(tmp) / "script.py"
            script.write_text(source)
            rows = {"python": [], "haiprof": []}
            for i in range(args.pairs):
                plain = [sys.executable, str(script)]
                out = str(Path(tmp) / f"r{k}-{i}")
                ours = [sys.executable, "-m", "haiprof", "run", "--quiet", "--out", out, str(script)]
                order = [("python", plain), ("haiprof", ours)]
                for name, cmd in order if i % 2 == 0 else order[::-1]:
                    rows[name].append(timed(cmd, tmp))
            med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in rows.items()}
            extra_wall = statistics.median(h[0] - p[0] for p, h in zip(rows["python"], rows["haiprof"]))
            extra_cpu = statistics.median(h[1] - p[1] for p, h in zip(rows["python"], rows["haiprof"]))
            print(f"{label:16s} python {med['python'][0]:.2f} s wall, {med['python'][1]:.2f} s CPU | "
                  f"haiprof {med['haiprof'][0]:.2f} s wall, {med['haiprof'][1]:.2f} s CPU | "
                  f"added per pair (median): {extra_wall:+.2f} s wall, {extra_cpu:+.2f} s CPU ({args.pairs} pairs)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
