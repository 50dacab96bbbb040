"""Which fixes `--fix auto` applies: those of the verdict's own finding, ranked by predicted gain, each with its
reason; fixes that earlier fixed runs of the same command showed to slow the step are left out. Pure functions.

The predicted gain is analyzers/whatif.py's what-if of the diagnosis run: what that fix changes, re-timed on the
same step, never more than the time of what it touches. A fix predicted to pay less than its cost (compile time
over the run's steps) or than the noise the run can resolve, or that cannot act here (CUDA graphs without CUDA),
is left out with its reason.
"""
from __future__ import annotations

from . import whatif

MIN_EXPECTED = 1 / (1 - whatif.MIN_GAIN)


def expected_gain(fix_id: str, summary: dict) -> tuple[float | None, str, dict | None]:
    """(expected speedup, why, the prediction) of one fix on the diagnosed run; speedup None when it is not
    worth applying here (the why says so)."""
    p = whatif.predict(fix_id, summary)
    if p is None:
        return None, "no prediction for this fix", None
    if not p["worth"]:
        return None, p["why_not"], p
    step = f" of its {p['step_s'] * 1e3:.1f} ms step" if p.get("step_s") else " of its step"
    why = (f"predicted on the run it was chosen from: {100 * p['gain_share']:.0f}%{step} ({whatif.range_text(p)}), "
           f"assuming {p['assumed']}")
    return 1.0 / max(1e-6, 1.0 - p["gain_share"]), why, p


def regressed(history: list[dict]) -> dict[str, str]:
    """Fix id -> why it is left out, from earlier fixed runs of the same command, newest first:
    [{"run": path, "applied": [ids], "gain": fix_gain dict, "crashed": exit code when the script failed}]. A
    fix's newest run decides (a later run that did not regress clears an older regression or failure)."""
    decided: dict[str, str | None] = {}
    for h in history:
        gain = h.get("gain") or {}
        for fix_id in h.get("applied") or []:
            if fix_id in decided:
                continue
            if h.get("crashed") is not None:
                decided[fix_id] = f"the script failed (exit {h['crashed']}) with it applied in {h.get('run')}"
                continue
            decided[fix_id] = (f"made this command's step {gain.get('slower_pct', 0):.0f}% slower in "
                               f"{h.get('run')}" if gain.get("regression") else None)
    return {k: v for k, v in decided.items() if v}


def rank(summary: dict, candidates: list[str], history: list[dict] | None = None) -> tuple[list, list]:
    """(chosen, left out): chosen = [{"id", "expected_speedup", "reason", "predicted"}] best first; left out =
    [{"id", "reason"}]."""
    slow = regressed(history or [])
    chosen, excluded = [], []
    for fix_id in candidates:
        if fix_id in slow:
            excluded.append({"id": fix_id, "reason": slow[fix_id]})
            continue
        gain, why, p = expected_gain(fix_id, summary)
        if gain is None:
            excluded.append({"id": fix_id, "reason": why})
        else:
            chosen.append({"id": fix_id, "expected_speedup": round(gain, 3), "reason": why, "predicted": p})
    chosen.sort(key=lambda c: -c["expected_speedup"])
    return chosen, excluded
