"""What a fix bought, as a user must see it: the steady-state step ratio, the whole-run wall time of both runs,
and for compile-type fixes the compile cost and the step after which the fix has paid for itself. Pure functions
on numbers from two summaries (and, for the compile cost, each run's step durations in order).

- speedup: steady step time before / after (`step_time_s.steady`: warm-up, a slow compile start and traced
  steps excluded). Both can be true at once: a 3.5x faster step and a slower run, when compilation took longer
  than the steps it saved; so the wall time of both runs is always shown beside it.
- compile cost: the extra time of the fixed run's leading slow steps over its steady step, less the same extra
  of the baseline (its own warm-up), never below 0.
- break-even step: the step N after which the fixed run has spent no more time in steps than the baseline would
  have: cost / (before - after) per step saved, rounded up; None when the fix saves nothing per step.
- regression: the steady step got slower by at least FIX_SLOWER (3%): said first and loudly, and `--fix auto`
  does not choose those fixes again for that command.
"""
from __future__ import annotations

import math
import re
import statistics

from . import thresholds as T
from .steps import leading_slow
from .whatif import range_text

COMPILE_TYPE = ("compile", "cuda-graphs")


def slow_start_extra_s(durations_s: list, steady_s: float | None) -> float:
    """Seconds the leading slow steps took beyond the steady step time (0 when there is no slow start)."""
    if not durations_s or not steady_s:
        return 0.0
    n = leading_slow(list(durations_s))
    return sum(max(0.0, d - steady_s) for d in durations_s[:n])


def compile_cost_s(before_durations: list, before_steady: float | None, after_durations: list,
                   after_steady: float | None) -> float | None:
    """Extra start-up time of the fixed run beyond the baseline's own warm-up; None without the fixed run's steps."""
    if not after_durations or not after_steady:
        return None
    return max(0.0, slow_start_extra_s(after_durations, after_steady)
               - slow_start_extra_s(before_durations or [], before_steady))


def break_even_step(cost_s: float | None, before_steady: float | None, after_steady: float | None) -> int | None:
    """Smallest step N at which cost_s has been won back by the per-step saving; None when nothing is saved."""
    if cost_s is None or not before_steady or not after_steady or after_steady >= before_steady:
        return None
    if cost_s <= 0:
        return 0
    return math.ceil(cost_s / (before_steady - after_steady) - 1e-9)


# The phases each fix can change; a phase none of the applied fixes touches that moved by much means the two
# runs ran under different conditions (load, cache, data), and the ratio is not the fix's.
TOUCHES = {"prefetch": {"dataloader", "h2d"}, "fused-optim": {"optimizer"},
           "amp": {"forward", "backward", "optimizer"}, "compile": {"forward", "backward", "optimizer"},
           "cuda-graphs": {"forward", "backward", "optimizer"}, "compress": {"allreduce", "backward"},
           "bucket": {"allreduce", "backward"}}
UNTOUCHED_REL, UNTOUCHED_ABS_S, UNTOUCHED_OF_STEP = 0.25, 1e-3, 0.10


def untouched_moves(phases: dict, applied: list, step_before_s: float | None) -> list[dict]:
    """Phases no applied fix can touch whose time per step changed by more than UNTOUCHED_REL of itself (and
    UNTOUCHED_ABS_S), by at least UNTOUCHED_OF_STEP of the baseline's step: [{"phase", "before_s", "after_s"}]."""
    touched = set().union(*(TOUCHES.get(f, set()) for f in applied)) if applied else set()
    out = []
    for p, row in (phases or {}).items():
        a, b = row.get("before_s"), row.get("after_s")
        if p in touched or p == "other" or a is None or b is None:
            continue
        d = abs(b - a)
        if d > max(UNTOUCHED_REL * a, UNTOUCHED_ABS_S) and step_before_s and d >= UNTOUCHED_OF_STEP * step_before_s:
            out.append({"phase": p, "before_s": a, "after_s": b})
    return out


def unreliable_message(moves: list[dict], applied: list) -> str | None:
    if not moves:
        return None
    what = ", ".join(f"{m['phase']} {m['before_s'] * 1e3:.1f} -> {m['after_s'] * 1e3:.1f} ms/step" for m in moves)
    return (f"comparison unreliable: {what}, though only {', '.join(applied)} was applied and cannot change it: "
            f"the two runs ran under different conditions (machine load, caches, data); re-measure the baseline "
            f"right before, on the same machine state")


def spread(stats: dict | None) -> float | None:
    """(p90 - p10) / median of a run's steady steps: the noise a speedup must clear."""
    stats = stats or {}
    med, lo, hi = stats.get("median"), stats.get("p10"), stats.get("p90")
    return (hi - lo) / med if med and lo is not None and hi is not None else None


def interleaved(pairs: list[tuple]) -> dict | None:
    """Alternated baseline/fixed passes [(before_s, after_s) steady step times, in run order]: the speedup is the
    median of the per-pair ratios (each pair ran back to back, in the same conditions), and their spread
    (min-max, and (max - min) / median) is the noise of the comparison. None without a usable pair."""
    ratios = [r for r in (_ratio(b, a) for b, a in pairs) if r is not None]
    if not ratios:
        return None
    med = statistics.median(ratios)
    return {"pairs": len(ratios), "ratios": [round(r, 4) for r in ratios], "speedup": med,
            "min": min(ratios), "max": max(ratios), "spread": (max(ratios) - min(ratios)) / med}


def with_interleaved(gain: dict, il: dict | None) -> dict:
    """gain with the interleaved passes' result: when there is one, it decides whether the fix slowed the step
    (the median pair ratio, measured in like conditions, not this run against one baseline pass)."""
    gain["interleaved"] = il
    if il:
        il["measurable"] = measurable(il)
        slower = il["measurable"] and il["speedup"] < 1 and 1 / il["speedup"] >= 1 + T.FIX_SLOWER - 1e-9
        gain["regression"], gain["slower_pct"] = slower, (100 * (1 / il["speedup"] - 1)) if il["speedup"] < 1 else 0.0
        gain["message"] = (f"{','.join(gain.get('applied') or []) or 'the fix'} made each step "
                           f"{gain['slower_pct']:.0f}% slower (median of {il['pairs']} interleaved pass pairs, "
                           f"{il['min']:.2f}-{il['max']:.2f}x): not recommended for this script") if slower else None
    return gain


def measurable(il: dict) -> bool:
    """Whether interleaved pairs resolve an effect: their spread ((max - min) / median) no wider than the effect
    (how far the median ratio is from 1, either way). Pairs from 0.85x to 2.88x say nothing about a 0.72x."""
    effect = abs(il["speedup"] - 1) if il["speedup"] >= 1 else abs(1 / il["speedup"] - 1)
    return il["spread"] <= effect


def unreliable_why(gain: dict) -> str | None:
    """Why a speedup against this baseline is no measurement of the fix, in a few words (None when it is one):
    the baseline set up under other conditions, a phase no applied fix touches moved, or either run noisy."""
    why = []
    if gain.get("conditions") and not gain.get("interleaved"):
        m = re.search(r"other conditions \((.*)\): ", gain["conditions"])   # the differences, nested brackets kept
        why.append(f"the baseline ran under other conditions ({m.group(1) if m else gain['conditions']})")
    if gain.get("unreliable"):
        why.append("a phase no applied fix touches moved (" + gain["unreliable"].split(": ", 1)[-1].split(", though")[0]
                   + ")")
    return "; ".join(why) or None


def without_unreliable_regression(gain: dict, before: dict | None, after: dict | None) -> dict:
    """A slower step that the comparison cannot pin on the fix is not the fix's regression: measured against a
    baseline under other conditions, or with a phase no applied fix touches moved, or on a busy machine, AND the
    fixed run's typical steps overlapping the baseline's (its 10th percentile no slower than the baseline's
    90th; `before`/`after`: the runs' step_time_s). Then the speedup is said with its reason and the fix is not
    held against this command (`--fix auto` would never choose it again). Every typical step slower stands (a
    fix's side effect can slow a phase it does not touch: workers taking the CPU), and so does the verdict of
    interleaved passes, measured in like conditions."""
    b90, a10 = (before or {}).get("p90"), (after or {}).get("p10")
    overlap = isinstance(b90, (int, float)) and isinstance(a10, (int, float)) and a10 <= b90
    doubt = gain.get("unreliable_why") or gain.get("noisy")
    if gain.get("regression") and not gain.get("interleaved") and doubt and overlap:
        gain["regression"], gain["message"] = False, None
        gain["regression_withheld"] = (f"{gain['slower_pct']:.0f}% slower, but its typical steps overlap the "
                                       f"baseline's (from {a10 * 1e3:.1f} ms, p10, against up to {b90 * 1e3:.1f} "
                                       f"ms, p90) in a comparison said unreliable or noisy")
    return gain


def _ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0 else None


def fix_gain(before: dict, after: dict, applied: list, before_durations: list | None = None,
             after_durations: list | None = None) -> dict:
    """before/after: {"step_time_s" (steady), "wall_time_s", "steps"}; applied: ids of the fixes that acted."""
    b, a = before.get("step_time_s"), after.get("step_time_s")
    speedup = _ratio(b, a)
    out = {
        "applied": list(applied),
        "step_time_before_s": b, "step_time_after_s": a, "speedup": speedup,
        "wall_time_before_s": before.get("wall_time_s"), "wall_time_after_s": after.get("wall_time_s"),
        "steps_before": before.get("steps"), "steps_after": after.get("steps"),
        "wall_speedup": _ratio(before.get("wall_time_s"), after.get("wall_time_s")),
        "slower_pct": (100 * (a / b - 1)) if speedup and a > b else 0.0,
        "regression": bool(speedup and a / b >= 1 + T.FIX_SLOWER - 1e-9),
        "compile": None,
    }
    if any(x in COMPILE_TYPE for x in applied):
        cost = compile_cost_s(before_durations or [], b, after_durations or [], a)
        n = break_even_step(cost, b, a)
        out["compile"] = {"cost_s": cost, "break_even_step": n,
                          "paid_off_in_run": (n is not None and isinstance(after.get("steps"), int)
                                              and n <= after["steps"])}
    out["message"] = regression_message(out)
    return out


def regression_message(gain: dict) -> str | None:
    if not gain.get("regression"):
        return None
    names = ",".join(gain.get("applied") or []) or "the fix"
    return (f"{names} made each step {gain['slower_pct']:.0f}% slower "
            f"({gain['step_time_before_s'] * 1e3:.1f} -> {gain['step_time_after_s'] * 1e3:.1f} ms): "
            f"not recommended for this script")


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _wall(gain: dict) -> str | None:
    wb, wa = gain.get("wall_time_before_s"), gain.get("wall_time_after_s")
    if not wb or not wa:
        return None
    same = gain.get("steps_before") == gain.get("steps_after")
    steps = (f", {gain['steps_before']} steps each" if same else
             f"; {gain.get('steps_before')} vs {gain.get('steps_after')} steps, not comparable as a ratio")
    ratio = f" ({gain['wall_speedup']:.2f}x)" if same and gain.get("wall_speedup") else ""
    return f"whole run wall time: {wb:.1f} s -> {wa:.1f} s{ratio}{steps}"


def text_lines(gain: dict) -> list[str]:
    """Console lines, the regression (if any) first."""
    lines = []
    if gain.get("message"):
        lines.append("WARNING: " + gain["message"])
    if gain.get("unreliable"):
        lines.append("WARNING: " + gain["unreliable"])
    if gain.get("conditions"):
        lines.append("WARNING: " + gain["conditions"])
    il = gain.get("interleaved")
    if il and il.get("measurable", True):
        lines.append(f"speedup, interleaved ({il['pairs']} baseline/fixed pass pairs, each pair in the same "
                     f"conditions): {il['speedup']:.2f}x median, per pair {il['min']:.2f}-{il['max']:.2f}x "
                     f"(spread {100 * il['spread']:.0f}%)")
    elif il:
        lines.append(f"interleaved ({il['pairs']} baseline/fixed pass pairs): no measurable change: the pairs "
                     f"spread {il['min']:.2f}-{il['max']:.2f}x ({100 * il['spread']:.0f}%), wider than the effect "
                     f"(median {il['speedup']:.2f}x)")
    if gain.get("speedup"):
        why = unreliable_why(gain)
        label = f"speedup (steady step time{', this run against the last baseline pass' if il else ''})"
        lines.append(f"{label}: {gain['speedup']:.2f}x "
                     f"({gain['step_time_before_s'] * 1e3:.1f} -> {gain['step_time_after_s'] * 1e3:.1f} ms per step)"
                     + (f": unreliable, {why}" if why else "")
                     + (f"; noisy: {gain['noisy']}" if gain.get("noisy") else ""))
        if gain.get("regression_withheld"):
            lines.append(f"not held against {', '.join(gain.get('applied') or []) or 'the fix'}: "
                         f"{gain['regression_withheld']}; `--interleave N` measures it in like conditions")
        noise = gain.get("noise") or {}
        if noise.get("before") is not None and noise.get("after") is not None:
            age = gain.get("baseline_age_s")
            lines.append(f"noise (p10-p90 of the steady steps): baseline {100 * noise['before']:.0f}%, fixed run "
                         f"{100 * noise['after']:.0f}%" + (f"; baseline recorded {_age(age)} before this run"
                                                            if age is not None else ""))
    p = gain.get("predicted")
    if p and p.get("measured_step_after_s") and p.get("step_s"):
        lines.append(f"predicted before the fix: step {p['step_before_s'] * 1e3:.1f} -> "
                     f"{p['step_after_pred_s'] * 1e3:.1f} ms ({_range(p)}); "
                     f"measured {p['measured_step_after_s'] * 1e3:.1f} ms"
                     f"{' (' + p['measured_by'] + ')' if p.get('measured_by') else ''}: "
                     f"off by {p['error_points']:.0f} points of the baseline step")
    w = _wall(gain)
    if w:
        lines.append(w)
    c = gain.get("compile")
    if c and c.get("cost_s") is not None:
        n = c.get("break_even_step")
        if n is None:
            pay = "it never pays for itself (no step is faster)"
        elif c.get("paid_off_in_run"):
            pay = f"pays for itself after step {n}"
        else:
            pay = f"pays for itself after step {n} (this run had {gain.get('steps_after')})"
        lines.append(f"compile cost: {c['cost_s']:.1f} s in the first steps; {pay}")
    return lines


def _range(p: dict) -> str:
    """The prediction's range in the words the what-if said it (whatif.range_text, carried in the prediction)."""
    return p.get("range") or range_text(p)
