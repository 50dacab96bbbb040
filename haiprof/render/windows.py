"""Report section: every op-level tracing window, its trace file, and its steps beside the steady steps around
it (summary.json `trace_windows`; only when the run traced more than its first window)."""
from __future__ import annotations

from .escape import esc


def _ms(x) -> str:
    return "n/a" if x is None else f"{x:.3g} ms"


def section_windows(d, figs) -> str:
    windows = d.summary.get("trace_windows") or []
    if len(windows) < 2:
        return ""   # the one window after warm-up is the op-level trace section's
    rows = ["<tr><th>trace file</th><th>steps</th><th>per step in the window</th><th>per step around it</th>"
            "<th>slower in the window</th></tr>"]
    for w in windows:
        name = w.get("file")
        link = f'<a href="{esc(name)}">{esc(name)}</a>' if name else "not written (the run ended inside it?)"
        slow = "n/a" if w.get("slowdown") is None else f"{w['slowdown']:.2f}×"
        rows.append(f"<tr><td>{link}</td><td>{w['first_step']}–{w['last_step']}</td><td>{_ms(w['step_ms'])}</td>"
                    f"<td>{_ms(w.get('around_ms'))}</td><td>{slow}</td></tr>")
    return (f'<section id="windows"><h3>Tracing windows</h3><p class="note">{len(windows)} windows traced op by '
            f'op (open a file in ui.perfetto.dev); their steps are left out of the statistics. Around: up to 20 '
            f'untraced steps on each side. A window is slower by what the profiler costs on these steps.</p>'
            f'<table class="grid">{"".join(rows)}</table></section>')
