"""Record GPU workloads under `haiprof run` and set haiprof's verdict and steady step time beside each script's own
clock: the check (and the recordings) the device-first analysis is validated against.

    python benchmarks/gpu_truth.py [--workloads DIR] [--only io,h2d] [--out DIR] [--fix-variants]
                                   [--workload-args '--device cpu --steps 60'] [--allow-cpu]

Each workload prints `OWN_CLOCK <tag> steps_per_s=... step_ms=...` (device synchronize only at both ends of the
steps it times; `Clock(warm=N)` in the shared workloads times steps N+1.., gpt_tiny's `--warm N` steps N..).
haiprof's tracing window (steps 0-1 warm-up, 2 the profiler's warm-up, then --trace-steps traced steps) is sized
to end before the script's clock starts, so the clock never times profiled steps, which `steady` leaves out by
definition: a 3-step window for clocks starting at step 6 or later, fewer below. The run directories are kept
(--out) and `truth.json`-style results written there: they are the fixtures a GPU session records.
Without a CUDA GPU it prints one line and exits 0 (--allow-cpu runs the CPU-capable workloads, for a dry run).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from gpu_overhead import DEFAULT_SHARED, LINE, has_cuda, workloads

WINDOW_START = 3        # first traced step: 2 warm-up steps, then the profiler's own warm-up step
MAX_TRACE_STEPS = 3     # haiprof's default


def first_clocked_step(script: Path, extra_args: list[str]) -> int | None:
    """The first step the script's own clock times, read from its source (and a --warm given to it)."""
    text = script.read_text()
    m = re.search(r"Clock\(warm=(\d+)\)", text)
    if m:
        return int(m.group(1)) + 1          # _clock.Clock: t0 after step N
    given = re.search(r"--warm[= ](\d+)", " ".join(extra_args))
    m = re.search(r'"--warm", type=int, default=(\d+)', text)
    if given or m:
        return int((given or m).group(1))   # t0 before step N
    return None


def trace_steps_for(first: int | None) -> int:
    """Traced steps so the window ends before the clock's first step (0: no window)."""
    if first is None:
        return MAX_TRACE_STEPS
    return max(0, min(MAX_TRACE_STEPS, first - WINDOW_START))


def run_one(script: Path, out: Path, fix: str | None, extra: list[str], timeout: float) -> dict:
    first = first_clocked_step(script, extra)
    k = trace_steps_for(first)
    cmd = [sys.executable, "-m", "haiprof", "run", "--quiet", "--trace-steps", str(k), "--out", str(out),
           *(["--fix", fix] if fix else []), str(script), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    found = LINE.findall(r.stdout)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    steady = (summary.get("step_time_s") or {}).get("steady")
    own = float(found[-1][2]) if found else None
    return {"workload": " ".join([script.name, *(["--fix", fix] if fix else []), *extra]), "exit": r.returncode,
            "verdict": summary.get("bottleneck"), "headline": summary.get("headline"),
            "step_ms": own, "steady_ms": None if steady is None else round(steady * 1e3, 3),
            "ratio": None if not (own and steady) else round(steady * 1e3 / own, 4),
            "clock_from_step": first, "trace_steps": k, "timeline": (summary.get("device") or {}).get("timeline"),
            "error": None if r.returncode == 0 and found else (r.stderr[-1500:] or "no OWN_CLOCK line")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=Path,
                    default=Path(os.environ.get("HAIPROF_GPU_WORKLOADS", DEFAULT_SHARED)))
    ap.add_argument("--only", default="", help="comma-separated workload names (file stems, gpu_ prefix optional)")
    ap.add_argument("--out", type=Path, default=Path("haiprof-runs") / f"gpu-truth-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--fix-variants", action="store_true", help="also record each workload with --fix auto")
    ap.add_argument("--workload-args", default="", help="arguments passed to every workload")
    ap.add_argument("--allow-cpu", action="store_true", help="run without a CUDA GPU (a dry run of this harness)")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    if not has_cuda() and not args.allow_cpu:
        print("gpu_truth: skipped, no CUDA GPU on this machine (torch.cuda.is_available() is False)")
        return 0
    only = set(filter(None, args.only.split(","))) or None
    extra = shlex.split(args.workload_args)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for wl in workloads(args.workloads, only):
        for fix in [None, "auto"] if args.fix_variants else [None]:
            name = wl.stem.removeprefix("gpu_") + ("_auto" if fix else "_base")
            results[name] = res = run_one(wl, args.out / name, fix, extra, args.timeout)
            print(f"  {name}: {res['verdict']}, steady {res['steady_ms']} ms, own clock {res['step_ms']} ms"
                  + (f"  ERROR {res['error'][-300:]}" if res["error"] else ""), flush=True)
    (args.out / "truth.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    print("\n| run | verdict | steady ms | own clock ms | steady / clock | clock from step | traced steps |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(f"| {name} | {r['verdict']} | {r['steady_ms']} | {r['step_ms']} | {ratio} | {r['clock_from_step']} "
              f"| {r['trace_steps']} |")
    print(f"\nrun directories and truth.json: {args.out}")
    return 1 if any(r["error"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
