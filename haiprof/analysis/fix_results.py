"""summary.json keys for fixed runs: what each fix did, before/after against the baseline, the loss guard.

Wiring only (reads files, calls analyzers): summary.analyze() calls add_fix_results() for every run; runs
without --fix only get wall_time_s.
"""
from __future__ import annotations

import json

from haiprof.analyzers.compare import compare_summaries, text_lines
from haiprof.analyzers.loss_guard import compare_losses

from ..rundir import RunDir

FIXES_FILE = "fixes.json"
LOSSES_FILE = "losses.json"


def _read_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_losses(run_dir: RunDir) -> list | None:
    data = _read_json(run_dir.file(LOSSES_FILE))
    return data.get("losses") if isinstance(data, dict) else None


def add_fix_results(run_dir: RunDir, meta: dict, summary: dict) -> None:
    if meta.get("end_time") and meta.get("start_time"):
        summary["wall_time_s"] = round(meta["end_time"] - meta["start_time"], 3)
    fixes = _read_json(run_dir.file(FIXES_FILE))
    if not isinstance(fixes, dict):
        return
    results = fixes.get("results")
    summary["fixes"] = {
        "requested": list((fixes.get("requested") or {}).keys()), "spec": fixes.get("spec"),
        "source": fixes.get("source"), "diagnosis_run": fixes.get("diagnosis_run"),
        "baseline_run": fixes.get("baseline_run"), "note": fixes.get("note"),
        "results": results if results is not None else [
            {"id": k, "status": "unknown", "reason": "the run ended before the fixes reported"}
            for k in (fixes.get("requested") or {})],
    }
    base = fixes.get("baseline_run")
    if not base:
        summary["fixes"]["comparison_note"] = ("no earlier unfixed run of this command in the output directory: "
                                               "run it once without --fix for a before/after")
        return
    rd = RunDir(base)
    try:
        base_summary = rd.read_summary()
    except (OSError, ValueError) as e:
        summary["fixes"]["comparison_note"] = f"baseline {base} unreadable ({type(e).__name__})"
        return
    cmp = compare_summaries(base_summary, summary)
    cmp["baseline_run"] = base
    summary["comparison"] = cmp
    guard = compare_losses(read_losses(rd) or [], read_losses(run_dir) or [])
    summary["loss_guard"] = guard
    if guard["status"] == "diverged":
        summary["findings"].insert(0, {
            "kind": "fix-guard", "severity": "high", "share": 0.0,
            "message": f"the fixed run's loss diverges from the baseline's: {guard['message']}",
            "evidence": guard, "fixes": []})


def console_lines(summary: dict) -> list[str]:
    fx = summary.get("fixes")
    if not fx:
        return []
    lines = [f"haiprof: fixes ({fx.get('source')}): {fx['note']}" if fx.get("note") else
             f"haiprof: fixes ({fx.get('source')}):"]
    for r in fx.get("results") or []:
        compile_s = (r.get("details") or {}).get("compile_s")
        extra = f" (compile time {compile_s:.1f} s, in the first compiled steps)" if compile_s else ""
        lines.append(f"haiprof:   {r['id']}: {r['status']}, {r.get('reason')}{extra}")
    if summary.get("comparison"):
        lines.append(f"haiprof: before/after against {summary['comparison']['baseline_run']}:")
        lines += [f"haiprof:   {line}" for line in text_lines(summary["comparison"])]
    elif fx.get("comparison_note"):
        lines.append(f"haiprof: {fx['comparison_note']}")
    g = summary.get("loss_guard")
    if g:
        lines.append(f"haiprof: loss guard {g['status']}: {g['message']}")
    return lines
