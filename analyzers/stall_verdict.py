"""The verdict weighs the whole run: when periodic stalls are the biggest removable waste, they are the verdict.

A periodic stall's share is its extra time over the median step, of all the steady steps' time: the same total
the phase shares divide, so the two compare. All of it is removable (the stall's work can leave the training
thread or run less often), while a bound class's open fixes remove at most what they touch
(`verdict.fixes_can_remove`: the figure the verdict's headline quotes; the class's `removable` share for a fix
with no prediction). When the stall's share is larger (or the verdict's fixes are all left out: in use, applied,
or not worth it here), the headline and the first action are the stall's.

The bound class stays one of io/compute/launch/communication/none, chosen by what the stall spent its time on:
  * from the flight recorder's trace of a stall (analyzers/stall_trace.py): file I/O or waiting (sleep, a lock,
    a socket) -> io: the training thread waited on something outside compute, as it waits on input; torch ops or
    host-device syncs -> compute; other Python -> none (its own work, no bound class fits);
  * without a trace, from the phase that holds the extra time: dataloader -> io, allreduce -> communication,
    forward/backward/optimizer/h2d -> compute, outside the phases -> none (nothing says what it was).
"""
from __future__ import annotations

from .findings import Action
from .verdict import fixes_can_remove

CLEAR = 3.0   # a stall this many median steps long, or longer, may take the verdict (the flight recorder's K)
LABEL = {"io": "I/O-bound", "compute": "Compute-bound", "communication": "Communication-bound", "none": "Stalls"}
FROM_TRACE = {"io": "io", "wait": "io", "ops": "compute", "sync": "compute", "gc": "none", "python": "none"}
FROM_PHASE = {"dataloader": "io", "allreduce": "communication", "forward": "compute", "backward": "compute",
              "optimizer": "compute", "h2d": "compute", "other": "none"}
WHAT = {"io": "file I/O or waiting", "wait": "waiting", "ops": "torch ops", "sync": "host-device syncs",
        "gc": "garbage collection", "python": "Python"}
TITLE = {"io": "Take the stall's I/O off the training thread: save checkpoints asynchronously (a background "
               "thread, or torch.distributed.checkpoint.async_save) or less often",
         "compute": "Move the periodic computation out of the training steps (evaluate or log less often, or "
                    "on its own schedule)",
         "communication": "Find the periodic collective (a metrics all-reduce, a barrier) and run it less often",
         "none": "Move the work that runs every few steps off the training thread, or run it less often"}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _clear(ev: dict) -> bool:
    """Stalls CLEAR x the median step or longer: a busy machine's slow steps (2-3x) can line up by chance into a
    period (the whole-run analysis reports it); only a stall that stands out like a checkpoint takes the verdict."""
    step, stall = ev.get("median_step_s"), ev.get("median_stall_s")
    return bool(step and stall and stall >= CLEAR * step)


def bound_of(stall: dict) -> tuple[str, str | None]:
    """(bound class, what the trace says it was or None) for a periodic-stall finding."""
    ev = stall.get("evidence") or {}
    ms = ev.get("trace_ms")
    if ms:
        merged = dict(ms)
        merged["io"] = merged.get("io", 0.0) + merged.pop("wait", 0.0)   # both: waiting outside compute
        kind = max(merged, key=merged.get)
        return FROM_TRACE.get(kind, "none"), WHAT.get(kind)
    per_phase = ev.get("excess_by_phase_s") or {}
    if not per_phase:
        return "none", None
    return FROM_PHASE.get(max(per_phase, key=per_phase.get), "none"), None


def weigh(findings: list[dict], bottleneck: str, step_s: float | None, left_out: dict | None = None,
          predicted: dict | None = None) -> dict | None:
    """{"bottleneck", "headline", "action"} when a periodic stall outweighs what the verdict's open fixes can
    remove (verdict.fixes_can_remove: the figure the verdict's own headline would quote); else None. `step_s`: the
    steady step the headline names; `left_out`: fixes not to offer (in use, applied, not worth it here): a verdict
    whose fixes are all left out has nothing a fix removes; `predicted`: each fix's what-if (analyzers/whatif.py)."""
    stalls = [f for f in findings if f.get("kind") == "periodic-stall" and f.get("severity") in ("moderate", "high")
              and not (f.get("evidence") or {}).get("profiler_own") and _clear(f.get("evidence") or {})]
    if not stalls:
        return None
    stall = max(stalls, key=lambda f: f.get("share", 0.0))
    top = next((f for f in findings if f.get("kind") == bottleneck), None)
    beaten = fixes_can_remove(top, left_out, predicted) if top is not None else 0.0
    share = float(stall.get("share", 0.0))
    if share <= beaten:
        return None
    ev = stall.get("evidence") or {}
    bound, what = bound_of(stall)
    every = (f"every {ev['period_steps']:.0f} steps" if ev.get("period_steps") else
             f"every {ev['period_s']:.3g} s" if ev.get("period_s") else "periodically")
    step = f" of the {step_s * 1e3:.1f} ms step" if step_s else " of step time"
    seen = ""
    if ev.get("trace"):
        culprit = f" in {ev['trace_culprit']}" if ev.get("trace_culprit") else ""
        seen = f" ({what or 'its work'}{culprit}, traced at step {ev['trace_step']}: {ev['trace']})"
    gain = f"{share * step_s * 1e3:.1f} ms of it ({_pct(share)})" if step_s else f"{_pct(share)} of it"
    beat = (f"; more than the {_pct(beaten)} {top['kind']} fixes can remove" if top is not None and beaten > 0
            else f"; the {top['kind']} fixes are left out here" if top is not None and top.get("fixes") else "")
    headline = (f"{LABEL.get(bound, 'Stalls')} ({stall['severity']}): a stall {every} took {_pct(share)}{step}"
                f"{seen}; taking it off the training thread can remove at most {gain}{beat}.")
    action = Action(title=TITLE.get(bound, TITLE["none"]), reason=stall["message"], gain_share=share, fix=None,
                    kind="periodic-stall", gain_s=share * step_s if step_s else None).as_dict()
    return {"bottleneck": bound, "headline": headline, "action": action, "stall_share": share,
            "instead_of": bottleneck}
