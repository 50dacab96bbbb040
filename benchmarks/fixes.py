"""Baseline vs fixed steps/s on the bundled examples, side by side in one run.

    python benchmarks/fixes.py [--repeats 3] [--only input-bound,compute-bound]

For each row, unfixed and fixed `haiprof run`s of the same example alternate (A B A B ...), so load on a shared
machine hits both alike; steps/s is 1 / haiprof's median step time (warm-up step excluded), and the ratio is the
median fixed over the median baseline. Wall time per run is printed too: it includes worker start-up and compile
time, which the steady-state median does not. A row whose example is not in this tree is reported, not run.
Adding a workload is one line in ROWS.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (row name, example, its arguments, --fix value, goal speedup, runner)
ROWS = [
    ("input-bound", "examples/input_bound.py", ["--batches", "40"], "prefetch", 2.5, "python"),
    ("compute-bound", "examples/compute_bound.py", ["--steps", "12"], "amp", 2.0, "python"),
    ("launch-bound", "examples/launch_bound.py", [], "compile", 1.5, "python"),
    ("launch-bound", "examples/launch_bound.py", [], "fused-optim", 1.5, "python"),
    ("communication-bound", "examples/ddp_comm_bound.py", [], "compress", 1.7, "torchrun2"),
]


def haiprof_cmd(out: Path, example: str, args: list, fix: str | None, runner: str) -> list[str]:
    base = [sys.executable, "-m", "haiprof", "run", "--quiet"] + (["--fix", fix] if fix else [])
    if runner == "python":
        return base + ["--out", str(out), str(REPO / example), *args]
    # 2 ranks on this host, each with its own run directory (rank 0's is read).
    inner = " ".join(shlex.quote(a) for a in base)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--no-python",
            "sh", "-c", f"exec {inner} --out {shlex.quote(str(out))}-rank$LOCAL_RANK "
            f"{shlex.quote(str(REPO / example))} {' '.join(map(shlex.quote, args))}"]


def one_run(out: Path, example, args, fix, runner) -> dict:
    r = subprocess.run(haiprof_cmd(out, example, args, fix, runner), capture_output=True, text=True,
                       cwd=REPO, timeout=1800)
    run_dir = out if runner == "python" else Path(f"{out}-rank0")
    try:
        s = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return {"error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:] or ['no output']}"}
    med = s["step_time_s"]["median"]
    status = {x["id"]: x["status"] for x in (s.get("fixes") or {}).get("results", [])}
    return {"steps_per_s": 1 / med if med else None, "wall_s": s.get("wall_time_s"), "bottleneck": s["bottleneck"],
            "fix_status": status.get(fix), "loss_guard": (s.get("loss_guard") or {}).get("status")}


def bench_row(name, example, args, fix, goal, runner, repeats, tmp: Path) -> dict:
    if not (REPO / example).is_file():
        return {"row": name, "fix": fix, "goal": goal, "skipped": f"{example} is not in this tree"}
    base, fixed = [], []
    for i in range(repeats):
        base.append(one_run(tmp / f"{name}-{fix}-base{i}", example, args, None, runner))
        fixed.append(one_run(tmp / f"{name}-{fix}-fixed{i}", example, args, fix, runner))
    errors = [r["error"] for r in base + fixed if "error" in r]
    if errors:
        return {"row": name, "fix": fix, "goal": goal, "skipped": errors[0]}
    b = statistics.median(r["steps_per_s"] for r in base)
    f = statistics.median(r["steps_per_s"] for r in fixed)
    return {"row": name, "fix": fix, "goal": goal, "base_steps_s": b, "fixed_steps_s": f, "speedup": f / b,
            "base_wall_s": statistics.median(r["wall_s"] for r in base),
            "fixed_wall_s": statistics.median(r["wall_s"] for r in fixed),
            "verdict": f"{base[0]['bottleneck']} -> {fixed[0]['bottleneck']}",
            "fix_status": fixed[0]["fix_status"], "loss_guard": sorted({r["loss_guard"] for r in fixed})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", help="comma-separated row names")
    ap.add_argument("--json", help="also write the rows to this file")
    ns = ap.parse_args()
    only = set(ns.only.split(",")) if ns.only else None
    rows = []
    print(f"cores available: {len(os.sched_getaffinity(0))}, repeats: {ns.repeats}", flush=True)
    print(f"{'workload':<20} {'fix':<12} {'base st/s':>9} {'fixed st/s':>10} {'speedup':>8} {'goal':>5}  "
          f"{'wall base/fixed s':>17}  verdict, guard", flush=True)
    with tempfile.TemporaryDirectory(prefix="haiprof-fixbench-") as tmp:
        for row in ROWS:
            if only and row[0] not in only:
                continue
            r = bench_row(*row, repeats=ns.repeats, tmp=Path(tmp))
            rows.append(r)
            if "skipped" in r:
                print(f"{r['row']:<20} {r['fix']:<12} skipped: {r['skipped']}", flush=True)
                continue
            mark = "" if r["speedup"] >= r["goal"] else "  (goal missed)"
            print(f"{r['row']:<20} {r['fix']:<12} {r['base_steps_s']:>9.2f} {r['fixed_steps_s']:>10.2f} "
                  f"{r['speedup']:>7.2f}x {r['goal']:>4.1f}x  {r['base_wall_s']:>7.2f} / {r['fixed_wall_s']:<7.2f}  "
                  f"{r['verdict']}, {r['fix_status']}, guard {'/'.join(map(str, r['loss_guard']))}{mark}",
                  flush=True)
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
