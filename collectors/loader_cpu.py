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


class ThreadBusyClock:
    def __init__(self):
        self._fds: dict[int, int] = {}

    def __call__(self) -> tuple[int, int]:
        tid = threading.get_native_id()
        fd = self._fds.get(tid)
        if fd is None:
            try:
                fd = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                fd = -1
            self._fds[tid] = fd
        if fd >= 0:
            try:
                run, wait, _ = os.pread(fd, 96, 0).split()
                return int(run), int(wait)
            except (OSError, ValueError):
                pass
        return time.thread_time_ns(), 0

    def close(self) -> None:
        for fd in self._fds.values():
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds.clear()
