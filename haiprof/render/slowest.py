"""Report section: the slowest steady steps (summary.json `slowest_steps`), what each spent its time on and what
else happened in it, so a long run's stalls can be found by step number."""
from __future__ import annotations

from .escape import esc

PHASE_ORDER = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "other")


def section_slowest(d, figs) -> str:
    rows = d.summary.get("slowest_steps") or []
    if len(rows) < 2:
        return ""
    median = (d.summary.get("step_time_s") or {}).get("median")
    head = "".join(f"<th>{p}</th>" for p in PHASE_ORDER)
    body = []
    for r in rows:
        ph = r.get("phases_ms") or {}
        cells = "".join(f"<td>{ph[p]:.3g}</td>" if ph.get(p) else "<td></td>" for p in PHASE_ORDER)
        notes = esc("; ".join(r.get("notes") or []))
        step = int(r["step"])   # a link that zooms the step chart onto the step (render/js/steps.js)
        body.append(f'<tr data-step="{step}"><td><a class="zoom-step" href="#fig-steps" data-step="{step}" '
                    f'title="show step {step} in the step chart">{step}</a></td><td><b>{r["time_ms"]:.3g}</b></td>'
                    f'{cells}<td>{notes}</td></tr>')
    ref = f" The median step is {median * 1e3:.3g} ms." if median else ""
    return (f'<section id="slowest"><h3>Slowest steps</h3><p class="note">The {len(rows)} slowest steps after '
            f'warm-up and outside the tracing windows, in ms.{ref} Click a step to see it in the step chart.</p><div style="overflow-x:auto">'
            f'<table class="grid"><tr><th>step</th><th>time</th>{head}<th>what else happened</th></tr>'
            f'{"".join(body)}</table></div></section>')
