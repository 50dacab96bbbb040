"""The script's own profile function (sys.setprofile: its own call counter, cProfile, yappi) on the training thread.

haiprof's step callback runs on that thread, so a profile function the script set sees haiprof's calls too (a
tracing window's profiler `step()` counted as the script's own). `hidden` runs a callback with a plain-Python one
paused, so it sees the script's calls only; a C-level one (cProfile, torch's own tracer) is left in place: it
cannot be put back from Python as it was.

And a window with Python stacks starts torch's Python tracer, which replaces the thread's profile function and
clears it when the window ends: the script's profiler would be gone for the rest of the run. `installed()` says
whether the script has one, so that window leaves Python stacks out instead.
"""
from __future__ import annotations

import sys
import threading
import types

_paused = threading.local()
_PLAIN = (types.FunctionType, types.MethodType)


def installed():
    """The profile function the script set on this thread (paused by `hidden` or not), or the one threading gives
    new threads; None when there is none."""
    return getattr(_paused, "fn", None) or sys.getprofile() or threading.getprofile()


def hidden(callback, *args):
    """callback(*args) with the thread's plain-Python profile function paused; it is put back unless the callback
    set another one (torch's tracer, started by a window: then it is torch's to end)."""
    fn = sys.getprofile()
    if not isinstance(fn, _PLAIN):
        return callback(*args)
    _paused.fn = fn
    sys.setprofile(None)
    try:
        return callback(*args)
    finally:
        _paused.fn = None
        if sys.getprofile() is None:
            sys.setprofile(fn)
