"""What a report page must never say, checked on the analysed run (summary.json) and its page (report.html).
Pure: data in, violations out; tests/test_page_invariants.py runs it on every recording and example it has, and
benchmarks/page_audit.py prints every violation on any set of run directories.

Each rule is a sentence a user would hold the page to:
  - the headline is one sentence: the verdict's share of the steady step, in ms of that same step, and what its
    first fix can remove; "X ms of it (Y%)" is Y% of the step it names; that fix is the first action
  - shares quoted together come from one partition: the bound classes on one clock add up to at most 100%
  - no fix is offered anywhere (headline, findings, "do this next") for what the script already does
  - a run with no GPU in it never speaks of a GPU in its verdict, findings or actions
  - phase_share is a partition (sums to 1)
  - one step time per clock: every step time the page states is the steady step, unless its sentence names
    another clock (the host clock) or population (traced steps, the baseline); each of those says one value too;
    "step X → Y ms at best (P% of the step)" removes P% of X
"""
from __future__ import annotations

import html as html_lib
import re

from .verdict import clock_of

BOUND = ("io", "compute", "launch", "communication")
TOLERANCE = 0.011          # shares are rounded to whole percent on the page: 1 point each way
MS_TOLERANCE = 0.06        # ms figures are printed with one decimal


def _headline(s: dict) -> list[str]:
    out = []
    head = s.get("headline") or ""
    if s.get("bottleneck") in (None, "none") or s.get("distributed"):
        return out
    first = head.split(" The model ran on the CPU")[0].split(" Measured on a busy machine")[0]
    if first.count(". ") or not first.endswith("."):
        out.append(f"headline: more than one sentence: {first!r}")
    steady = (s.get("step_time_s") or {}).get("steady")
    m = re.search(r"of the ([\d.]+) ms step", first)
    if steady and not (m and abs(float(m.group(1)) - steady * 1e3) <= MS_TOLERANCE):
        out.append(f"headline: the step it names ({m.group(1) if m else 'none'} ms) is not the steady step "
                   f"({steady * 1e3:.1f} ms)")
    offered = re.search(r"--fix (\S+) can remove", first)
    action = ((s.get("next_steps") or [{}])[0]).get("fix")
    if offered and action != offered.group(1):
        out.append(f"headline offers --fix {offered.group(1)} but 'do this next' starts with {action}")
    for gain in re.finditer(r"([\d.]+) ms (?:of it )?\((\d+)%\)", first):   # the bound, and the prediction
        ms, pct = float(gain.group(1)), int(gain.group(2))
        if m and abs(ms - pct / 100 * float(m.group(1))) > 0.006 * float(m.group(1)) + MS_TOLERANCE:
            out.append(f"headline: {ms} ms is not {pct}% of the {m.group(1)} ms step")
    bound = re.search(r"at most ([\d.]+) ms of it \(\d+%\), predicted ([\d.]+) ms", first)
    if bound and float(bound.group(2)) > float(bound.group(1)) + MS_TOLERANCE:
        out.append(f"headline: predicted {bound.group(2)} ms beyond the at most {bound.group(1)} ms the fix touches")
    return out


def _partition(s: dict) -> list[str]:
    out = []
    share = s.get("phase_share") or {}
    if share and abs(sum(share.values()) - 1.0) > 0.01:
        out.append(f"phase_share sums to {sum(share.values()):.3f}")
    by_clock: dict = {}
    for f in s.get("findings") or []:
        if f.get("kind") in BOUND:
            by_clock.setdefault(clock_of(f), []).append(f)
    for clock, fs in by_clock.items():
        total = sum(f.get("share", 0.0) for f in fs)
        if total > 1.0 + TOLERANCE:
            parts = ", ".join(f"{f['kind']} {100 * f.get('share', 0):.0f}%" for f in fs)
            out.append(f"findings on the {clock} clock add up to {100 * total:.0f}% of the step ({parts})")
    return out


def _left_out(s: dict, html: str | None) -> list[str]:
    out = []
    gone = set(s.get("advice_left_out") or {})
    for f in s.get("findings") or []:
        bad = gone & set(f.get("fixes") or [])
        if bad:
            out.append(f"finding {f['kind']} offers {sorted(bad)}, which the script already does or this run applied")
    for a in s.get("next_steps") or []:
        if a.get("fix") in gone:
            out.append(f"'do this next' offers {a['fix']}, which is left out")
    for x in gone:
        if f"--fix {x} can" in (s.get("headline") or ""):
            out.append(f"headline offers --fix {x}, which is left out")
    if html and '<section id="findings">' in html:
        box = html.split('<section id="findings">', 1)[1].split("</section>", 1)[0]
        for x in gone:
            if f"--fix {x}" in box:
                out.append(f"the Findings box offers --fix {x}, which is left out")
    return out


def _no_gpu_words(s: dict, meta: dict) -> list[str]:
    if s.get("device") or (meta or {}).get("gpus") or (s.get("gpu") or {}).get("top_kernels"):
        return []
    words = [("headline", s.get("headline") or "")]
    # the "no-device" finding is the one that says there is no GPU activity: that is the point of it
    words += [(f"finding {f['kind']}", f.get("message") or "") for f in s.get("findings") or []
              if f.get("kind") != "no-device"]
    words += [(f"action {a.get('fix')}", f"{a.get('title', '')} {a.get('reason', '')}") for a in s.get("next_steps") or []]
    return [f"{where} speaks of a GPU on a run without one: {text[:120]!r}" for where, text in words
            if re.search(r"\bGPU\b", text)]


def page_text(html: str) -> str:
    """The words a reader sees: scripts, styles and tags out, entities decoded, whitespace collapsed."""
    html = re.sub(r"<script.*?</script>|<style.*?</style>", " ", html, flags=re.S)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


STEP_FIGURE = re.compile(r"of the (?P<a>\d[\d.]*) ms step|(?P<b>\d[\d.]*) ms/step|step (?:is|takes) (?P<c>\d[\d.]*) ms"
                         r"|step (?P<d>\d[\d.]*) → (?P<to>\d[\d.]*) ms (?:at best )?\((?P<pct>\d+)% of the step[,)]")
# A sentence naming one of these quotes another population or clock than the steady step's: its own group.
OTHER_CLOCKS = (("traced", ("profiler on", "traced step", "tracing window")), ("baseline", ("baseline", "before the fix")),
                ("host clock", ("host clock",)))


def _close(a: float, b: float) -> bool:
    """Equal as printed: one decimal, or three significant digits (0.6% of the value)."""
    return abs(a - b) <= max(MS_TOLERANCE, 0.006 * max(a, b))


def _half_unit(printed: str) -> float:
    """Half the last printed digit's unit: how far the value behind a printed figure can lie from it."""
    return 0.5 * 10 ** -len(printed.partition(".")[2])


def _leaves(step: str, pct: str, to: str) -> bool:
    """Whether 'step STEP -> TO ms (PCT% of the step)' holds for some values that print as these figures: at
    1.9 ms a percent's rounding alone moves the result by 0.01 ms, and each figure's own by up to 0.05."""
    s, p, t = float(step), int(pct), float(to)
    hs, ht = _half_unit(step), _half_unit(to)
    lo = (s - hs) * (1 - (p + 0.5) / 100)
    hi = (s + hs) * (1 - max(p - 0.5, 0) / 100)
    return lo - ht - 1e-9 <= t <= hi + ht + 1e-9


def _step_times(s: dict, html: str | None) -> list[str]:
    text = page_text(html) if html else (s.get("headline") or "")
    steady = (s.get("step_time_s") or {}).get("steady")
    groups: dict = {}
    out = []
    for m in STEP_FIGURE.finditer(text):
        before, after = text[max(0, m.start() - 40):m.start()], text[m.end():m.end() + 8]
        if m.group("b") and (re.search(r"(->|→|\(|\+|=) ?$|\b(dataloader|h2d|forward|backward|optimizer|allreduce|"
                                       r"other)\b", before) or re.match(r" (more|less|before|after)\b", after)):
            continue   # an amount a step ("dataloader 30.4 -> 43.1 ms/step", "transfer 50% (31.3 ms/step)",
            #            "+40 ms/step before the sync"), not the step's time
        value = float(m.group("a") or m.group("b") or m.group("c") or m.group("d"))
        start = max(text.rfind(". ", 0, m.start()), text.rfind(": ", 0, m.start()))
        end = text.find(". ", m.end())
        sentence = text[start + 2 if start >= 0 else 0:end if end >= 0 else len(text)]
        group = next((name for name, words in OTHER_CLOCKS if any(w in sentence for w in words)), "steady")
        groups.setdefault(group, []).append((value, sentence))
        if m.group("pct") and not _leaves(m.group("d"), m.group("pct"), m.group("to")):
            left = value * (1 - int(m.group("pct")) / 100)
            out.append(f"'{m.group(0)}': removing {m.group('pct')}% of {value} ms leaves {left:.1f} ms")
    for group, found in groups.items():
        ref = steady * 1e3 if group == "steady" and steady else found[0][0]
        for value, sentence in found:
            if not _close(value, ref):
                out.append(f"step time {value} ms where the page's {group} step is {ref:.1f} ms: {sentence[:140]!r}")
    return out


def check(summary: dict, meta: dict | None = None, html: str | None = None) -> list[str]:
    """Every violation, one line each; [] when the page keeps every rule."""
    return [*_headline(summary), *_partition(summary), *_left_out(summary, html), *_no_gpu_words(summary, meta or {}),
            *_step_times(summary, html)]
