"""Top of the report: the ranked "do this next" block (summary["next_steps"], analyzers/actions.py) and the table
of contents. Reads the finished summary only."""
from __future__ import annotations

import shlex

from .escape import esc


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
    if a.get("gain_s") and step_s:   # each action alone: gains of several never add up past the step
        return (f"expected, this action alone: step {step_s * 1e3:.1f} → {(step_s - a['gain_s']) * 1e3:.1f} ms at "
                f"best ({100 * a['gain_share']:.0f}% of the step)")
    return f"expected, this action alone: up to {100 * a['gain_share']:.0f}% of the step"


def section_next(d, figs) -> str:
    acts = d.summary.get("next_steps") or []
    st = d.summary.get("step_time_s") or {}
    step_s = st.get("steady") or st.get("median")
    left = d.summary.get("advice_left_out") or {}
    left_html = ('<p class="note">Not recommended: ' + "; ".join(f"<code>{esc(fix)}</code> ({esc(why)})"
                                                                 for fix, why in left.items()) + "</p>") if left else ""
    if not acts:
        return f'<section id="next"><h3>Do this next</h3>{left_html}</section>' if left_html else ""
    a = acts[0]
    cmd = fix_command(d.meta, a["fix"]) if a.get("fix") else ""
    gain = _gain(a, step_s)
    head = (f'<div class="next-main"><div class="next-title">{esc(a["title"])}</div>'
            f'<div class="next-why">Why: {esc(a["reason"])}.</div>'
            + (f'<div class="next-gain">{esc(gain)}</div>' if gain else "")
            + (f'<div class="next-cmd">Try it, measured against this run: <code>{esc(cmd)}</code></div>' if cmd else "")
            + "</div>")
    rest = "".join(
        f"<li>{esc(x['title'])}" + (f" ({esc(_gain(x, step_s))})" if _gain(x, step_s) else "")
        + (f": <code>{esc(fix_command(d.meta, x['fix']))}</code>" if x.get("fix") else "") + "</li>"
        for x in acts[1:4])
    rest = f'<p class="note">Then:</p><ol class="next-rest">{rest}</ol>' if rest else ""
    return f'<section id="next"><h3>Do this next</h3>{head}{rest}{left_html}</section>'


def toc(sections_html: list[tuple[str, str]]) -> str:
    """sections_html: (id, title) of the sections present, in page order."""
    links = " · ".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t in sections_html)
    return f'<nav id="toc">{links}</nav>'
