"""Report panel for fixed runs: what each fix did, before/after against the baseline run, the loss guard."""
from __future__ import annotations

from .before_after import block
from .escape import esc


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
        body += block(s["comparison"], g, figs)
    elif fx.get("comparison_note"):
        body += f"<p class='note'>{esc(fx['comparison_note'])}</p>"
    g = s.get("loss_guard")
    if g:
        cls = "warn" if g["status"] == "diverged" else "note"
        body += f'<p class="{cls}" id="loss-guard">Loss guard: {esc(g["status"])}: {esc(g["message"])}</p>'
    return f'<section id="fixes"><h3>Fixes: before / after</h3>{head}{table}{body}</section>'
