"""Report panel for fixed runs: what each fix did, before/after against the baseline run, the loss guard."""
from __future__ import annotations

from .before_after import block
from .escape import render


def _results(fx: dict) -> list:
    rows = []
    for r in fx.get("results") or []:
        det = r.get("details") or {}
        extra = ""
        if "compile_s" in det:
            extra = f" (compile time {det['compile_s']:.1f} s, paid in the first compiled steps)"
        rows.append({"id": r["id"], "status": r["status"], "reason": r.get("reason"), "extra": extra})
    return rows


def section_fixes(d, figs):
    s = d.summary
    fx = s.get("fixes")
    if not fx:
        return ""
    g = fx.get("gain") or {}
    ranked = [{"id": c["id"], "speedup": f"{c['expected_speedup']:.2f}×", "reason": c["reason"]}
              for c in fx.get("ranked") or []]
    return render("fixes_panel.html.j2", "fixes", regression=g.get("message"), source=fx.get("source"),
                  spec=fx.get("spec"), ranked=ranked, excluded=fx.get("excluded") or [], note=fx.get("note"),
                  results=_results(fx), comparison=block(s["comparison"], g, figs) if s.get("comparison") else "",
                  comparison_note=fx.get("comparison_note"), baseline_note=fx.get("baseline_note"),
                  guard=s.get("loss_guard"))
