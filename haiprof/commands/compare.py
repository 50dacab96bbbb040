"""`haiprof compare RUN_A RUN_B`: before (A) / after (B) of two run directories, as console text.

Step time, throughput, per-phase time per step, the verdict of each, and the loss guard when both runs recorded
their losses. A fixed run's own report shows the same comparison against its baseline (render/fixes_panel.py).
"""
from __future__ import annotations

import argparse
import json
import sys

from haiprof.analyzers.compare import compare_summaries, text_lines
from haiprof.analyzers.fix_gain import fix_gain
from haiprof.analyzers.fix_gain import text_lines as fix_gain_lines
from haiprof.analyzers.loss_guard import compare_losses

from ..rundir import RunDir


def load_summary(run_dir: RunDir) -> dict:
    """summary.json, or a fresh analysis when the run was killed before writing it."""
    try:
        return run_dir.read_summary()
    except (OSError, ValueError):
        from ..analysis.summary import analyze
        return analyze(run_dir).summary


def cmd_compare(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="haiprof compare",
                                description="Compare two runs: RUN_A (before) and RUN_B (after).")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    from ..analysis.fix_results import read_losses
    a, b = RunDir.open(ns.run_a), RunDir.open(ns.run_b)
    a.read_meta()
    b.read_meta()
    sa, sb = load_summary(a), load_summary(b)
    cmp = compare_summaries(sa, sb)
    from ..analysis.fix_results import applied_ids, step_durations
    gain = fix_gain(cmp["before"], cmp["after"], applied_ids(sb.get("fixes") or {}),
                    step_durations(a, sa), step_durations(b, sb))
    la, lb = read_losses(a), read_losses(b)
    guard = compare_losses(la, lb) if la is not None and lb is not None else None
    if ns.json:
        print(json.dumps({"comparison": cmp, "gain": gain, "loss_guard": guard}, indent=1, default=str))
        return 0
    if gain.get("message"):
        print(f"WARNING: {gain['message']}")
    print(f"A (before): {a.path}  [{sa.get('bottleneck')}] {sa.get('headline')}")
    print(f"B (after):  {b.path}  [{sb.get('bottleneck')}] {sb.get('headline')}")
    for run, s in (("B", sb),):
        fx = s.get("fixes")
        if fx:
            print(f"fixes in {run}: " + ", ".join(f"{r['id']} {r['status']}" for r in fx.get("results") or []))
    for line in fix_gain_lines(gain):
        if not line.startswith("WARNING"):
            print(line)
    for line in text_lines(cmp):
        print(line)
    if guard is not None:
        print(f"loss guard: {guard['status']}: {guard['message']}")
    sys.stdout.flush()
    return 0
