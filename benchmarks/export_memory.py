"""`haiprof export` of long runs: peak memory, CPU and output size, whole run and a stretch of it.

    python benchmarks/export_memory.py 100000 1000000
    python benchmarks/export_memory.py 1000000 --range 500000:500999 --keep RUNS
    python benchmarks/export_memory.py 1000000 --before OLD   # also OLD/haiprof (an older checkout's), in turn

Each run directory is benchmarks/report_size.write_run's (noisy DataLoader, forward, backward, optimizer, a step
mark: 5 records a step, one slow step at 3/4 of the run), written once and kept with --keep DIR. `haiprof export`
runs in a child process; printed per export: wall time, CPU time and peak RSS (the child's rusage, through wait4),
the file's size and the first line the command printed on stderr.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIB = 2 ** 20


def timed_export(run: Path, out: Path, *extra: str, pythonpath: str | None = None) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, stderr) of `haiprof export RUN --out OUT EXTRA...` in a child process."""
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "haiprof", "export", str(run), "--out", str(out), "--overwrite",
                             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=out.parent)   # not the checkout: `-m haiprof` would import its haiprof/ first
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().strip()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"export failed: {err[-500:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.report_size import write_run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="+")
    ap.add_argument("--range", action="append", default=[], metavar="A:B",
                    help="also export this stretch (--steps A:B), once per --range")
    ap.add_argument("--gz", action="store_true", help="write trace.chrome.json.gz")
    ap.add_argument("--keep", type=Path, help="keep the run directories here (reused when present)")
    ap.add_argument("--before", metavar="DIR", help="also time the haiprof package in DIR (an older checkout's "
                    "haiprof/, e.g. `git archive REV haiprof | tar -x -C DIR`), alternating with this one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        for n in args.steps:
            run = where / f"export-{n}"
            if not (run / "phases.bin").is_file():
                write_run(run, n, slow_at=n * 3 // 4)
            out = Path(tmp) / ("trace.json.gz" if args.gz else "trace.json")
            ranges = [r for r in args.range if int(r.split(":")[-1]) < n]   # a range past this run: not for it
            runs = [("before", args.before, ())] if args.before else []
            runs += [("now", None, extra) for extra in [()] + [("--steps", r) for r in ranges]]
            for label, path, extra in runs:
                wall, cpu, peak, err = timed_export(run, out, *extra, pythonpath=path)
                print(f"{n:,} steps {' '.join(extra) or '(whole run)'}, {label}: {wall:.1f} s ({cpu:.1f} s CPU), "
                      f"peak RSS {peak:.0f} MiB, {out.stat().st_size / MIB:.1f} MiB written; "
                      f"{err.splitlines()[0] if err else ''}", flush=True)


if __name__ == "__main__":
    main()
