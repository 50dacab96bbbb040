"""summary.json keys for fixed runs: what each fix did, before/after against the baseline, the loss guard.

Wiring only (reads files, calls analyzers): summary.analyze() calls add_fix_results() for every run; runs
without --fix only get wall_time_s.
"""
from __future__ import annotations

import json

from haiprof.analyzers import fix_gain
from haiprof.analyzers import thresholds as T
from haiprof.analyzers import conditions, whatif
from haiprof.analyzers.findings import Finding
from haiprof.analyzers.compare import compare_summaries, step_distribution, step_time, text_lines
from haiprof.analyzers.loss_guard import compare_losses, with_worker_caveat
from haiprof.analyzers.step_columns import split_columns
from haiprof.analyzers.steps import build_steps

from ..rundir import RunDir, iter_records, links

FIXES_FILE = "fixes.json"
LOSSES_FILE = "losses.json"
LOSSES_STREAM = "losses.txt"   # runtime/fixrun.py


def _read_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_losses(run_dir: RunDir) -> list | None:
    """losses.json (written at the run's end), else losses.txt (as the run went: a killed run's)."""
    data = _read_json(run_dir.file(LOSSES_FILE))
    if isinstance(data, dict):
        return data.get("losses")
    try:
        lines = run_dir.file(LOSSES_STREAM).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    out = []
    for line in lines:   # one value a line, in step order (a torn last line ends it)
        try:
            value = float(line)
        except ValueError:
            break
        out.append(value if value == value and abs(value) != float("inf") else None)
    return out


def step_durations(run_dir: RunDir, summary: dict, steps=None) -> list[float]:
    """Seconds per step in order, after warm-up and outside the tracing window: the device clock on CUDA runs
    (summary `device.per_step`), the host's otherwise. The compile cost is read from the leading ones.
    `steps`: the run's host steps (StepColumns) where the caller has them; read from `run_dir` otherwise."""
    per = (summary.get("device") or {}).get("per_step")
    if per:
        return [x["duration_s"] for x in per[T.WARMUP_STEPS:] if not x.get("traced")]
    if steps is None:
        try:
            cols = run_dir.read_phase_columns()   # columns: a long baseline is no list per record
            steps, _ = build_steps((), split_columns(cols.names, cols.code, cols.start, cols.end,
                                                     list(iter_records(r for _, r in cols.odd))))
        except (OSError, ValueError):
            return []
    kept = steps[T.WARMUP_STEPS:]
    return (kept.duration_ns[~kept.traced] / 1e9).tolist()


def before_after(a: RunDir, sa: dict, b: RunDir, sb: dict) -> dict:
    """`haiprof compare A B`: {"comparison" (with "step_distribution"), "gain", "loss_guard" (None unless both
    runs recorded losses)}: the same numbers a fixed run's report shows against its baseline."""
    cmp = compare_summaries(sa, sb)
    da, db = step_durations(a, sa), step_durations(b, sb)
    cmp["step_distribution"] = step_distribution(da, db)
    gain = fix_gain.fix_gain(cmp["before"], cmp["after"], applied_ids(sb.get("fixes") or {}), da, db)
    gain["conditions"] = conditions.message(conditions.differences(sa.get("conditions"), sb.get("conditions")))
    la, lb = read_losses(a), read_losses(b)
    guard = compare_losses(la, lb) if la is not None and lb is not None else None
    return {"comparison": cmp, "gain": gain, "loss_guard": guard}


def applied_ids(fixes: dict) -> list[str]:
    return [r["id"] for r in (fixes.get("results") or []) if r.get("status") == "applied"]


def add_fix_results(run_dir: RunDir, meta: dict, summary: dict, steps=None) -> None:
    """`steps`: this run's host steps (StepColumns), already built: its phases are not read again."""
    if meta.get("end_time") and meta.get("start_time"):
        summary["wall_time_s"] = round(meta["end_time"] - meta["start_time"], 3)
    fixes = _read_json(run_dir.file(FIXES_FILE))
    if not isinstance(fixes, dict):
        return
    results = fixes.get("results")
    here = run_dir.path   # the runs fixes.json names, where they are now (moved with this one: relative)
    pairs = [{k: links.resolve(here, p, k) for k in ("baseline_run", "fixed_run")}
             for p in fixes.get("interleaved") or [] if isinstance(p, dict)]
    summary["fixes"] = {
        "requested": list((fixes.get("requested") or {}).keys()), "spec": fixes.get("spec"),
        "source": fixes.get("source"), "diagnosis_run": links.resolve(here, fixes, "diagnosis_run"),
        "baseline_run": links.resolve(here, fixes, "baseline_run"), "note": fixes.get("note"),
        "ranked": fixes.get("ranked") or [], "excluded": fixes.get("excluded") or [],
        "remeasured": fixes.get("remeasured"), "baseline_caveat": fixes.get("baseline_caveat"),
        "interleaved_runs": pairs,
        "results": results if results is not None else [
            {"id": k, "status": "unknown", "reason": "the run ended before the fixes reported"}
            for k in (fixes.get("requested") or {})],
    }
    fx = summary["fixes"]   # what the baseline is, said once: the console and the page quote it
    if fx["remeasured"]:
        fx["baseline_note"] = ("baseline re-measured right before this run: the latest unfixed run was "
                               f"{fx['remeasured']}")
    elif fx["baseline_caveat"]:
        fx["baseline_note"] = (f"baseline not re-measured: the latest unfixed run of this rank was "
                               f"{fx['baseline_caveat']}, and a rank cannot re-measure it on its own (run the job "
                               f"once more without --fix for a like-for-like baseline)")
    base = summary["fixes"]["baseline_run"]
    if not applied_ids(summary["fixes"]):   # nothing changed the training: nothing to compare, nothing to guard
        summary["fixes"]["comparison_note"] = "no fix was applied in this run: there is nothing to compare"
        return
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
    # each run's steps once: the baseline's phases are read here, this run's are the ones already built
    before_s, after_s = step_durations(rd, base_summary), step_durations(run_dir, summary, steps)
    gain = fix_gain.fix_gain(cmp["before"], cmp["after"], applied_ids(summary["fixes"]), before_s, after_s)
    # the two runs' set-up and the load beside them (analyzers/conditions.py): a difference is said, not credited
    diffs = conditions.differences(base_summary.get("conditions"), summary.get("conditions"))
    gain["conditions"] = conditions.message(diffs, interleaved=bool(summary["fixes"]["interleaved_runs"]))
    if gain["conditions"]:
        summary["findings"].insert(0, Finding(kind="fix-conditions", severity="moderate", share=0.0,
                                              message=gain["conditions"], evidence={"differences": diffs},
                                              fixes=[]).as_dict())
    # before it: a phase the fix cannot touch that moved (the effect itself, where the conditions are its cause)
    moves = fix_gain.untouched_moves(cmp.get("phases"), gain.get("applied") or [], cmp["before"]["step_time_s"])
    gain["unreliable"] = fix_gain.unreliable_message(moves, gain.get("applied") or [])
    if gain["unreliable"]:
        summary["findings"].insert(0, Finding(kind="fix-unreliable", severity="moderate", share=0.0,
                                              message=gain["unreliable"], evidence={"moved": moves}).as_dict())
    fix_gain.with_interleaved(gain, fix_gain.interleaved(_pass_pairs(summary["fixes"]["interleaved_runs"])))
    gain["unreliable_why"] = fix_gain.unreliable_why(gain)   # said beside the speedup, wherever it is printed
    # the conditions of the comparison, shown with it: how old the baseline is and how much each run's steady
    # steps spread (p10-p90 over the median), so a 1.1x against 20% noise reads as what it is
    try:
        base_meta = rd.read_meta()
    except (OSError, ValueError):
        base_meta = {}
    gain["baseline_age_s"] = (round(max(0.0, meta["start_time"] - base_meta["end_time"]), 1)
                              if meta.get("start_time") and base_meta.get("end_time") else None)
    gain["noise"] = {"before": fix_gain.spread(base_summary.get("step_time_s")),
                     "after": fix_gain.spread(summary.get("step_time_s"))}
    noisy = [name for name, x in (("this run", summary), ("the baseline", base_summary)) if x.get("noisy")]
    if noisy:   # measured beside a busy neighbour: the ratio carries its noise
        gain["noisy"] = f"{' and '.join(noisy)} measured on a busy machine"
    # a slowdown whose steps overlap the baseline's, in a doubtful comparison, is not pinned on the fix
    fix_gain.without_unreliable_regression(gain, base_summary.get("step_time_s"), summary.get("step_time_s"))
    gain["predicted"] = predicted_vs_measured(base_summary, gain, summary["fixes"].get("ranked"))
    summary["fixes"]["gain"] = gain
    cmp["step_distribution"] = step_distribution(before_s, after_s)
    if gain["regression"]:
        summary["findings"].insert(0, Finding(
            kind="fix-regression", severity="high", share=0.0, message=gain["message"],
            evidence={k: gain[k] for k in ("applied", "step_time_before_s", "step_time_after_s", "slower_pct")},
            fixes=[]).as_dict())
    guard = with_worker_caveat(compare_losses(read_losses(rd) or [], read_losses(run_dir) or []),
                               workers_started(summary["fixes"]))
    summary["loss_guard"] = guard
    if guard["status"] == "diverged":
        summary["findings"].insert(0, Finding(
            kind="fix-guard", severity="high", share=0.0,
            message=(f"the fixed run's loss differs from the baseline's: {guard['message']}" if guard.get("data_order")
                     else f"the fixed run's loss diverges from the baseline's: {guard['message']}"),
            evidence=guard, fixes=[]).as_dict())


def workers_started(fixes: dict) -> int | None:
    """DataLoader workers the prefetch fix started (it leaves a loader that had workers alone), else None."""
    for r in fixes.get("results") or []:
        if r.get("id") == "prefetch" and r.get("status") == "applied":
            n = max((e.get("num_workers") or 0 for e in r.get("events") or [] if e.get("status") == "applied"),
                    default=0)
            return n or None
    return None


def predicted_vs_measured(base_summary: dict, gain: dict, chosen: list | None = None) -> dict | None:
    """What the baseline's what-if (analyzers/whatif.py) predicted for the applied fixes, beside what they
    measured: the error in points of the baseline's step. A fix `--fix auto` chose (`chosen`: fixes.ranked) is
    held to the prediction it was chosen on, the diagnosis run's, where that run measured what the baseline's
    pass did not (a short interleaved pass ends before its probes have anything to read)."""
    applied = gain.get("applied") or []
    preds = whatif.predict_all(base_summary, applied)
    preds.update({c["id"]: c["predicted"] for c in chosen or []
                  if isinstance(c, dict) and c.get("id") in applied and isinstance(c.get("predicted"), dict)
                  and all(k in c["predicted"] for k in ("fix", "gain_share", "low_share", "high_share", "assumed",
                                                         "step_s"))})
    comb = whatif.combined(preds, applied)
    before, after = gain.get("step_time_before_s"), gain.get("step_time_after_s")
    il = gain.get("interleaved") or {}
    if il.get("speedup") and before:   # measured in like conditions: the pairs' median, not this run's ratio
        after = before / il["speedup"]
    if not comb or not before or not after:
        return None
    pred = before * (1 - comb["gain_share"])
    return {**comb, "step_before_s": before, "step_after_pred_s": pred, "measured_step_after_s": after,
            "measured_by": "interleaved pairs' median" if il.get("speedup") else "this run's steady step",
            "error_points": round(100 * abs(pred - after) / before, 1)}


def _pass_pairs(runs: list) -> list[tuple]:
    """--interleave's pass pairs as (baseline, fixed) steady step times; a pass gone or unreadable is None."""
    def steady(path):
        try:
            return step_time(RunDir(path).read_summary())
        except (OSError, ValueError, TypeError):
            return None
    return [(steady(r.get("baseline_run")), steady(r.get("fixed_run"))) for r in runs if isinstance(r, dict)]


def regression_lines(summary: dict) -> list[str]:
    """A fix that made the step slower: the first thing haiprof says about the run (report.finish)."""
    gain = (summary.get("fixes") or {}).get("gain") or {}
    if not gain.get("message"):
        return []
    return [f"haiprof: WARNING: {gain['message']}; `--fix auto` will not choose it again for this command"]


def console_lines(summary: dict) -> list[str]:
    fx = summary.get("fixes")
    if not fx:
        return []
    gain = fx.get("gain") or {}
    lines = [f"haiprof: fixes ({fx.get('source')}): {fx['note']}" if fx.get("note") else
             f"haiprof: fixes ({fx.get('source')}):"]
    for c in fx.get("ranked") or []:
        lines.append(f"haiprof:   chose {c['id']} (expected {c['expected_speedup']:.2f}x): {c['reason']}")
    for c in fx.get("excluded") or []:
        lines.append(f"haiprof:   left out {c['id']}: {c['reason']}")
    for r in fx.get("results") or []:
        compile_s = (r.get("details") or {}).get("compile_s")
        extra = f" (compile time {compile_s:.1f} s, in the first compiled steps)" if compile_s else ""
        lines.append(f"haiprof:   {r['id']}: {r['status']}, {r.get('reason')}{extra}")
    if fx.get("baseline_note"):
        lines.append(f"haiprof: {fx['baseline_note']}")
    if summary.get("comparison"):
        lines.append(f"haiprof: before/after against {summary['comparison']['baseline_run']}:")
        lines += [f"haiprof:   {line}" for line in fix_gain.text_lines(gain) if not line.startswith("WARNING")]
        lines += [f"haiprof:   {line}" for line in text_lines(summary["comparison"])]
    elif fx.get("comparison_note"):
        lines.append(f"haiprof: {fx['comparison_note']}")
    g = summary.get("loss_guard")
    if g:
        lines.append(f"haiprof: loss guard {g['status']}: {g['message']}")
    return lines
