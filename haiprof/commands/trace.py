"""`haiprof trace RUN_DIR [--steps N] [--at STEP]`: ask a running `haiprof run` (every rank of a distributed job)
for an op-level tracing window at its next step boundary, or at a given step.

The request is a file, `control/trace-request.json`, written atomically into each running rank's directory; the
run takes it on its flush thread (collectors/trace_requests.py). For a job, every rank gets the same step, a few
steps past the furthest rank (its step rate times the time the ranks take to see the request), so the windows
line up across ranks.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from haiprof.collectors.trace_requests import CONTROL_DIR, REQUEST

from ..errors import OneLineParser, UserError
from ..phasestore import ChunkTail
from ..rundir import PHASES_BIN, RunDir
from ..rundir.vocabulary import window_trace

LEAD_S = 2.0          # ranks see a request within a flush (0.5 s); the common step is this far ahead
WAIT_S = 10.0


def _running(run: RunDir) -> tuple[bool, str]:
    try:
        return run.in_progress()
    except Exception as e:   # an unreadable meta.json
        return False, str(e)


def _targets(path: Path) -> list[RunDir]:
    ranks = sorted((p for p in path.glob("rank-*") if (p / "meta.json").is_file()),
                   key=lambda p: int(p.name.split("-")[1]) if p.name.split("-")[1].isdigit() else 0)
    return [RunDir(p) for p in ranks] if ranks else [RunDir.open(path)]


def _steps_so_far(run: RunDir) -> int:
    tail = ChunkTail(run.file(PHASES_BIN))
    return sum(c.marks("@step") for c in tail.read_new())


def _common_step(runs: list[RunDir]) -> int:
    """A step every rank has not reached yet: the furthest rank's, plus what it trains in LEAD_S (at least 3)."""
    first = [_steps_so_far(r) for r in runs]
    time.sleep(1.0)
    second = [_steps_so_far(r) for r in runs]
    rate = max(b - a for a, b in zip(first, second))
    return max(second) + max(3, int(rate * LEAD_S))


def cmd_trace(argv: list[str]) -> int:
    p = OneLineParser(prog="haiprof trace", description="Ask a running haiprof run (every rank of a "
                                "job) to trace N steps op by op at its next step boundary or at --at STEP.")
    p.add_argument("run_dir")
    p.add_argument("--steps", type=int, default=3, metavar="N", help="steps to trace (default 3)")
    p.add_argument("--at", type=int, metavar="STEP", help="open the window after this step (default: the next "
                   "boundary; for a job, a step just ahead of every rank)")
    p.add_argument("--wait", type=float, default=WAIT_S, metavar="S", help="seconds to wait for the run to take "
                   "the request (default 10)")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if ns.steps < 1 or (ns.at is not None and ns.at < 1):
        raise UserError("--steps and --at must be at least 1")
    runs = _targets(Path(ns.run_dir))
    live = []
    for run in runs:
        ok, why = _running(run)
        if ok:
            live.append(run)
        elif len(runs) == 1:
            raise UserError(f"{run.path}: not running ({why}): a window can only be asked of a running run; "
                            "--trace-at STEP asks for one when the run starts")
    if not live:
        raise UserError(f"{ns.run_dir}: no rank of this job is running")
    at = ns.at if ns.at is not None else (_common_step(live) if len(live) > 1 else None)
    body = json.dumps({"steps": ns.steps, "at_step": at, "asked_at": time.time()})
    for run in live:
        control = run.file(CONTROL_DIR)
        control.mkdir(exist_ok=True)
        tmp = control / f".{REQUEST}.tmp"
        tmp.write_text(body)
        os.replace(tmp, control / REQUEST)
    deadline = time.monotonic() + ns.wait
    pending = list(live)
    while pending and time.monotonic() < deadline:
        pending = [r for r in pending if r.file(CONTROL_DIR).joinpath(REQUEST).exists()]
        if pending:
            time.sleep(0.1)
    where = f"after step {at}" if at is not None else "at the next step boundary"
    for run in live:
        name = window_trace(at) if at is not None else "trace-step<N>.json.gz"
        state = "not taken yet (the run looks twice a second while it trains; it stays asked)" \
            if run in pending else "taken"
        print(f"haiprof: {run.path}: a window of {ns.steps} step(s) {where}: {state}; it writes {name}")
    return 0
