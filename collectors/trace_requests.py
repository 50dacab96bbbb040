"""Op-level tracing windows on demand: at given steps (`--trace-at`), every few minutes (`--trace-every`), or when
`haiprof trace RUN_DIR` asks a running job.

Each window is its own TraceWindow (collectors/trace_window.py: the profiler's warm-up step, the recorded steps,
the CUPTI teardown on CUDA runs, its own trace file `trace-step<N>.json.gz`), opened at the first step boundary
at or after the step asked for, and never while another window is open. Steps inside any window are marked and
kept out of the step statistics, as for the first window.

This class is the one driver of every window, the first (default) one included: two torch.profiler sessions on one
thread crash the process (a segfault in export_chrome_trace), so a window asked for while another is open waits,
and the default window, once due, waits for a requested one to end. Windows are driven from the thread that opened
them; a second training thread's steps never start or step a window (the step counts stay the first thread's).

`haiprof trace` talks to the run through a file, not a signal (the script may own every signal): it writes
`control/trace-request.json` into the run directory; the run looks for it on its flush thread (twice a second,
off the training thread), takes it (renames it `.taken`) and queues the window.

The flight recorder (--trace-on-anomaly): an AnomalyDetector (collectors/anomaly.py) reads each step's time here
and asks for a window where the next slow moment is due. Those windows record Python functions too (with_stack:
what the script did in a stall outside torch ops), and are bounded by a budget: at most `anomaly_windows` windows
and `anomaly_mb` MB of trace a run; each is marked ANOMALY_MARK with the step it was placed on. The last window of a
budget of two or more is kept for a learned period (a stall that comes back: the one the report can explain and a
fix can remove) until one is traced: on a busy machine, slow stretches come first and would otherwise take every
window before the period is learned.
"""
from __future__ import annotations

import bisect
import json
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable

from haiprof.rundir.vocabulary import ANOMALY_MARK, WINDOW_MARK, window_trace  # WINDOW_MARK: which file a window wrote

from . import script_profile
from .anomaly import AnomalyDetector, Ask
from .trace_window import TraceWindow

CONTROL_DIR = "control"
REQUEST = "trace-request.json"
DEFAULT_STEPS = 3
MAX_WINDOWS = 1000              # a run of weeks with --trace-every 1 stays bounded on disk
MAX_PENDING = 16                # requests queued at once; more are refused with a status line (bounded memory)
MAX_REQUEST_STEPS = 1000        # a window longer than this is a mistake, not a request
ANOMALY_STEPS = 3               # recorded steps of a flight-recorder window: the due step in the middle
ANOMALY_WHY = "--trace-on-anomaly"
LATE_STEPS = 1                  # a flight-recorder window that cannot open by then misses the step it was placed on


def window_name(step: int) -> str:
    return window_trace(step).removesuffix(".json.gz")


def parse_request(text: str) -> tuple[int, int | None]:
    """(steps, at_step or None) from a request file's text; ValueError naming what is wrong."""
    req = json.loads(text)
    if not isinstance(req, dict):
        raise ValueError(f"expected a JSON object, got {type(req).__name__}")
    steps, at = req.get("steps", DEFAULT_STEPS), req.get("at_step")
    if steps is None:
        steps = DEFAULT_STEPS
    for key, value in (("steps", steps), ("at_step", at)):
        if value is None:
            continue
        # bool is an int; 1e999 arrives as a float inf; "3" is not a number
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
                or abs(value) == float("inf") or value != int(value):
            raise ValueError(f"{key} must be a whole number, got {value!r}")
    steps = int(steps)
    if not 1 <= steps <= MAX_REQUEST_STEPS:
        raise ValueError(f"steps must be 1..{MAX_REQUEST_STEPS}, got {steps}")
    if at is not None and int(at) < 0:
        raise ValueError(f"at_step must be 0 or more, got {at}")
    return steps, None if at is None else int(at)


class TraceRequests:
    """Opens the windows asked for; `on_step(n)` after each optimizer step (after the first window's own),
    `poll()` from any thread, `close()` once the script has ended."""

    def __init__(self, out_dir, append: Callable, record_status: Callable, first: TraceWindow,
                 at_steps=(), every_s: float | None = None, steps: int = DEFAULT_STEPS, clock=time.monotonic,
                 anomaly: AnomalyDetector | None = None, anomaly_windows: int = 2, anomaly_mb: float = 64.0,
                 step_clock=time.monotonic_ns, share=None):
        self.out_dir = Path(out_dir)
        self._append, self._status, self._first = append, record_status, first
        # (at step, steps, why, Ask of the flight recorder or None)
        self._pending: deque = deque((int(s), steps, f"--trace-at {s}", None) for s in sorted(set(at_steps)))
        self._every, self._steps, self._clock = every_s, steps, clock
        self._next_due = clock() + every_s if every_s else None
        self._lock = threading.Lock()
        self._driving = threading.Lock()   # one thread in on_step at a time; others never wait for it
        self._owner: int | None = None     # the thread that opened the open window
        self._active: TraceWindow | None = None
        self.windows: list[TraceWindow] = []
        self._last_step = 0
        self._anomaly, self._anomaly_left, self._anomaly_bytes = anomaly, int(anomaly_windows), anomaly_mb * 1e6
        self._reserve = 1 if anomaly_windows >= 2 else 0   # windows kept for a learned period until one is asked for
        self.stretches_untraced = 0        # slow stretches not traced: the budget's last window waits for a period
        self.anomaly_windows: list[TraceWindow] = []
        self._step_clock = step_clock
        self._share = share                # a distributed job: asks shared with every rank (collectors/job_share.py)
        if share is not None and anomaly is not None:   # a window placed by time: asked for early enough to share
            anomaly.lead_ns = int(share.lead_s * 1e9)
        self._asked_at: set = set()        # where flight-recorder windows are asked for (one a step, across ranks)
        self._last_ns: int | None = None   # the previous step's end (the flight recorder's step time)
        self._touched = True               # the step now ending ran (partly) inside a window: not an ordinary step
        self._checking = None              # (Ask, steps completed when its window opened, its slowest step ns)

    # -- asking ---------------------------------------------------------------------------------------------------
    def request(self, steps: int = DEFAULT_STEPS, at_step: int | None = None, why: str = "haiprof trace",
                ask: Ask | None = None) -> None:
        """Queue a window of `steps` steps at the first boundary at or after `at_step` (None: the next one)."""
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                self._status("trace-request", False, f"{why}: not queued, {MAX_PENDING} windows already waiting")
                return
            # in step order (a request for "now" first, equal steps in the order asked): a window asked for
            # earlier steps than one already waiting must not queue behind it
            bisect.insort(self._pending, (at_step, max(1, int(steps)), why, ask),
                          key=lambda r: -1 if r[0] is None else r[0])

    def poll(self) -> None:
        """Take a request `haiprof trace` left in control/, exchange the flight recorder's asks with the job's
        other ranks (on the flush thread; never raises)."""
        if self._share is not None:
            try:
                self._share.exchange(self._remote)
            except Exception as e:   # the store gone (the job ending): no more sharing, never a dead thread
                self._share = None
                self._status("anomaly-share", False, f"flight recorder windows no longer shared: "
                             f"{type(e).__name__}: {e}"[:300])
        path = self.out_dir / CONTROL_DIR / REQUEST
        try:
            if not path.is_file():
                return
            taken = path.with_suffix(".taken")
            os.replace(path, taken)
            steps, at = parse_request(taken.read_text())
            self.request(steps, at, "haiprof trace")
        except Exception as e:   # on the flush thread: a bad file is a status line, never a dead thread
            self._status("trace-request", False, f"unreadable trace request: {type(e).__name__}: {e}"[:300])

    # -- driven by the phase recorder -----------------------------------------------------------------------------
    def on_step(self, completed: int) -> None:
        if sys.getprofile() is None:   # the common case: this test is all it costs a step
            self._on_step(completed)
        else:   # a profile function the script set on this thread sees the script's calls, not haiprof's
            script_profile.hidden(self._on_step, completed)

    def _on_step(self, completed: int) -> None:
        self._last_step = completed
        if not self._driving.acquire(blocking=False):   # another training thread is stepping the windows
            return
        try:
            self._drive(completed)
        except Exception as e:   # a window that fails is a reason, never the training's problem
            self._status("trace-request", False, f"tracing window failed: {type(e).__name__}: {e}"[:500])
        finally:
            self._driving.release()

    def _drive(self, completed: int) -> None:
        me = threading.get_ident()
        first = self._first
        first.saw_step(completed)
        if self._anomaly is not None:
            self._watch(completed, self._active is not None or first.active)
        if (self._active is not None or first.active) and me != self._owner:
            return   # a window is driven by the thread that opened it
        if self._next_due is not None and self._clock() >= self._next_due:
            self._next_due = self._clock() + self._every
            with self._lock:
                waiting = any(why == "--trace-every" for _, _, why, _ in self._pending)
            if not waiting:   # a periodic window still queued is not asked for twice
                self.request(self._steps, None, "--trace-every")
        if self._active is not None:
            self._active.on_step(completed)
            if self._active.finished:
                self._active = None
            return
        if not first.finished and (first.active or completed >= first.warmup_steps):
            self._owner = me
            first.on_step(completed)   # the default window, once due, goes before any request
            return
        with self._lock:
            if not self._pending:
                return
            at, steps, why, ask = self._pending[0]
            if at is not None and completed < at:
                return
            self._pending.popleft()
        if ask is not None and completed > at + LATE_STEPS:   # another window held it past the steps it was for
            self._status(window_name(at), False, f"{why}: not traced, another window was open at step {at}")
            return
        self._owner = me
        self._open(completed, steps, why, ask)

    def _watch(self, completed: int, in_window: bool) -> None:
        """The flight recorder: this step's time to the detector (unless a window touched it: the step a window
        ran in, and the one after, which pays its export), and a window queued where it asks."""
        now = self._step_clock()
        last, self._last_ns = self._last_ns, now
        touched, self._touched = self._touched or in_window, in_window
        if self._checking is not None and last is not None:
            self._check_window(completed - 1, now - last)
        if touched and last is not None:
            self._anomaly.hidden(completed - 1)
        if last is None or touched or self._anomaly_left <= 0:
            return
        ask = self._anomaly.observe(completed - 1, now - last, now)
        if ask is None:
            return
        if self._share is not None and (ask.period or ask.period_s):   # every rank traces it: placed where they
            # all hear of it first
            ask = self._share.lead(ask, completed, self._anomaly.median_ns, self._anomaly.stall_ns)
            self._share.publish(ask)
        self._ask(ask, ANOMALY_WHY)

    def _check_window(self, step: int, duration_ns: int) -> None:
        """A periodic window's recorded steps (the three after its warm-up step): none of them slow, even with
        the profiler's own cost in them, and the stall it was placed for did not come: the detector is told."""
        ask, opened, slowest = self._checking
        if step <= opened:
            return
        if step <= opened + ANOMALY_STEPS:
            self._checking = (ask, opened, max(slowest, duration_ns))
            return
        self._checking = None
        if not self._anomaly.is_slow(slowest):
            self._anomaly.missed(ask)

    def _ask(self, ask: Ask, why: str) -> None:
        periodic = bool(ask.period or ask.period_s)
        with self._lock:
            if self._anomaly_left <= 0 or ask.open_at in self._asked_at:
                return
            if not periodic and self._anomaly_left <= self._reserve:
                self.stretches_untraced += 1
                return
            self._anomaly_left -= 1
            if periodic:
                self._reserve = 0
            self._asked_at.add(ask.open_at)
        self.request(ANOMALY_STEPS, ask.open_at, why, ask)

    def _remote(self, ask: Ask, rank: int) -> None:
        """Another rank's ask (flush thread): the same steps traced here, unless they are already past."""
        if ask.open_at <= self._last_step:
            self._status(window_name(ask.open_at), False, f"{ANOMALY_WHY} (rank {rank}'s stall): heard of after "
                         f"step {self._last_step}, too late for its window")
            return
        self._ask(ask, f"{ANOMALY_WHY} (rank {rank}'s stall)")

    def _open(self, completed: int, steps: int, why: str, ask: Ask | None = None) -> None:
        if self._first.reason and "own torch.profiler" in self._first.reason:
            self._status(window_name(completed), False, f"{why}: skipped, the script runs its own torch.profiler")
            return
        if len(self.windows) >= MAX_WINDOWS:
            self._status(window_name(completed), False, f"{why}: skipped, {MAX_WINDOWS} windows already traced")
            return
        if ask is not None and self._anomaly_used() >= self._anomaly_bytes:
            self._status(window_name(completed), False, f"{why}: skipped, the flight recorder's "
                         f"{self._anomaly_bytes / 1e6:.0f} MB of traces are used")
            return
        win = TraceWindow(self.out_dir, self._append, self._status, warmup_steps=completed, active_steps=steps,
                          name=window_name(completed), watch=False, python_stacks=ask is not None)
        t = time.monotonic_ns()
        if ask is not None:
            if ask.period or ask.period_s:
                self._checking = (ask, completed, 0)
            self._append((ANOMALY_MARK, t, t, completed, steps, -1 if ask.due is None else ask.due,
                          ask.period or 0, ask.seen, round((ask.period_s or 0) * 1e3, 3)))
            self.anomaly_windows.append(win)
        self._append((WINDOW_MARK, t, t, completed, steps))
        win.on_step(completed)     # starts now: its warm-up is this step count
        self.windows.append(win)
        self._active = win if not win.finished else None

    def _anomaly_used(self) -> int:
        """Bytes of trace the flight recorder's windows wrote so far (raw until the run ends: an upper bound)."""
        used = 0
        for win in self.anomaly_windows:
            for name in (win.raw_name, win.trace_name):
                try:
                    used += (self.out_dir / name).stat().st_size
                except OSError:
                    pass
        return used

    def close(self) -> None:
        for win in self.windows:
            win.close()
        if self._anomaly is not None and self._anomaly.anomalies:
            traced = len(self.anomaly_windows)
            kept = (f"; {self.stretches_untraced} slow stretch(es) not traced, the last window kept for a stall "
                    f"that comes back" if self.stretches_untraced else "")
            self._status("anomaly", True, f"flight recorder: {self._anomaly.anomalies} slow step(s) over "
                         f"{self._anomaly.factor:g}x the rolling median; {traced} window(s) traced{kept}")
        with self._lock:
            left = list(self._pending)
        for at, steps, why, ask in left:
            if ask is not None:   # the flight recorder's guess of what comes next: no window is owed
                continue
            self._status(window_name(at if at is not None else self._last_step), False,
                         f"{why}: the run ended after {self._last_step} step(s), before the window")
