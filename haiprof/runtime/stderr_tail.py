"""Whether the script's last write to our stream ended its line, in the script's own python.

haiprof's lines share the script's stderr (and its stdout, on a terminal or with `2>&1`). After the script's
`progress 100%` (no newline) our verdict must start a line of its own, and on a pipe or a terminal nothing can be
read back to tell. So the bytes python writes there are watched where they leave python: the `write` of the raw
file under `sys.__stderr__` (and `sys.__stdout__` where it is the same pipe or terminal), which the text and
buffer layers call for every write of the script's, of print, logging and tqdm and of python's own tracebacks.
One look at the last byte written; the bytes, their order and their timing are python's. Not seen: writes past
python's streams (`os.write(2, ...)`, a C library's fprintf); after those our line follows as it is there.
"""
from __future__ import annotations

import io
import sys
import threading
from contextlib import contextmanager

from ..errors import LINE_OPEN, fd_identity

_LINE_ENDS = (b"\n", b"\r")   # after a carriage return the next line starts at the left margin too
_OURS = threading.local()     # set while haiprof writes through the same stream (the live status line)
_LAST_FD = [2]                # the descriptor of the last write watched


@contextmanager
def not_the_scripts():
    """Writes inside are haiprof's own (the status line's redraws, which put the cursor back where the script left
    it): they do not change what the script's last write left. What python held of the script's is written first."""
    try:
        sys.__stderr__.flush()
    except (OSError, ValueError, AttributeError):
        pass
    _OURS.on = True
    try:
        yield
    finally:
        _OURS.on = False


def _raw_file(stream, fd: int):
    """The FileIO python writes `stream` through (its buffer's, or the buffer itself under `python -u`); None where
    it is not the plain file python made for `fd`, or something has replaced its write already."""
    raw = getattr(stream, "buffer", None)
    raw = raw if type(raw) is io.FileIO else getattr(raw, "raw", None)
    try:
        if type(raw) is not io.FileIO or "write" in vars(raw) or raw.fileno() != fd:
            return None
    except (OSError, ValueError):
        return None
    return raw


def _watch(raw, fd: int) -> None:
    write, line_open, last_fd = raw.write, LINE_OPEN, _LAST_FD

    def tracked_write(b):
        n = write(b)
        if n and not getattr(_OURS, "on", False):   # None (would block) or 0 wrote nothing
            try:
                line_open[0] = bytes(memoryview(b)[n - 1:n]) not in _LINE_ENDS
                last_fd[0] = fd
            except (TypeError, ValueError):
                pass
        return n

    raw.write = tracked_write   # an instance attribute: the buffer's call of raw.write finds it first


class StderrTail:
    def __init__(self):
        self.ident = None   # what fd 2 was when watched: a script that points fd 2 elsewhere has left our stream
        self.streams = []   # the python streams watched

    def install(self) -> bool:
        """Watch python's own stderr, and its stdout where both go to one place; False (nothing changed) where
        stderr is not the plain file python made."""
        raw = _raw_file(sys.__stderr__, 2)
        if raw is None:
            return False
        self.ident = fd_identity(2)
        _watch(raw, 2)
        self.streams.append(sys.__stderr__)
        out = _raw_file(sys.__stdout__, 1)
        if out is not None and fd_identity(1) == self.ident:
            _watch(out, 1)
            self.streams.append(sys.__stdout__)
        return True

    def line_open(self) -> bool:
        """Whether the script left our stream mid-line now: what python buffered is written first (python would
        write it at its exit, before our line anyway), and the descriptor of its last write must still be the
        stream we share (not a file the script pointed it to with dup2)."""
        if self.ident is None:
            return False
        for stream in reversed(self.streams):   # stdout first, as python's exit flushes them
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        return LINE_OPEN[0] and fd_identity(_LAST_FD[0]) == self.ident
