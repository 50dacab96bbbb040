"""Errors every layer may raise. Here, at the bottom, so that nothing below the command line imports it."""

USAGE_ERROR = 2   # exit code for bad input


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code USAGE_ERROR."""


# -- haiprof's own messages ----------------------------------------------------------------------------------------
import os as _os   # noqa: E402
import sys as _sys   # noqa: E402

_OWN_STDERR: list = [None]   # None: not kept (use sys.stderr); False: fd 2 was closed at start; else a stream


def keep_stderr() -> None:
    """Keep a copy of file descriptor 2 as it is now, before the script runs: every haiprof message goes there,
    never into a target the script later sets sys.stderr to (its log file), nor to stdout when it sets
    sys.stderr = None, and it survives the script closing sys.stderr. The copy is not inherited by children."""
    try:
        fd = _os.dup(2)
    except OSError:
        _OWN_STDERR[0] = False   # no stderr at start: stay silent, as python's own writes would be lost too
        return
    _OWN_STDERR[0] = _os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1)


def say(line: str) -> None:
    """One line of haiprof's on the process's own stderr (see keep_stderr); never raises."""
    stream = _OWN_STDERR[0]
    if stream is False:
        return
    try:
        if stream is None:
            stream = _sys.stderr
        else:   # what the script wrote to the same terminal or pipe first stays first
            flush = getattr(_sys.stderr, "flush", None)
            if flush is not None:
                try:
                    flush()
                except (OSError, ValueError):
                    pass
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError, AttributeError):   # the terminal is gone (SIGHUP) or the stream closed
        pass


import argparse as _argparse   # noqa: E402


class OneLineParser(_argparse.ArgumentParser):
    """argparse for our commands: a bad option is one line, `haiprof: error: ...`, exit 2 (UserError, printed by
    the command line), not argparse's usage block followed by its message."""

    def error(self, message):
        raise UserError(f"{self.prog}: {message}")
