"""Report section: the slowest steady steps (summary.json `slowest_steps`), what each spent its time on, what the
host and the GPU did around it and what else happened in it, so a long run's stalls can be found by step number.
Each step number is a link that zooms the step chart onto that step (render/js/steps.js)."""
from __future__ import annotations

import numpy as np

from .escape import render
from .gpu import device_per_step

from ..rundir.vocabulary import ALL_PHASES as PHASE_ORDER


def _gpu(per_step: dict, step: int) -> str:
    p = per_step.get(step)
    if not p or not p[0]:
        return ""
    return f"GPU busy {p[1]:.3g} of {p[0]:.3g} ms"


def _device_of(d, steps: list) -> dict:
    """step -> (device ms, GPU busy ms) of the given steps (CUDA runs)."""
    dev = d.summary.get("device") or {}
    if not dev:
        return {}
    per = device_per_step(d, dev)
    at = np.searchsorted(per["index"], steps)
    return {s: (float(per["duration"][k]), float(per["busy"][k])) for s, k in zip(steps, at.tolist())
            if k < len(per["index"]) and per["index"][k] == s}


def section_slowest(d, figs) -> str:
    rows = d.summary.get("slowest_steps") or []
    if len(rows) < 2:
        return ""
    # The steady step, as everywhere on the page; never the host's median (bimodal when the GPU runs behind).
    steady = (d.summary.get("step_time_s") or {}).get("steady")
    per_step = _device_of(d, [int(r["step"]) for r in rows])
    out = []
    for r in rows:
        ph = r.get("phases_ms") or {}
        step = int(r["step"])
        out.append({"step": step, "time": f"{r['time_ms']:.3g}",
                    "phases": [f"{ph[p]:.3g}" if ph.get(p) else "" for p in PHASE_ORDER],
                    "did": "; ".join(x for x in (r.get("host"), _gpu(per_step, step)) if x),
                    "notes": "; ".join(r.get("notes") or []), "trace": r.get("trace")})
    return render("slowest.html.j2", "section", rows=out, phases=PHASE_ORDER,
                  steady=f"{steady * 1e3:.3g}" if steady else "", device=bool(per_step))
