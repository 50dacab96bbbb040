"""Errors every layer may raise. Here, at the bottom, so that nothing below the command line imports it."""

USAGE_ERROR = 2   # exit code for bad input


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code USAGE_ERROR."""


import os as _os   # noqa: E402
import sys as _sys   # noqa: E402

# -- haiprof's own descriptors in the script's process --------------------------------------------------------
# The script may close descriptors it did not open (a daemon's os.closerange(3, ...)) and get the numbers back for
# files of its own: each of ours is checked (fd_identity) before use, and kept at a high number (fd_kept_high), so
# that the script's files get the low numbers python would give them and ours, once closed, stay closed numbers.

def fd_identity(fd: int):
    """(st_dev, st_ino) of what `fd` refers to now; None if it is closed."""
    try:
        st = _os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_HIGH_BASE: list = []


_NOTHING = object()


def fd_kept_high(fd: int, expect=_NOTHING) -> int:
    """`fd` moved to a number far above the lowest free one (close-on-exec); `fd` itself if it cannot be. The low
    number is closed only if it still refers to what was moved, and that is `expect` ((st_dev, st_ino) of the file
    the caller opened) where given: a script closing descriptors on another thread may have taken the number for a
    file of its own before the move, and then the copy is of the script's file too (the caller's check of the
    returned number finds that; the low number is left to the script)."""
    try:
        if not _HIGH_BASE:
            import resource
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            _HIGH_BASE.append(1024 if soft < 0 else max(3, min(1024, soft // 2)))   # < 0: unlimited
        import fcntl
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_BASE[0])
    except (OSError, ValueError, ImportError):
        return fd
    moved = fd_identity(high)
    if fd_identity(fd) == moved and (expect is _NOTHING or moved == expect):
        _os.close(fd)
    return high


# -- haiprof's own messages ----------------------------------------------------------------------------------------
# None: not kept (use sys.stderr); False: fd 2 was closed at start; else [fd, (st_dev, st_ino)] of the copy
_OWN_STDERR: list = [None]
_STDERR_RETAKEN = [0]   # times the script closed our copy (os.closerange) and it was taken again from fd 2


def keep_stderr() -> None:
    """Keep a copy of file descriptor 2 as it is now, before the script runs: every haiprof message goes there,
    never into a target the script later sets sys.stderr to (its log file), nor to stdout when it sets
    sys.stderr = None, and it survives the script closing sys.stderr. The copy is not inherited by children.
    It is a bare number, checked before each write (own_stderr()): a script that closes descriptors it did not
    open (os.closerange) may get that number back for its own file, which must never receive our lines."""
    try:
        fd = fd_kept_high(_os.dup(2))
    except OSError:
        _OWN_STDERR[0] = False   # no stderr at start: stay silent, as python's own writes would be lost too
        return
    _OWN_STDERR[0] = [fd, fd_identity(fd)]


def own_stderr() -> int | None:
    """The verified copy's number; None when not kept. A copy the script took is abandoned (not closed: the
    number is the script's now) and taken again from fd 2 if fd 2 is still what it was; else -1 (silence)."""
    kept = _OWN_STDERR[0]
    if not kept:
        return None if kept is None else -1
    fd, ident = kept
    if fd >= 0 and fd_identity(fd) != ident:
        _STDERR_RETAKEN[0] += 1
        fd = -1
        if fd_identity(2) == ident:   # the script left fd 2 alone (closerange(3, ...)): copy it again
            try:
                fd = fd_kept_high(_os.dup(2), expect=ident)
            except OSError:
                fd = -1
        kept[0] = fd
    return fd


def stderr_retaken() -> int:
    """How often the script closed haiprof's copy of stderr (see own_stderr)."""
    own_stderr()   # noticed now, not only at the next message
    return _STDERR_RETAKEN[0]


def say(line: str) -> None:
    """One line of haiprof's on the process's own stderr (see keep_stderr); never raises."""
    try:
        fd = own_stderr()
        if fd is None:
            _sys.stderr.write(line + "\n")
            _sys.stderr.flush()
            return
        if fd < 0:
            return
        flush = getattr(_sys.stderr, "flush", None)   # what the script wrote to the same terminal or pipe first
        if flush is not None:                         # stays first
            try:
                flush()
            except (OSError, ValueError):
                pass
        at_start = _at_line_start(fd)
        head = "\n" if at_start is False or (at_start is None and LINE_OPEN[0]) else ""
        data = memoryview((head + line + "\n").encode("utf-8", "backslashreplace"))
        while data:
            data = data[_os.write(fd, data):]
        LINE_OPEN[0] = False
    except (OSError, ValueError, AttributeError):   # the terminal is gone (SIGHUP) or the stream closed
        pass


# A terminal or a pipe cannot be read back: whether the script's last write to stderr left its line open is
# what the script's python saw of its own writes (runtime/stderr_tail.py), told to the launching process at the end.
LINE_OPEN = [False]


def _at_line_start(fd: int) -> bool | None:
    """Whether our line would start a line of its own: for a regular file (a batch job's log), whether its last
    byte before the write position is a newline (not so after the script's `progress 100%`); None for a terminal
    or a pipe, which cannot be read back (LINE_OPEN says then)."""
    try:
        import stat
        st = _os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size == 0:
            return True
        import fcntl
        pos = st.st_size if fcntl.fcntl(fd, fcntl.F_GETFL) & _os.O_APPEND else _os.lseek(fd, 0, _os.SEEK_CUR)
        if pos <= 0:
            return True
        with open(f"/proc/self/fd/{fd}", "rb", buffering=0) as f:   # a second, read-only open: fd may be write-only
            return f.seek(pos - 1) != pos - 1 or f.read(1) in (b"\n", b"")
    except (OSError, ValueError, ImportError):
        return True


import argparse as _argparse   # noqa: E402


class OneLineParser(_argparse.ArgumentParser):
    """argparse for our commands: a bad option is one line, `haiprof: error: ...`, exit 2 (UserError, printed by
    the command line), not argparse's usage block followed by its message."""

    def error(self, message):
        raise UserError(f"{self.prog}: {message}")
