"""Baseline vs fixed steps/s on the bundled examples, side by side in one run.

    python benchmarks/fixes.py [--repeats 5] [--only input-bound,compute-bound] [--only ROW:FIX] [--json rows.json]

For each row, unfixed and fixed `haiprof run`s of the same example alternate (A B A B ...), so load on a shared
machine hits both alike. steps/s is the throughput of the measured window: the steps after the first SKIP_STEPS
(warm-up; the `compile` fix compiles at the second call and its first backward), leaving out the steps the
tracing window profiled, divided by the time they took. Not 1 / median step time: with prefetching workers
batches arrive in bursts, most steps find their batch ready, and the median step says nothing about throughput.
The speedup is the median fixed over the median baseline, with the spread (min-max) of the per-pair ratios.
Compile time comes from torch's own compile timers and is printed separately; the script checks that no step
of the window overlapped compilation (a step > COMPILE_STEP_FACTOR x the window's median is reported).
Wall time per run includes worker start-up and compile time. Beside each speedup the row prints the ratio
haiprof itself reported for the fixed run (summary `fixes.gain.speedup`, steady step against its baseline), the
ratio by the script's own clock (its `OWN_CLOCK steps=N step_ms=X` line, medians over the runs) and the
whole-run wall-time ratio; the three should agree where compilation and start-up are small. The load
average (/proc/loadavg, 1 min) is printed before and after each row: the machine may be shared.
The communication row runs 2 ranks (`haiprof run --nproc-per-node 2`) inside a network namespace whose loopback
is shaped to 1 Gbit/s (benchmarks/shaped_net.py); it is reported, not run, where that cannot be created.
A row whose example is not in this tree is reported, not run. Adding a workload is one line in ROWS.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks import shaped_net  # noqa: E402

SHAPED_RATE = "1gbit"
SKIP_STEPS = 3
COMPILE_STEP_FACTOR = 10
LOSS_TAIL = 5   # as the loss guard: mean loss over the last steps both runs have

# (row name, example, its arguments, --fix value, goal speedup, runner)
ROWS = [
    ("input-bound", "examples/input_bound.py", ["--batches", "200"], "prefetch", 2.5, "python"),
    ("compute-bound", "examples/compute_bound.py", ["--steps", "20"], "amp", 2.0, "python"),
    ("launch-bound", "examples/launch_bound.py", ["--steps", "200"], "compile", 1.5, "python"),
    ("launch-bound", "examples/launch_bound.py", ["--steps", "200"], "fused-optim", 1.5, "python"),
    ("launch-bound", "examples/launch_bound.py", ["--steps", "200"], "compile,fused-optim", 1.5, "python"),
    ("communication-bound", "examples/ddp_comm_bound.py", ["--steps", "20"], "compress", 1.7, "shaped2"),
]


def loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def haiprof_cmd(out: Path, example: str, args: list, fix: str | None, runner: str) -> list[str]:
    cmd = [sys.executable, "-m", "haiprof", "run", "--quiet", "--out", str(out)] + (["--fix", fix] if fix else [])
    if runner == "shaped2":
        cmd += ["--nproc-per-node", "2"]
    return cmd + [str(REPO / example), *args]


def window_throughput(run_dir: Path) -> tuple[float | None, int, int]:
    """(steps/s over the measured window, steps in it, steps in it slower than COMPILE_STEP_FACTOR x median)."""
    from haiprof.analyzers import steps as step_analysis
    from haiprof.rundir import RunDir, iter_records
    steps, _ = step_analysis.build_steps(iter_records(RunDir(run_dir).read_phase_records()))
    rest = steps[SKIP_STEPS:]
    window = ((rest.end_ns - rest.start_ns)[~rest.traced] / 1e9).tolist()
    if not window or sum(window) <= 0:
        return None, 0, 0
    med = statistics.median(window)
    return len(window) / sum(window), len(window), sum(1 for d in window if d > COMPILE_STEP_FACTOR * med)


def _losses(run_dir: Path) -> list | None:
    try:
        return [v for v in json.loads((run_dir / "losses.json").read_text())["losses"] if v is not None]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def loss_difference(base_dir: Path, fixed_dir: Path) -> float | None:
    """Relative difference of the mean loss over the last common steps (the loss guard's measure), computed
    here for rank 0 of distributed runs, whose ranks have no earlier run of their own to compare with."""
    a, b = _losses(base_dir), _losses(fixed_dir)
    if not a or not b:
        return None
    n = min(len(a), len(b))
    ma = statistics.fmean(a[n - min(LOSS_TAIL, n):n])
    mb = statistics.fmean(b[n - min(LOSS_TAIL, n):n])
    return abs(mb - ma) / abs(ma) if ma else None


def own_clock_ms(stdout: str) -> float | None:
    """step_ms of the script's last `OWN_CLOCK ... step_ms=X` line (its own timing of its steady steps)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("OWN_CLOCK "):
            for part in line.split():
                if part.startswith("step_ms="):
                    try:
                        return float(part[len("step_ms="):])
                    except ValueError:
                        return None
    return None


def _ratio(a, b):
    return a / b if a and b else None


def one_run(out: Path, example, args, fix, runner, net=None) -> dict:
    cmd = haiprof_cmd(out, example, args, fix, runner)
    kw = {"env": net.env()} if net is not None else {}
    r = subprocess.run(net.command(cmd) if net is not None else cmd, capture_output=True, text=True, cwd=REPO,
                       timeout=1800, **kw)
    try:
        s = json.loads((out / "summary.json").read_text())
        rank_s = json.loads((out / "rank-0" / "summary.json").read_text()) if runner == "shaped2" else s
    except (OSError, ValueError):
        return {"error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:] or ['no output']}"}
    rdir = out / "rank-0" if runner == "shaped2" else out
    throughput, n_window, slow = window_throughput(rdir)
    results = {x["id"]: x for x in (rank_s.get("fixes") or {}).get("results", [])}
    ids = [x.split("=")[0] for x in fix.split(",")] if fix else []
    guard = rank_s.get("loss_guard") or {}
    return {"steps_per_s": throughput, "window_steps": n_window, "outlier_steps": slow,
            "median_steps_per_s": 1 / s["step_time_s"]["median"], "wall_s": rank_s.get("wall_time_s"),
            "bottleneck": s["bottleneck"],
            "fix_status": "/".join(str((results.get(i) or {}).get("status")) for i in ids),
            "compile_s": ((results.get("compile") or {}).get("details") or {}).get("compile_s"),
            "loss_guard": guard.get("status"), "own_step_ms": own_clock_ms(r.stdout),
            "reported_speedup": ((rank_s.get("fixes") or {}).get("gain") or {}).get("speedup"),
            "break_even_step": (((rank_s.get("fixes") or {}).get("gain") or {}).get("compile") or {}).get(
                "break_even_step"),
            "dir": rdir}


def _spread(values: list) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def bench_row(name, example, args, fix, goal, runner, repeats, tmp: Path) -> dict:
    head = {"row": name, "fix": fix, "goal": goal, "example": " ".join([example, *args])}
    if not (REPO / example).is_file():
        return {**head, "skipped": f"{example} is not in this tree"}
    ctx = nullcontext()
    if runner == "shaped2":
        ok, why = shaped_net.available()
        if not ok:
            return {**head, "skipped": f"shaped loopback unavailable: {why}"}
        ctx = shaped_net.shaped_loopback(SHAPED_RATE)
    load_before = loadavg()
    base, fixed = [], []
    with ctx as net:
        for i in range(repeats):
            base.append(one_run(tmp / f"{name}-{fix}-base{i}", example, args, None, runner, net))
            fixed.append(one_run(tmp / f"{name}-{fix}-fixed{i}", example, args, fix, runner, net))
    errors = [r["error"] for r in base + fixed if "error" in r]
    if errors:
        return {**head, "skipped": errors[0]}
    bs = [r["steps_per_s"] for r in base]
    fs = [r["steps_per_s"] for r in fixed]
    b, f = statistics.median(bs), statistics.median(fs)
    guard = sorted({str(r["loss_guard"]) for r in fixed})
    if runner == "shaped2":
        diffs = [loss_difference(x["dir"], y["dir"]) for x, y in zip(base, fixed)]
        guard = [f"rank0 loss diff max {max(diffs):.2%}" if None not in diffs else "rank0 losses missing"]
    compile_s = [r["compile_s"] for r in fixed if r["compile_s"] is not None]
    med_ratio = statistics.median(fixed_r["median_steps_per_s"] for fixed_r in fixed) / \
        statistics.median(r["median_steps_per_s"] for r in base)
    own_b = [r["own_step_ms"] for r in base if r["own_step_ms"]]
    own_f = [r["own_step_ms"] for r in fixed if r["own_step_ms"]]
    reported = [r["reported_speedup"] for r in fixed if r["reported_speedup"]]
    base_wall = statistics.median(r["wall_s"] for r in base)
    fixed_wall = statistics.median(r["wall_s"] for r in fixed)
    return {**head, "base_steps_s": b, "fixed_steps_s": f, "speedup": f / b,
            "reported_speedup": statistics.median(reported) if reported else None,
            "own_clock_speedup": _ratio(statistics.median(own_b), statistics.median(own_f)) if own_b and own_f
            else None,
            "wall_speedup": _ratio(base_wall, fixed_wall),
            "break_even_step": fixed[-1]["break_even_step"],
            "base_spread": _spread(bs), "fixed_spread": _spread(fs),
            "pair_ratio_spread": _spread([y / x for x, y in zip(bs, fs)]),
            "base_wall_s": base_wall, "fixed_wall_s": fixed_wall,
            "compile_s": statistics.median(compile_s) if compile_s else None,
            "speedup_of_median_step": med_ratio, "window_steps": fixed[0]["window_steps"],
            "outlier_steps_in_window": sum(r["outlier_steps"] for r in base + fixed),
            "verdict": f"{base[0]['bottleneck']} -> {fixed[0]['bottleneck']}",
            "fix_status": fixed[0]["fix_status"], "loss_guard": guard,
            "load_before": load_before, "load_after": loadavg(), "repeats": repeats}


def format_row(r: dict) -> str:
    if "skipped" in r:
        return f"{r['row']:<20} {r['fix']:<12} skipped: {r['skipped']}"
    mark = "" if r["speedup"] >= r["goal"] else "  (goal missed)"
    comp = f", compile {r['compile_s']:.1f} s (excluded)" if r.get("compile_s") is not None else ""
    if r.get("break_even_step") is not None:
        comp += f", pays off after step {r['break_even_step']}"

    def x(v):
        return "n/a" if v is None else f"{v:.2f}x"
    ratios = (f"  [haiprof said {x(r.get('reported_speedup'))}, own clock {x(r.get('own_clock_speedup'))}, "
              f"wall {x(r.get('wall_speedup'))}]")
    return (f"{r['row']:<20} {r['fix']:<12} {r['base_steps_s']:>7.2f} ({r['base_spread']}) "
            f"{r['fixed_steps_s']:>7.2f} ({r['fixed_spread']}) {r['speedup']:>6.2f}x ({r['pair_ratio_spread']}){ratios} "
            f"{r['goal']:>4.1f}x  wall {r['base_wall_s']:.1f}/{r['fixed_wall_s']:.1f} s  "
            f"load {r['load_before']}->{r['load_after']}  {r['verdict']}, {r['fix_status']}, "
            f"guard {'/'.join(r['loss_guard'])}{comp}; median-step ratio {r['speedup_of_median_step']:.2f}x, "
            f"{r['window_steps']} steps/window, {r['outlier_steps_in_window']} outlier steps{mark}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", action="append", help="row names, comma-separated, or one ROW:FIX per --only "
                    "(e.g. --only launch-bound:compile,fused-optim); may be repeated")
    ap.add_argument("--json", help="also write the rows to this file")
    ns = ap.parse_args()
    only = {x for o in ns.only for x in ([o] if ":" in o else o.split(","))} if ns.only else None
    rows = []
    print(f"cores available: {len(os.sched_getaffinity(0))}, repeats: {ns.repeats}, "
          f"loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    print(f"{'workload':<20} {'fix':<12} base st/s (spread)  fixed st/s (spread)  speedup (pair spread)  goal",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="haiprof-fixbench-") as tmp:
        for row in ROWS:
            if only and row[0] not in only and f"{row[0]}:{row[3]}" not in only:
                continue
            r = bench_row(*row, repeats=ns.repeats, tmp=Path(tmp))
            rows.append(r)
            print(format_row(r), flush=True)
            if ns.json:
                Path(ns.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
