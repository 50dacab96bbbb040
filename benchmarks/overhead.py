"""haiprof's overhead, measured side by side: the same workload with and without `haiprof run`, interleaved.

    python benchmarks/overhead.py [--repeats 7] [--steps 200] [--decompose]

For each workload it alternates plain `python` and `haiprof run` runs, reads the step times the workload measures
itself (excluding its first 10 steps), and prints per pair the median step-time ratio, then the median and the
spread (min..max) of those ratios; plus haiprof's start-up + teardown cost as the median difference in whole-process
wall time minus the difference in time spent in steps. These machines are noisy: trust medians and ratios.

--decompose runs, in each repeat and in a rotated order, plain python and haiprof with its parts taken away one at a
time (the tracing window, then the system sampler), so the difference between neighbouring rows is what that part
costs. `cpu/step` is the training process's CPU time (all threads) per step after the first 10, minus plain
python's: the work haiprof adds in the process, which a noisy machine blurs far less than wall time; `sampler
cpu/step` is the side sampler's own cost (its records' cost_ns) over the run, per step.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workloads" / "timed_steps.py"
SKIP = 10

# label -> extra `haiprof run` options; None is plain python. Each row removes one more part than the row above.
DECOMPOSITION = {
    "python": None,
    "haiprof (defaults)": [],
    "- tracing window": ["--trace-steps", "0"],
    "- system sampler": ["--trace-steps", "0", "--sample-interval", "3600"],
}


def one_run(cmd: list[str], run_dir: Path | None = None) -> tuple[float, float, float, float, float]:
    """(median step s, total step s, wall s, training process CPU s over the steps after the first SKIP, sampler
    CPU s over the whole run) of one run."""
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    timed = json.loads(out.strip().splitlines()[-1])
    steps = timed["step_s"][SKIP:]
    return statistics.median(steps), sum(steps), wall, timed["cpu_s"], sampler_cpu(run_dir)


def sampler_cpu(run_dir: Path | None) -> float:
    """The side sampler's own timing of its samples (cost_ns of every record): its CPU work, off the process."""
    total = 0
    for f in (run_dir / "samples").glob("*.jsonl") if run_dir else ():
        total += sum(json.loads(line).get("cost_ns", 0) for line in f.read_text().splitlines() if line.strip())
    return total / 1e9


def haiprof_cmd(opts: list[str], run_dir: Path, wl: list[str]) -> list[str]:
    return [sys.executable, "-m", "haiprof", "run", "--quiet", *opts, "--out", str(run_dir), *wl]


def pairs(args, kind: str, wl: list[str], tmp: Path) -> None:
    ratios, extra_wall, medians, self_reported = [], [], ([], []), []
    for i in range(args.repeats):
        plain = one_run([sys.executable, *wl])
        run_dir = tmp / f"{kind}-{i}"
        prof = one_run(haiprof_cmd(args.haiprof_args.split(), run_dir, wl))
        own = json.loads((run_dir / "meta.json").read_text()).get("overhead_s", {})
        self_reported.append(own.get("setup", 0) + own.get("teardown", 0))
        ratios.append(prof[0] / plain[0])
        medians[0].append(plain[0])
        medians[1].append(prof[0])
        # start-up + teardown: extra wall time not explained by slower steps
        extra_wall.append((prof[2] - prof[1]) - (plain[2] - plain[1]))
        print(f"  {kind:8s} pair {i}: plain {plain[0] * 1e3:7.2f} ms  haiprof {prof[0] * 1e3:7.2f} ms  "
              f"ratio {ratios[-1]:.3f}  extra wall {extra_wall[-1]:+.2f} s", flush=True)
    print(f"{kind}: median step plain {statistics.median(medians[0]) * 1e3:.2f} ms, haiprof "
          f"{statistics.median(medians[1]) * 1e3:.2f} ms; step-time ratio median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); start-up+teardown median "
          f"{statistics.median(extra_wall):+.2f} s (haiprof's own timers: set-up + teardown median "
          f"{statistics.median(self_reported):.3f} s)", flush=True)


def decompose(args, kind: str, wl: list[str], tmp: Path) -> None:
    labels = list(DECOMPOSITION)
    runs: dict[str, list] = {label: [] for label in labels}
    for i in range(args.repeats):
        order = labels[i % len(labels):] + labels[:i % len(labels)]   # rotated: no variant always runs first
        for label in order:
            opts = DECOMPOSITION[label]
            run_dir = None if opts is None else tmp / f"{kind}-{i}-{labels.index(label)}"
            cmd = [sys.executable, *wl] if opts is None else haiprof_cmd(opts, run_dir, wl)
            runs[label].append(one_run(cmd, run_dir))
        print(f"  {kind} repeat {i}: " + "  ".join(f"{label} {runs[label][-1][0] * 1e3:.2f} ms" for label in labels),
              flush=True)
    base = runs["python"]
    print(f"{kind} ({args.steps} steps a run, {args.repeats} repeats):")
    print(f"  {'':22s} {'median step':>12s} {'ratio to python: median (min-max)':>36s} {'cpu/step':>11s} "
          f"{'sampler cpu/step':>17s}")
    steady = args.steps - SKIP
    for label in labels:
        ratios = [r[0] / b[0] for r, b in zip(runs[label], base)]
        extra_cpu = [(r[3] - b[3]) / steady for r, b in zip(runs[label], base)]
        sampler = [r[4] / args.steps for r in runs[label]]
        print(f"  {label:22s} {statistics.median(r[0] for r in runs[label]) * 1e3:9.2f} ms "
              f"{statistics.median(ratios):>20.3f} ({min(ratios):.3f}-{max(ratios):.3f}) "
              f"{statistics.median(extra_cpu) * 1e6:+8.0f} us {statistics.median(sampler) * 1e6:14.0f} us",
              flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kinds", default="compute,fast")
    ap.add_argument("--haiprof-args", default="", help="extra `haiprof run` options, e.g. '--trace-steps 0'")
    ap.add_argument("--decompose", action="store_true", help="take haiprof's parts away one at a time")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-bench-"))
    print(f"python {sys.version.split()[0]}, {args.repeats} interleaved repeats per workload, {args.steps} steps/run, "
          f"haiprof options: {args.haiprof_args or '(defaults)'}, load average {open('/proc/loadavg').read().split()[0]}")
    for kind in args.kinds.split(","):
        wl = [str(WORKLOAD), "--kind", kind, "--steps", str(args.steps)]
        (decompose if args.decompose else pairs)(args, kind, wl, tmp)
    print(f"load average at the end {open('/proc/loadavg').read().split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
