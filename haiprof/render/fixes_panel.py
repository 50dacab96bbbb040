"""Report panel for fixed runs: what each fix did, before/after against the baseline run, the loss guard."""
from __future__ import annotations

from .escape import esc


def _ms(x) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"


def _fix_rows(fx: dict) -> str:
    rows = []
    for r in fx.get("results") or []:
        extra = ""
        det = r.get("details") or {}
        if "compile_s" in det:
            extra = f" (compile time {det['compile_s']:.1f} s, paid in the first compiled steps)"
        rows.append(f'<tr class="fix-{esc(r["status"])}"><td><code>{esc(r["id"])}</code></td>'
                    f'<td>{esc(r["status"])}</td><td>{esc(r.get("reason"))}{esc(extra)}</td></tr>')
    return "".join(rows)


def _comparison(cmp: dict) -> str:
    a, b = cmp["before"], cmp["after"]
    speed = f"{cmp['speedup']:.2f}×" if cmp.get("speedup") else "n/a"
    rows = [
        f"<tr><td>steady step time</td><td>{_ms(a['step_time_s'])}</td><td>{_ms(b['step_time_s'])}</td>"
        f"<td>{speed}</td></tr>",
        f"<tr><td>throughput (steps/s)</td><td>{(a['steps_per_s'] or 0):.2f}</td>"
        f"<td>{(b['steps_per_s'] or 0):.2f}</td><td></td></tr>",
        f"<tr><td>verdict</td><td>{esc(a['bottleneck'])}</td><td>{esc(b['bottleneck'])}</td>"
        f"<td>{'changed' if cmp['verdict_changed'] else 'unchanged'}</td></tr>",
    ]
    for p, r in cmp["phases"].items():
        if r["before_s"] is None or r["after_s"] is None or max(r["before_s"], r["after_s"]) < 1e-5:
            continue
        rows.append(f"<tr><td>{esc(p)} per step</td><td>{_ms(r['before_s'])}</td><td>{_ms(r['after_s'])}</td>"
                    f"<td>{r['delta_s'] * 1e3:+.1f} ms</td></tr>")
    return (f'<p>Baseline: <code>{esc(cmp.get("baseline_run"))}</code></p><table class="grid" id="before-after">'
            f"<tr><th></th><th>before</th><th>after</th><th>change</th></tr>{''.join(rows)}</table>")


def _gain(g: dict) -> str:
    """Wall time of both runs and, for compile-type fixes, the compile cost and the break-even step."""
    rows = []
    if g.get("wall_time_before_s") and g.get("wall_time_after_s"):
        same = g.get("steps_before") == g.get("steps_after")
        ratio = f"{g['wall_speedup']:.2f}×" if same and g.get("wall_speedup") else "different step counts"
        rows.append(f"<tr><td>whole run wall time</td><td>{g['wall_time_before_s']:.1f} s "
                    f"({esc(g.get('steps_before'))} steps)</td><td>{g['wall_time_after_s']:.1f} s "
                    f"({esc(g.get('steps_after'))} steps)</td><td>{esc(ratio)}</td></tr>")
    c = g.get("compile") or {}
    if c.get("cost_s") is not None:
        n = c.get("break_even_step")
        pay = "never (no step is faster)" if n is None else f"pays for itself after step {n}"
        rows.append(f"<tr><td>compile cost</td><td></td><td>{c['cost_s']:.1f} s</td><td>{esc(pay)}</td></tr>")
    return f'<table class="grid" id="fix-gain">{"".join(rows)}</table>' if rows else ""


def _ranked(fx: dict) -> str:
    items = [f"<li><code>{esc(c['id'])}</code> (expected {c['expected_speedup']:.2f}×): {esc(c['reason'])}</li>"
             for c in fx.get("ranked") or []]
    items += [f"<li>left out <code>{esc(c['id'])}</code>: {esc(c['reason'])}</li>" for c in fx.get("excluded") or []]
    return f'<ol id="fix-ranking">{"".join(items)}</ol>' if items else ""


def section_fixes(d, figs):
    s = d.summary
    fx = s.get("fixes")
    if not fx:
        return ""
    g = fx.get("gain") or {}
    warn = f'<p class="warn" id="fix-regression"><b>{esc(g["message"])}</b></p>' if g.get("message") else ""
    head = warn + f"<p>Fixes ({esc(fx.get('source'))}): <code>{esc(fx.get('spec'))}</code></p>" + _ranked(fx)
    if fx.get("note"):
        head += f"<p class='note'>{esc(fx['note'])}</p>"
    table = f'<table class="grid" id="fix-results">{_fix_rows(fx)}</table>' if fx.get("results") else ""
    body = ""
    if s.get("comparison"):
        body += _comparison(s["comparison"]) + _gain(g)
    elif fx.get("comparison_note"):
        body += f"<p class='note'>{esc(fx['comparison_note'])}</p>"
    g = s.get("loss_guard")
    if g:
        cls = "warn" if g["status"] == "diverged" else "note"
        body += f'<p class="{cls}" id="loss-guard">Loss guard: {esc(g["status"])}: {esc(g["message"])}</p>'
    return f'<section id="fixes"><h3>Fixes: before / after</h3>{head}{table}{body}</section>'
