"""haiprof's overhead, measured side by side: the same workload with and without `haiprof run`, interleaved.

    python benchmarks/overhead.py [--repeats 7] [--steps 200]

For each workload it alternates plain `python` and `haiprof run` runs, reads the step times the workload measures
itself (excluding its first 10 steps), and prints per pair the median step-time ratio, then the median and the
spread (min..max) of those ratios; plus haiprof's start-up + teardown cost as the median difference in whole-process
wall time minus the difference in time spent in steps. These machines are noisy: trust medians and ratios.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workloads" / "timed_steps.py"
SKIP = 10


def one_run(cmd: list[str]) -> tuple[float, float, float]:
    """(median step s, total step s, wall s) of one run."""
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    steps = json.loads(out.strip().splitlines()[-1])["step_s"][SKIP:]
    return statistics.median(steps), sum(steps), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kinds", default="compute,fast")
    ap.add_argument("--haiprof-args", default="", help="extra `haiprof run` options, e.g. '--trace-steps 0'")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-bench-"))
    print(f"python {sys.version.split()[0]}, {args.repeats} interleaved pairs per workload, {args.steps} steps/run, "
          f"haiprof options: {args.haiprof_args or '(defaults)'}, load average {open('/proc/loadavg').read().split()[0]}")
    for kind in args.kinds.split(","):
        wl = [str(WORKLOAD), "--kind", kind, "--steps", str(args.steps)]
        ratios, extra_wall, medians, self_reported = [], [], ([], []), []
        for i in range(args.repeats):
            plain = one_run([sys.executable, *wl])
            run_dir = tmp / f"{kind}-{i}"
            prof = one_run([sys.executable, "-m", "haiprof", "run", "--quiet", *args.haiprof_args.split(),
                            "--out", str(run_dir), *wl])
            own = json.loads((run_dir / "meta.json").read_text()).get("overhead_s", {})
            self_reported.append(own.get("setup", 0) + own.get("teardown", 0))
            ratios.append(prof[0] / plain[0])
            medians[0].append(plain[0])
            medians[1].append(prof[0])
            # start-up + teardown: extra wall time not explained by slower steps
            extra_wall.append((prof[2] - prof[1]) - (plain[2] - plain[1]))
            print(f"  {kind:8s} pair {i}: plain {plain[0] * 1e3:7.2f} ms  haiprof {prof[0] * 1e3:7.2f} ms  "
                  f"ratio {ratios[-1]:.3f}  extra wall {extra_wall[-1]:+.2f} s")
        print(f"{kind}: median step plain {statistics.median(medians[0]) * 1e3:.2f} ms, haiprof "
              f"{statistics.median(medians[1]) * 1e3:.2f} ms; step-time ratio median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}); start-up+teardown median "
              f"{statistics.median(extra_wall):+.2f} s (haiprof's own timers: set-up + teardown median "
              f"{statistics.median(self_reported):.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
