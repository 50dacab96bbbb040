"""How busy the thread that waits for a batch is: (ns on a CPU, ns runnable but waiting for one).

/proc/self/task/<tid>/schedstat (Documentation/scheduler/sched-stats.rst) holds "<ns on cpu> <ns waiting on a
runqueue> <timeslices>". A thread that decodes is either on a CPU or waiting for one, so on-CPU / (wall - runqueue
wait) stays near 1 even on a contended host; one that sleeps on a read is neither. That separates decoding from
storage latency for num_workers=0, where __getitem__ runs inside DataLoader.__next__ on the training thread. One
pread of an already open file per call (a few microseconds; once per step). Without schedstat: thread CPU time,
no wait.
"""
from __future__ import annotations

import os
import threading
import time

from haiprof.errors import fd_identity, fd_kept_high


class ThreadBusyClock:
    """Each thread's schedstat file stays open; its descriptor is checked (one fstat) before each read and close:
    a script that closes descriptors it did not open (os.closerange) may get the number back for its own file,
    which must be neither read as ours nor closed by us (the file is then opened again). Kept at a high number
    (errors.fd_kept_high), so the script's own files get the low ones, as under python."""

    def __init__(self):
        self._fds: dict[int, tuple] = {}   # tid -> (fd, (st_dev, st_ino)); fd -1: no schedstat

    @staticmethod
    def _open(tid: int) -> tuple:
        path = f"/proc/self/task/{tid}/schedstat"
        try:
            low = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            st = os.stat(path)
            want = (st.st_dev, st.st_ino)
            fd = fd_kept_high(low, expect=want)
        except OSError:
            return -1, None
        if fd_identity(fd) == want:
            return fd, want
        if fd != low:   # our copy of the script's file: the low number, the script's now, is left to it
            os.close(fd)
        return -1, None

    def __call__(self) -> tuple[int, int]:
        tid = threading.get_native_id()
        entry = self._fds.get(tid)
        if entry is None or (entry[0] >= 0 and fd_identity(entry[0]) != entry[1]):
            entry = self._fds[tid] = self._open(tid)   # a taken number is left to the script, not closed
        fd = entry[0]
        if fd >= 0:
            try:
                run, wait, _ = os.pread(fd, 96, 0).split()
                return int(run), int(wait)
            except (OSError, ValueError):
                pass
        return time.thread_time_ns(), 0

    def close(self) -> None:
        for fd, ident in self._fds.values():
            if fd >= 0 and fd_identity(fd) == ident:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds.clear()
