"""Correctness guard for fixes: does the fixed run reach the same loss as the baseline after the same steps?

Compares the mean loss of the last LOSS_GUARD_WINDOW steps both runs reached (a window, because one batch's loss
is noisy). Pure function of the two loss lists (the scalars passed to backward, in order).
"""
from __future__ import annotations

import math

from . import thresholds as T


def _finite(xs):
    return [x for x in xs if isinstance(x, (int, float)) and math.isfinite(x)]


def compare_losses(baseline: list, fixed: list, rtol: float = T.LOSS_GUARD_RTOL, atol: float = T.LOSS_GUARD_ATOL,
                   window: int = T.LOSS_GUARD_WINDOW) -> dict:
    tol = {"rtol": rtol, "atol": atol, "window": window}
    n = min(len(baseline), len(fixed))
    if n == 0:
        which = "the baseline" if not baseline else "the fixed run"
        return {"status": "unavailable", "steps_compared": 0, "tolerance": tol,
                "message": f"no loss recorded in {which} (no scalar was passed to backward)"}
    lo = max(0, n - window)
    a, b = _finite(baseline[lo:n]), _finite(fixed[lo:n])
    if len(b) < n - lo:
        return {"status": "diverged", "steps_compared": n, "tolerance": tol, "baseline_loss": None,
                "fixed_loss": None, "message": f"the fixed run's loss is NaN/inf within the first {n} steps"}
    if not a:
        return {"status": "unavailable", "steps_compared": n, "tolerance": tol,
                "message": "the baseline's loss is NaN/inf: nothing to compare with"}
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    diff = abs(mb - ma)
    rel = diff / abs(ma) if ma else math.inf
    ok = diff <= atol or rel <= rtol
    where = f"steps {lo + 1}-{n}" if n - lo > 1 else f"step {n}"
    msg = (f"loss over {where}: baseline {ma:.5g}, fixed {mb:.5g} (difference {diff:.3g}, {100 * rel:.2f}%; "
           f"tolerance {100 * rtol:g}%)")
    return {"status": "ok" if ok else "diverged", "steps_compared": n, "baseline_loss": ma, "fixed_loss": mb,
            "abs_diff": diff, "rel_diff": rel if math.isfinite(rel) else None, "tolerance": tol,
            "message": msg + ("" if ok else ": beyond tolerance, the fix changes what is trained")}


def with_worker_caveat(guard: dict, workers: int | None) -> dict:
    """A loss difference where the fix moved loading into `workers` DataLoader workers (the baseline loaded on
    the training thread): each worker seeds its own generator and draws other random augmentations than the
    plain run, so the difference is the fix's only if the plain script is reproducible with that worker count.
    Said so, not "the fix changes what is trained"; still a difference to check (a wrong fix duplicates data)."""
    if guard.get("status") != "diverged" or not workers or guard.get("baseline_loss") is None:
        return guard
    msg = guard["message"].replace(": beyond tolerance, the fix changes what is trained", "")
    return {**guard, "data_order": True,
            "message": (f"{msg}: beyond tolerance, but the fixed run loads with {workers} DataLoader workers, each "
                        "seeding its own generator: they draw other random augmentations than the training thread "
                        "did, and the difference is the fix's only if the plain script is seeded and gives the "
                        "same loss with that worker count")}
