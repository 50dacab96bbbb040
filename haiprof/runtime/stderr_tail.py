"""Whether the script's last write to stderr ended its line, in the script's own python.

haiprof's lines share the script's stderr. After the script's `progress 100%` (no newline) our verdict must start
a line of its own, and on a pipe or a terminal nothing can be read back to tell. So the bytes python writes to
fd 2 are watched where they leave python: the `write` of the raw file under `sys.__stderr__`, which its text and
buffer layers (the text layer alone under `python -u`) call for every write of the script's, of `print(file=sys.stderr)`, logging and tqdm and of
python's own tracebacks. One look at the last byte written; the bytes, their order and their timing are python's.
Not seen: writes that bypass python's stream (`os.write(2, ...)`, a C library's fprintf); those keep the old
behaviour (our line follows as it is there).
"""
from __future__ import annotations

import io
import sys

from ..errors import LINE_OPEN, fd_identity

_LINE_ENDS = (b"\n", b"\r")   # after a carriage return the next line starts at the left margin too


class StderrTail:
    def __init__(self):
        self.ident = None   # what fd 2 was when watched: a script that points fd 2 elsewhere has left our stream

    def install(self) -> bool:
        """Watch python's own stderr; False (nothing changed) where it is not the plain file python made."""
        raw = getattr(sys.__stderr__, "buffer", None)   # the file itself where python runs unbuffered (-u)
        raw = raw if type(raw) is io.FileIO else getattr(raw, "raw", None)
        if type(raw) is not io.FileIO or "write" in vars(raw):
            return False
        try:
            if raw.fileno() != 2:
                return False
        except (OSError, ValueError):
            return False
        self.ident = fd_identity(2)
        write, line_open = raw.write, LINE_OPEN

        def tracked_write(b):
            n = write(b)
            if n:   # None (would block) or 0 wrote nothing
                try:
                    line_open[0] = bytes(memoryview(b)[n - 1:n]) not in _LINE_ENDS
                except (TypeError, ValueError):
                    pass
            return n

        raw.write = tracked_write   # an instance attribute: the buffer's call of raw.write finds it first
        return True

    def line_open(self) -> bool:
        """Whether the script's stderr is left mid-line now: what python buffered is written first (python would
        write it at its exit, before our line anyway), and fd 2 must still be the stream we share."""
        if self.ident is None:
            return False
        try:
            sys.__stderr__.flush()
        except (OSError, ValueError, AttributeError):
            pass
        return LINE_OPEN[0] and fd_identity(2) == self.ident
