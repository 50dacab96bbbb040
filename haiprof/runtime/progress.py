"""Live progress while `haiprof run` goes: one status line on the terminal's bottom row, redrawn in place.

    haiprof: 120 steps · 35.2 steps/s · forward 45% of step time

Shown only when stderr is a terminal (never on a pipe or a file, never on stdout), not with --quiet or
HAIPROF_PROGRESS=0, and not once the script draws its own tqdm bar on that terminal. It costs the training thread nothing it would notice: the hooks are untouched; a background
thread re-reads the tail of phases.jsonl (which the phase collector flushes twice a second anyway), counts the
step marks and attributes the new intervals with the same interval arithmetic as the report.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

from ..rundir.vocabulary import ALL_PHASES, BACKWARD_MARK, STEP_MARK
from .stderr_tail import not_the_scripts
REFRESH_S = 0.5
UNSIZED = 3   # frames in a row without a readable terminal size before the line steps aside
SAVE, RESTORE = "\x1b7", "\x1b8"   # DECSC / DECRC: cursor position and attributes


def enabled(stream, quiet: bool) -> bool:
    if quiet or os.environ.get("HAIPROF_PROGRESS", "1") == "0" or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced by something without isatty
        return False


class PhaseTail:
    """Incremental reader of phases.bin (or an older run's phases.jsonl): step count, step rate and per-phase time
    of the steps seen.

    Cheap by construction, since it shares the GIL with training: marks are counted with bytes.count, and only
    the last WINDOW_LINES new lines of each poll are parsed and attributed (a sample of the recent steps when
    training runs faster than that), in one sweep.
    """

    WINDOW_LINES = 400

    def __init__(self, path):
        self.path = path
        self._offset = 0
        self._partial = b""
        self.step_marks = 0
        self.backward_marks = 0
        self._ref = None             # (mark count, its time) at the first poll that saw a mark
        self._last = None            # (mark count, its time) at the latest poll that saw a mark
        self._edge = None            # last step boundary attributed up to
        self._pending: list = []     # intervals after that boundary, waiting for the next one
        self.totals = dict.fromkeys(ALL_PHASES, 0)
        self._chunks = None          # phases.bin: a ChunkTail

    @property
    def steps(self) -> int:
        return self.step_marks or self.backward_marks

    def steps_per_s(self) -> float | None:
        if self._ref is None or self._last is None or self._last[1] <= self._ref[1]:
            return None
        return (self._last[0] - self._ref[0]) / ((self._last[1] - self._ref[1]) / 1e9)

    def dominant(self) -> tuple[str, float] | None:
        total = sum(self.totals.values())
        if total <= 0:
            return None
        phase = max(self.totals, key=self.totals.get)
        return phase, self.totals[phase] / total

    def _poll_chunks(self) -> None:
        """phases.bin: marks are counted from the chunk headers; only the last WINDOW_LINES records decoded."""
        chunks = self._chunks.read_new()
        if not chunks:
            return
        self.step_marks += sum(c.marks(STEP_MARK) for c in chunks)
        self.backward_marks += sum(c.marks(BACKWARD_MARK) for c in chunks)
        recent, n = [], 0
        for c in reversed(chunks):
            if n >= self.WINDOW_LINES:
                self._edge, self._pending = None, []   # the carried step is not contiguous with this window
                break
            recent[:0] = c.records()
            n += c.size
        self._take(recent[-self.WINDOW_LINES:])

    def poll(self) -> None:
        if str(self.path).endswith(".bin"):
            if self._chunks is None:   # numpy, imported on the status line's own thread: torch has loaded it by
                from ..phasestore import ChunkTail   # the first step (never before the script: runtime/torch_import.py)
                self._chunks = ChunkTail(self.path)
            self._poll_chunks()
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return
        if not chunk:
            return
        self._offset += len(chunk)
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        data, self._partial = data[:cut], data[cut:]  # an unterminated last line waits for the next flush
        if not data:
            return
        self.step_marks += data.count(b'"' + STEP_MARK.encode() + b'"')
        self.backward_marks += data.count(b'"' + BACKWARD_MARK.encode() + b'"')
        lines = data.split(b"\n")
        if len(lines) > self.WINDOW_LINES:
            lines = lines[-self.WINDOW_LINES:]
            self._edge, self._pending = None, []  # the carried step is not contiguous with this window
        records = []
        for line in lines:
            try:
                records.append(json.loads(line)[:3])
            except (ValueError, TypeError):
                continue
        self._take(records)

    def _take(self, records: list) -> None:
        kind = STEP_MARK if self.step_marks else BACKWARD_MARK
        bounds, intervals = [], []
        for rec in records:
            try:
                name, s, e = rec[:3]
            except (ValueError, TypeError):
                continue
            if name == kind:
                bounds.append(s)
            elif name in self.totals:
                intervals.append((name, s, e))
        if bounds:
            count = self.steps
            self._last = (count, max(bounds))
            if self._ref is None:
                self._ref = self._last
        self._attribute(sorted(bounds), intervals)

    def _attribute(self, bounds: list, intervals: list) -> None:
        """Add the phases of every step between consecutive known boundaries: the report's partition over
        columns (timeline_owner.owned, the steps of this poll summed as one group)."""
        todo = self._pending + intervals
        windows = []
        for b in bounds:
            if self._edge is not None and b > self._edge:
                windows.append((self._edge, b))   # the first step seen is skipped: warm-up, as in the report
            self._edge = b if self._edge is None else max(self._edge, b)
        if windows:
            import numpy as np
            from haiprof.analyzers.step_columns import CODE, Intervals, owned
            known = [iv for iv in todo if iv[0] in CODE and iv[2] > iv[1]]
            ivs = Intervals(np.array([CODE[p] for p, _, _ in known], dtype=np.int8),
                            np.array([s for _, s, _ in known], dtype=np.int64),
                            np.array([e for _, _, e in known], dtype=np.int64))
            a, b = (np.array(x, dtype=np.int64) for x in zip(*windows))
            got = owned(ivs, a, b, np.zeros(len(a), dtype=np.int64), 1)[0].tolist()
            for phase, ns in zip(ALL_PHASES, got):
                self.totals[phase] += ns
        self._pending = [iv for iv in todo if self._edge is None or iv[2] > self._edge]


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
    """Keeps the status line on the terminal's bottom row, redrawn every REFRESH_S on a background thread.

    The row is taken out of the scroll region (DECSTBM, as apt's progress bar does), and every redraw saves and
    restores the cursor, so nothing the script's process tree writes can glue onto the status text, whatever
    writes it (print, os.write, a child process, a C library), and an input() prompt keeps its cursor while the
    script waits for the user. A terminal without a usable size, or one resized during the run (terminals reset
    the region then), gets no status line from then on; a size read that fails skips a frame (UNSIZED in a row:
    no line either). `stop()` erases the row and gives the region back.
    """

    MIN_ROWS = 4   # a smaller terminal keeps every row for the script

    def __init__(self, phases_path, stream=None, refresh_s: float = REFRESH_S, on_stop=None):
        self.stream = stream if stream is not None else sys.stderr
        self.on_stop = on_stop   # on_stop(available, reason): why the line stopped before the run ended
        self.tail = PhaseTail(phases_path)
        self.refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rows = 0                        # the terminal's height when the row was reserved; 0: not reserved
        self._unsized = 0                     # frames in a row whose terminal size could not be read
        self._t0 = time.monotonic()
        self._prev_excepthook = sys.excepthook
        # Redraws and stop() take turns (reentrant: stop() from the excepthook while our thread draws).
        self._lock = threading.RLock()
        self._raw_write = self.stream.write
        self._id = self._identity()   # the terminal's descriptor as it is now (see _emit)

    @classmethod
    def start_if_tty(cls, phases_path, quiet: bool = False, stream=None, on_stop=None) -> "LiveStatus | None":
        stream = stream if stream is not None else sys.stderr
        if not enabled(stream, quiet):
            return None
        live = cls(phases_path, stream, on_stop=on_stop)
        if not live._reserve():
            return None
        # Python (or a rank's launcher) prints the script's traceback through sys.excepthook: give the row back
        # first, so the traceback scrolls over the whole terminal.
        live._prev_excepthook = sys.excepthook
        sys.excepthook = live._excepthook
        os.register_at_fork(after_in_child=live._after_fork)
        live._thread = threading.Thread(target=live._loop, name="haiprof-progress", daemon=True)
        live._thread.start()
        return live

    def _size(self) -> tuple[int, int]:
        try:
            size = os.get_terminal_size(self.stream.fileno())
            return size.lines, size.columns
        except (OSError, ValueError, AttributeError):
            return 0, 0

    def _identity(self):
        try:
            st = os.fstat(self.stream.fileno())
        except (OSError, ValueError, AttributeError):
            return None
        return st.st_dev, st.st_ino

    def _emit(self, text: str) -> None:
        # A script that closes descriptors (a daemon) may reopen the number as its own log: never draw into it.
        if self._id is None or self._identity() != self._id:
            raise OSError("the terminal's descriptor is no longer the one the status line was started on")
        with not_the_scripts():   # the script's last line stays as it left it (our final line's newline)
            self._raw_write(text)   # one write: the terminal takes it whole between the script's writes
            self.stream.flush()

    def _reserve(self) -> bool:
        """Take the bottom row out of the scroll region. Called before the script runs, with the cursor at the
        start of a line: a newline makes room when the cursor sits on the bottom row, the cursor goes back up."""
        rows, cols = self._size()
        if rows < self.MIN_ROWS or cols < 20:
            return False
        try:
            self._emit(f"\n{SAVE}\x1b[1;{rows - 1}r{RESTORE}\x1b[1A")
        except (OSError, ValueError):
            return False
        self._rows = rows
        return True

    def _release(self) -> None:
        """Erase the status row and give the whole terminal back to the scroll region (cursor kept)."""
        if not self._rows:
            return
        rows, self._rows = self._rows, 0
        now = self._size()[0]
        erase = f"\x1b[{rows};1H\x1b[2K" if rows <= now else ""
        try:
            self._emit(f"{SAVE}{erase}\x1b[r{RESTORE}")
        except (OSError, ValueError):
            pass  # the terminal is gone: nothing left to give back

    def _draw(self, line: str) -> None:
        self._emit(f"{SAVE}\x1b[{self._rows};1H\x1b[2K{line}{RESTORE}")

    def _after_fork(self) -> None:
        # A forked child (DataLoader worker) may inherit the lock held by our thread, and never draws.
        self._lock = threading.RLock()
        self._rows = 0

    def _excepthook(self, *exc_info):
        self.stop()
        self._prev_excepthook(*exc_info)

    def _loop(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                self.tail.poll()
                with self._lock:
                    if not self._rows:
                        return
                    rows, cols = self._size()
                    # A size that could not be read is no resize (a loaded machine's stressed suite saw one
                    # "24 -> 0 rows" read): this frame is skipped; only UNSIZED in a row step aside.
                    self._unsized = self._unsized + 1 if rows == 0 else 0
                    if 0 < self._unsized < UNSIZED:
                        continue
                    # A resized terminal has reset its region; the script's own tqdm bar wants the terminal:
                    # either way, step aside for the rest of the run.
                    if rows != self._rows or tqdm_bar_active():
                        why = ("stepped aside: the terminal's size could not be read" if rows == 0 else
                               f"stepped aside: the terminal was resized ({self._rows} -> {rows} rows)"
                               if rows != self._rows else "stepped aside for the script's tqdm bar")
                        self._release()
                        self._stopped(True, why)
                        return
                    self._draw(status_line(self.tail, time.monotonic() - self._t0)[:max(20, cols - 1)])
            except (OSError, ValueError) as e:
                # terminal gone or stream closed: stop drawing, never disturb training
                self._stopped(False, f"stopped: {type(e).__name__}: {e}"[:300])
                return

    def _stopped(self, available: bool, reason: str) -> None:
        """Say why the line stopped before the run ended (the run's status: the report's collectors table)."""
        if self.on_stop is not None and not self._stop.is_set():
            try:
                self.on_stop(available, reason)
            except Exception:
                pass

    def stop(self) -> None:
        """Stop drawing, erase the row and give it back; idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        if sys.excepthook is self._excepthook:
            sys.excepthook = self._prev_excepthook
        with self._lock:
            self._release()
