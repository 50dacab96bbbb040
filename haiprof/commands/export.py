"""`haiprof export RUN_DIR --format chrome [--steps A:B]`: the run as a Chrome trace for Perfetto
(haiprof/render/chrome_trace.py builds and streams it; the step range is resolved here with the analysis' steps)."""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import OneLineParser, UserError, say
from ..render.chrome_trace import (  # noqa: F401 (the trace's names, where callers and tests find them)
    KINETO_NAMES, RANK_PID_BASE, SYSTEM_PID, TID_GPU, TID_HOST, TID_STEPS, ExportError, Trace, _meta_event,
    _wall_ns, build_trace, counter_events, kineto_events, kineto_traces, phase_events, write_trace)
from ..rundir import RunDir

# Perfetto's UI loads a JSON trace in the browser's memory: past a few hundred thousand steps (millions of
# slices) it is slow or gives up; said, not refused
HUGE_STEPS = 200_000
STEPS_ARG = re.compile(r"\s*(\d+)\s*(?::\s*(\d+)\s*)?")


def parse_steps(text: str) -> tuple[int, int]:
    """--steps A:B (both included) or N: (first, last)."""
    m = STEPS_ARG.fullmatch(text)
    if not m:
        raise UserError(f"--steps {text!r}: expected A:B (steps A to B, both included) or N (one step), "
                        "step numbers as the report gives them")
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) is not None else a
    if a > b:
        raise UserError(f"--steps {text}: the first step ({a}) comes after the last ({b})")
    return a, b


def step_windows(trace: Trace, first: int, last: int, text: str) -> dict:
    """{rank: (t0, t1)}: where steps first..last run on each rank's clock (the analysis' steps, numbered as the
    report numbers them); a rank with fewer steps keeps those it has."""
    from ..analysis.step_range import step_spans

    windows, counts = {}, {}
    for rank, _, _ in trace.sources:
        start, end = step_spans(trace.columns(rank))   # read once: the export's slices take them too
        counts[rank] = len(start)
        if first < len(start):
            windows[rank] = (int(start[first]), int(end[min(last, len(start) - 1)]))
    most = max(counts.values(), default=0)
    if not most:
        raise UserError(f"--steps {text}: the run has no steps")
    if last >= most:
        raise UserError(f"--steps {text}: beyond the run, which has {most:,} steps (0 to {most - 1})")
    return windows


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def cmd_export(argv: list[str]) -> int:
    p = OneLineParser(prog="haiprof export", description="Export a run for other tools. "
                                "chrome: a Chrome trace JSON (open it in ui.perfetto.dev or chrome://tracing).")
    p.add_argument("run_dir")
    p.add_argument("--format", choices=["chrome"], default="chrome", help="output format (default chrome)")
    p.add_argument("--out", metavar="FILE", help="output file (default RUN_DIR/trace.chrome.json; .gz compresses)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--merge-trace", nargs="?", const="", metavar="KINETO_JSON",
                   help="merge a torch.profiler/Kineto Chrome trace (default: trace.json.gz in RUN_DIR)")
    p.add_argument("--steps", metavar="A:B", help="only the events overlapping steps A to B (both included; N: one "
                   "step), numbered as in the report; the time axis stays the run's")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    steps = parse_steps(ns.steps) if ns.steps is not None else None   # a typo fails before anything is read
    run_dir = RunDir.open(ns.run_dir)
    if ns.out and Path(ns.out).exists() and not ns.overwrite:   # never a user's file (or a run's meta.json)
        raise UserError(f"--out {ns.out}: exists; choose a new file or pass --overwrite")
    merge = None
    if ns.merge_trace is not None:
        merge = [Path(ns.merge_trace)] if ns.merge_trace else kineto_traces(run_dir)
        if not merge:
            raise UserError(f"--merge-trace: no Kineto trace in {run_dir.path} ({' or '.join(KINETO_NAMES)})")
        if not merge[0].is_file():
            raise UserError(f"--merge-trace: {merge[0]}: no such file")
    out = Path(ns.out) if ns.out else run_dir.path / "trace.chrome.json"
    try:
        trace = Trace(run_dir, merge)
        if steps is not None:
            trace.windows = step_windows(trace, *steps, ns.steps)
        events = write_trace(trace, out)
    except ExportError as e:
        raise UserError(str(e)) from None
    except OSError as e:   # the output's (a full disk, a missing folder) or, rarely, an input file's
        written = e.filename is None or Path(e.filename).parent == out.parent
        raise UserError(f"cannot write {out}: {e.strerror or e}" if written else
                        f"cannot read {e.filename}: {e.strerror or e}") from None
    print(out)
    say(f"haiprof: wrote {out}: {events:,} events, {_covered(trace.steps)}, {_size(out.stat().st_size)}")
    most = max((n for n, _, _ in trace.steps.values()), default=0)
    if steps is None and most >= HUGE_STEPS:
        say(f"haiprof: {most:,} steps: Perfetto is slow to open a trace this large, or fails; "
            f"`haiprof export {ns.run_dir} --steps A:B` exports a stretch of it")
    return 0


def _covered(steps: dict) -> str:
    """The step slices written: 'steps 0-15 (16 steps)', 'step 7', per rank where the ranks differ."""
    def one(n, lo, hi):
        return (f"steps {lo}-{hi} ({n:,} steps)" if hi > lo else f"step {lo}") if n else "no steps"

    spans = {one(*s) for s in steps.values()}
    if len(spans) <= 1:
        return spans.pop() if spans else "no steps"
    return ", ".join(f"rank {r}: {one(*s)}" for r, s in sorted(steps.items()))
