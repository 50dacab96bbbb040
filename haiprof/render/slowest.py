"""Report section: the slowest steady steps (summary.json `slowest_steps`), what each spent its time on, what the
host and the GPU did around it and what else happened in it, so a long run's stalls can be found by step number.
Each step number is a link that zooms the step chart onto that step (render/js/steps.js)."""
from __future__ import annotations

import numpy as np

from .escape import esc
from .gpu import device_per_step

PHASE_ORDER = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "other")


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
    median = (d.summary.get("step_time_s") or {}).get("median")
    per_step = _device_of(d, [int(r["step"]) for r in rows])
    head = "".join(f"<th>{p}</th>" for p in PHASE_ORDER)
    body = []
    for r in rows:
        ph = r.get("phases_ms") or {}
        cells = "".join(f"<td>{ph[p]:.3g}</td>" if ph.get(p) else "<td></td>" for p in PHASE_ORDER)
        step = int(r["step"])
        did = "; ".join(x for x in (r.get("host"), _gpu(per_step, step)) if x)
        body.append(f'<tr data-step="{step}"><td><a class="zoom-step" href="#fig-steps" data-step="{step}" '
                    f'title="show step {step} in the step chart">{step}</a></td><td><b>{r["time_ms"]:.3g}</b></td>'
                    f'{cells}<td>{esc(did)}</td><td>{esc("; ".join(r.get("notes") or []))}</td></tr>')
    ref = f" The median step is {median * 1e3:.3g} ms." if median else ""
    return (f'<section id="slowest"><h3>Slowest steps</h3><p class="note">The {len(rows)} slowest steps after '
            f'warm-up and outside the tracing windows, in ms.{ref} Click a step to see it in the step chart.</p>'
            f'<div style="overflow-x:auto"><table class="grid" id="slowest-table"><tr><th>step</th><th>time</th>'
            f'{head}<th>host and GPU around it</th><th>what else happened</th></tr>{"".join(body)}</table></div>'
            f'</section>')
