"""What the op-level tracing window costs, measured side by side.

Runs examples/launch_bound.py (the worst case for a profiler: thousands of tiny ops per step) under
`haiprof run --trace-steps 0` and under the default window, alternating, and prints medians of:
  * the median step time haiprof reports (traced steps excluded): the window must not leak into it;
  * the window's wall time (profiler start to export end) against a normal step: its one-time cost;
  * the whole run's wall time.

    python benchmarks/trace_window.py [--reps 3] [--steps 40]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(out: Path, trace_steps: int, steps: int) -> dict:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "haiprof", "run", "--quiet", "--trace-steps", str(trace_steps),
                    "--out", str(out), str(REPO / "examples" / "launch_bound.py"), "--steps", str(steps)],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    s = json.loads((out / "summary.json").read_text())
    marks = {}
    from haiprof.rundir import RunDir
    for rec in RunDir(out).read_phase_records():
        if rec[0] in ("@trace-begin", "@trace-end"):
            marks[rec[0]] = rec[1]
    window = (marks["@trace-end"] - marks["@trace-begin"]) / 1e9 if len(marks) == 2 else None
    return {"wall": wall, "step": s["step_time_s"]["median"], "window": window}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    res = {0: [], 3: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.reps):
            for ts in (0, 3):
                res[ts].append(run(Path(tmp) / f"r{i}-{ts}", ts, a.steps))
    med = {ts: {k: statistics.median(r[k] for r in rs if r[k] is not None) if any(r[k] for r in rs) else None
                for k in ("wall", "step", "window")} for ts, rs in res.items()}
    print(f"launch_bound.py, {a.steps} steps, {a.reps} runs each (medians)")
    print(f"  median step, window off : {med[0]['step'] * 1e3:.1f} ms")
    print(f"  median step, window on  : {med[3]['step'] * 1e3:.1f} ms  (ratio {med[3]['step'] / med[0]['step']:.2f})")
    print(f"  window wall time        : {med[3]['window']:.2f} s = {med[3]['window'] / med[0]['step']:.0f} normal steps"
          f" (5 steps: profiler warm-up, 3 traced, export)")
    print(f"  run wall time off / on  : {med[0]['wall']:.1f} s / {med[3]['wall']:.1f} s"
          f"  (ratio {med[3]['wall'] / med[0]['wall']:.2f})")


if __name__ == "__main__":
    main()
