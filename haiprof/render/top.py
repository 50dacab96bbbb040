"""Top of the report: the ranked "do this next" block (summary["next_steps"], analyzers/actions.py) and the table
of contents. Reads the finished summary only."""
from __future__ import annotations

import shlex

from .escape import render

TEMPLATE = "top.html.j2"


def fix_command(meta: dict, fix: str) -> str:
    """The same haiprof command line with `--fix FIX` (and without --out, so the new run gets its own dir)."""
    argv = list(meta.get("haiprof_argv") or [])
    if "--out" in argv and argv.index("--out") + 1 < len(argv) and "--" not in argv[:argv.index("--out")]:
        i = argv.index("--out")
        del argv[i:i + 2]
    return shlex.join(["haiprof", "run", "--fix", fix, *argv])


def _gain(a: dict, step_s: float | None = None) -> str:
    if not a.get("gain_share"):
        return ""
    pred = (a.get("predicted") or {}).get("text")   # analyzers/whatif.py: the same phrase the console prints
    if a.get("gain_s") and step_s:   # each action alone: gains of several never add up past the step
        return (f"expected, this action alone: step {step_s * 1e3:.1f} → {(step_s - a['gain_s']) * 1e3:.1f} ms at "
                f"best ({100 * a['gain_share']:.0f}% of the step)" + (f"; {pred}" if pred else ""))
    return f"expected, this action alone: up to {100 * a['gain_share']:.0f}% of the step" + (f"; {pred}" if pred else "")


def section_next(d, figs) -> str:
    acts = d.summary.get("next_steps") or []
    st = d.summary.get("step_time_s") or {}
    step_s = st.get("steady") or st.get("median")
    left = list((d.summary.get("advice_left_out") or {}).items())
    if not acts and not left:
        return ""
    rows = [{"title": a["title"], "reason": a["reason"], "gain": _gain(a, step_s),
             "cmd": fix_command(d.meta, a["fix"]) if a.get("fix") else ""} for a in acts[:4]]
    return render(TEMPLATE, "next", first=rows[0] if rows else None, rest=rows[1:], left_out=left)


def toc(sections: list[tuple[str, str]]) -> str:
    """sections: (id, title) of the sections present, in page order."""
    return render(TEMPLATE, "toc", links=sections)
