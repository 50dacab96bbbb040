"""Live progress while `haiprof run` goes: one status line on stderr, redrawn in place.

    haiprof: 120 steps · 35.2 steps/s · forward 45% of step time

Shown only when stderr is a terminal (never on a pipe or a file, never on stdout), not with --quiet or
HAIPROF_PROGRESS=0, and not while the script draws its own tqdm bar on that terminal. It costs the training thread nothing it would notice: the hooks are untouched; a background
thread re-reads the tail of phases.jsonl (which the phase collector flushes twice a second anyway), counts the
step marks and attributes the new intervals with the same interval arithmetic as the report.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

from haiprof.analyzers.steps import ALL_PHASES, attribute

STEP_MARK, BACKWARD_MARK = "@step", "@backward"
REFRESH_S = 0.5
CLEAR = "\r\x1b[K"


def enabled(stream, quiet: bool) -> bool:
    if quiet or os.environ.get("HAIPROF_PROGRESS", "1") == "0" or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced by something without isatty
        return False


class PhaseTail:
    """Incremental reader of phases.jsonl: step counts, step rate and per-phase time of the steps so far."""

    def __init__(self, path):
        self.path = path
        self._offset = 0
        self._partial = b""
        self.step_marks = 0
        self.backward_marks = 0
        self._first_mark_ns = self._last_mark_ns = None
        self._edge = None            # end of the span already attributed
        self._pending: list = []     # intervals not yet wholly attributed
        self._earliest = None        # first interval's start: where the first step begins
        self.totals = dict.fromkeys(ALL_PHASES, 0)

    @property
    def steps(self) -> int:
        return self.step_marks or self.backward_marks

    def steps_per_s(self) -> float | None:
        if self.steps < 2 or self._last_mark_ns == self._first_mark_ns:
            return None
        return (self.steps - 1) / ((self._last_mark_ns - self._first_mark_ns) / 1e9)

    def dominant(self) -> tuple[str, float] | None:
        total = sum(self.totals.values())
        if total <= 0:
            return None
        phase = max(self.totals, key=self.totals.get)
        return phase, self.totals[phase] / total

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return
        if not chunk:
            return
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # an unterminated last line waits for the next flush
        marks = []
        for line in lines:
            try:
                name, s, e = json.loads(line)[:3]
            except (ValueError, TypeError):
                continue
            if name == STEP_MARK or name == BACKWARD_MARK:
                marks.append((name, s))
            elif name in self.totals:
                self._pending.append((name, s, e))
                self._earliest = s if self._earliest is None else min(self._earliest, s)
        self._count(marks)

    def _count(self, marks: list) -> None:
        for name, t in marks:
            if name == STEP_MARK:
                self.step_marks += 1
            else:
                self.backward_marks += 1
        kind = STEP_MARK if self.step_marks else BACKWARD_MARK
        bounds = sorted(t for name, t in marks if name == kind)
        if bounds:
            if self._first_mark_ns is None:
                self._first_mark_ns = bounds[0]
            self._last_mark_ns = bounds[-1]
        for b in bounds:
            if self._edge is not None:
                a = self._edge
            else:
                a = b if self._earliest is None else min(b, self._earliest)
            if b <= a:
                continue
            if self._edge is not None:  # the first step is warm-up: the report excludes it too
                for phase, ns in attribute(self._pending, a, b).items():
                    self.totals[phase] += ns
            self._edge = b
            self._pending = [iv for iv in self._pending if iv[2] > b]


def tqdm_bar_active() -> bool:
    """True while the script shows a tqdm progress bar (HF Trainer, Lightning's default bar, most scripts)."""
    std = sys.modules.get("tqdm.std")  # only if the script imported tqdm: never import it ourselves
    instances = getattr(getattr(std, "tqdm", None), "_instances", None)
    if not instances:
        return False
    try:
        return any(not getattr(bar, "disable", False) for bar in list(instances))
    except RuntimeError:  # the set changed while we copied it: a bar is being created or closed
        return True


def status_line(tail: PhaseTail, elapsed_s: float) -> str:
    if tail.steps == 0:
        return f"haiprof: running {elapsed_s:.0f} s · waiting for the first training step"
    parts = [f"haiprof: {tail.steps} steps"]
    rate = tail.steps_per_s()
    if rate is not None:
        parts.append(f"{rate:.1f} steps/s" if rate >= 1 else f"{1 / rate:.2f} s/step")
    dom = tail.dominant()
    if dom is not None:
        parts.append(f"{dom[0]} {100 * dom[1]:.0f}% of step time")
    return " · ".join(parts)


class LiveStatus:
    """Redraws the status line every REFRESH_S on a background thread; `stop()` erases it."""

    def __init__(self, phases_path, stream=None, refresh_s: float = REFRESH_S):
        self.stream = stream if stream is not None else sys.stderr
        self.tail = PhaseTail(phases_path)
        self.refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._t0 = time.monotonic()
        self._prev_excepthook = sys.excepthook

    @classmethod
    def start_if_tty(cls, phases_path, quiet: bool = False, stream=None) -> "LiveStatus | None":
        stream = stream if stream is not None else sys.stderr
        if not enabled(stream, quiet):
            return None
        live = cls(phases_path, stream)
        # The launcher prints the script's traceback through sys.excepthook: erase the line first, so the
        # traceback starts on a clean line.
        live._prev_excepthook = sys.excepthook
        sys.excepthook = live._excepthook
        live._thread = threading.Thread(target=live._loop, name="haiprof-progress", daemon=True)
        live._thread.start()
        return live

    def _excepthook(self, *exc_info):
        self.stop()
        self._prev_excepthook(*exc_info)

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        # One column short of the width so the line never wraps; a terminal that reports no size gets 80.
        return max(20, columns - 1) if columns else 79

    def _loop(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                self.tail.poll()
                if tqdm_bar_active():  # the script draws its own bar on this terminal: do not fight over it
                    if self._drawn:
                        self.stream.write(CLEAR)
                        self.stream.flush()
                        self._drawn = False
                    continue
                line = status_line(self.tail, time.monotonic() - self._t0)[:self._width()]
                self.stream.write(CLEAR + line)
                self.stream.flush()
                self._drawn = True
            except (OSError, ValueError):
                return  # terminal gone or stream closed: stop drawing, never disturb training

    def stop(self) -> None:
        """Stop drawing and erase the line; idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        if sys.excepthook is self._excepthook:
            sys.excepthook = self._prev_excepthook
        if self._drawn:
            self._drawn = False
            try:
                self.stream.write(CLEAR)
                self.stream.flush()
            except (OSError, ValueError):
                pass  # the terminal is gone: nothing left to erase
