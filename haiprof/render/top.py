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


def _gain(a: dict) -> str:
    if not a.get("gain_share"):
        return ""
    ms = f"{a['gain_s'] * 1e3:.1f} ms/step, " if a.get("gain_s") else ""
    return f"expected: up to {ms}{100 * a['gain_share']:.0f}% of the step"


def section_next(d, figs) -> str:
    acts = d.summary.get("next_steps") or []
    if not acts:
        return ""
    a = acts[0]
    cmd = fix_command(d.meta, a["fix"]) if a.get("fix") else ""
    gain = _gain(a)
    head = (f'<div class="next-main"><div class="next-title">{esc(a["title"])}</div>'
            f'<div class="next-why">Why: {esc(a["reason"])}.</div>'
            + (f'<div class="next-gain">{esc(gain)}</div>' if gain else "")
            + (f'<div class="next-cmd">Try it, measured against this run: <code>{esc(cmd)}</code></div>' if cmd else "")
            + "</div>")
    rest = "".join(
        f"<li>{esc(x['title'])}" + (f" ({esc(_gain(x))})" if _gain(x) else "")
        + (f": <code>{esc(fix_command(d.meta, x['fix']))}</code>" if x.get("fix") else "") + "</li>"
        for x in acts[1:4])
    rest = f'<p class="note">Then:</p><ol class="next-rest">{rest}</ol>' if rest else ""
    return f'<section id="next"><h3>Do this next</h3>{head}{rest}</section>'


def toc(sections_html: list[tuple[str, str]]) -> str:
    """sections_html: (id, title) of the sections present, in page order."""
    links = " · ".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t in sections_html)
    return f'<nav id="toc">{links}</nav>'
