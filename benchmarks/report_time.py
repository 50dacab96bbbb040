"""`haiprof report` time of two versions of haiprof side by side, on copies of the same run directories.

    python benchmarks/report_time.py --old OLD_SITE [--new NEW_SITE] [--repeat 5] RUN_DIR...

OLD_SITE / NEW_SITE: a directory holding an installed haiprof (`pip install --no-deps --target DIR SRC` of a
checkout), put first on PYTHONPATH for that version's child processes; without --new, the haiprof this python
imports. Each run directory is copied once per version (a report rewrites summary.json and report.html in the
directory it is given), then reported REPEAT times per version, the two versions alternated so a change in the
machine's load falls on both. Printed per run: the median wall time, CPU time and peak RSS (the child's rusage)
of each version and the CPU ratio new / old; then the median of the per-run ratios.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed_report(run: Path, site: str | None) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `haiprof report --quiet RUN` in a child process (its rusage)."""
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "haiprof", "report", "--quiet", str(run)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"report of {run} failed: {proc.stderr.read()[-500:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="site directory of the old haiprof")
    ap.add_argument("--new", help="site directory of the new haiprof (default: the one this python imports)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("runs", nargs="+", type=Path)
    a = ap.parse_args()
    for r in a.runs:
        if not (r / "meta.json").is_file():
            raise SystemExit(f"{r}: not a run directory")
    ratios = []
    with tempfile.TemporaryDirectory() as d:
        for run in a.runs:
            copies = {}
            for version in ("old", "new"):
                copies[version] = Path(d) / version / run.name
                shutil.copytree(run, copies[version])
            times: dict = {"old": [], "new": []}
            for _ in range(a.repeat):
                for version, site in (("old", a.old), ("new", a.new)):
                    times[version].append(timed_report(copies[version], site))
            med = {v: tuple(statistics.median(x[k] for x in t) for k in range(3)) for v, t in times.items()}
            ratio = med["new"][1] / med["old"][1]
            ratios.append(ratio)
            print(f"{run.name}: old {med['old'][0]:.2f} s wall ({med['old'][1]:.2f} s CPU, {med['old'][2]:.0f} MiB), new "
                  f"{med['new'][0]:.2f} s wall ({med['new'][1]:.2f} s CPU, {med['new'][2]:.0f} MiB); CPU new/old "
                  f"{ratio:.3f}", flush=True)
    print(f"median CPU ratio new/old over {len(ratios)} runs: {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
