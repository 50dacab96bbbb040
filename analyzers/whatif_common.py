"""The record every what-if returns (analyzers/whatif.py) and the summary readers the predictors share: the
steady step, a finding by kind, the device timeline, phase shares. Pure."""
from __future__ import annotations


def step_s(s: dict) -> float | None:
    st = s.get("step_time_s") or {}
    return st.get("steady") or st.get("median")


def _finding(s: dict, kind: str) -> dict:
    return next((f for f in s.get("findings") or [] if f.get("kind") == kind), {})


def _device(s: dict) -> dict | None:
    d = s.get("device") or None
    return d if d and d.get("timeline", "device") == "device" else None


def _share(s: dict, *phases: str) -> float:
    ps = s.get("phase_share") or {}
    return sum(float(ps.get(p) or 0.0) for p in phases)


def _out(fix: str, step: float | None, touches: str, touches_share: float, point: float, low: float, high: float,
         assumed: str, cost_s: float | None = None) -> dict:
    """A prediction, each share clamped to [0, touches_share] (a fix never removes more than it touches)."""
    bound = max(0.0, min(1.0, touches_share))
    clamp = lambda x: max(0.0, min(bound, x))   # noqa: E731
    point, low, high = clamp(point), clamp(low), clamp(high)
    low, high = min(low, point), max(high, point)
    return {"fix": fix, "gain_share": point, "low_share": low, "high_share": high,
            "touches": touches, "touches_share": bound, "assumed": assumed,
            "step_s": step, "step_after_s": None if step is None else step * (1 - point),
            "cost_s": cost_s, "worth": True, "why_not": None}


def _none(fix: str, step: float | None, touches: str, why: str) -> dict:   # cannot act here, and why
    return {**_out(fix, step, touches, 0.0, 0.0, 0.0, 0.0, why), "worth": False, "why_not": why}
