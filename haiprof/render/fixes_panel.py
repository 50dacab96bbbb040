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
        f"<tr><td>median step time</td><td>{_ms(a['step_time_s'])}</td><td>{_ms(b['step_time_s'])}</td>"
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


def section_fixes(d, figs):
    s = d.summary
    fx = s.get("fixes")
    if not fx:
        return ""
    head = f"<p>Fixes ({esc(fx.get('source'))}): <code>{esc(fx.get('spec'))}</code></p>"
    if fx.get("note"):
        head += f"<p class='note'>{esc(fx['note'])}</p>"
    table = f'<table class="grid" id="fix-results">{_fix_rows(fx)}</table>' if fx.get("results") else ""
    body = ""
    if s.get("comparison"):
        body += _comparison(s["comparison"])
    elif fx.get("comparison_note"):
        body += f"<p class='note'>{esc(fx['comparison_note'])}</p>"
    g = s.get("loss_guard")
    if g:
        cls = "warn" if g["status"] == "diverged" else "note"
        body += f'<p class="{cls}" id="loss-guard">Loss guard: {esc(g["status"])}: {esc(g["message"])}</p>'
    return f'<section id="fixes"><h3>Fixes: before / after</h3>{head}{table}{body}</section>'
