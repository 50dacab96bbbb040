"""GPU-side phase timing with CUDA events: no device synchronize, ever.

Each timed host phase also records a (start, end) event pair on the current stream. Pairs are resolved later,
only once `end.query()` says the GPU got there, and mapped onto the host clock through a reference event recorded
while the device was idle. Output records are ("gpu:<phase>", start_ns, end_ns).
"""
from __future__ import annotations

import time
from collections import deque


class CudaPhaseTimer:
    MAX_PENDING = 4096  # bound memory if the GPU falls far behind; older pairs are dropped, not waited for

    def __init__(self, torch, append, clock=time.monotonic_ns):
        self._torch = torch
        self._append = append
        self._clock = clock
        self._pending: deque = deque()
        self._ref = torch.cuda.Event(enable_timing=True)
        self._ref.record()
        self._ref.synchronize()  # once, at install: anchors GPU time to the host clock
        self._ref_host_ns = clock()

    def begin(self):
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def end(self, phase: str, start_event) -> None:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        if len(self._pending) >= self.MAX_PENDING:
            self._pending.popleft()
        self._pending.append((phase, start_event, ev))

    def resolve(self) -> None:
        """Emit every pair the GPU has finished, in order; stop at the first unfinished one."""
        ref, base = self._ref, self._ref_host_ns
        while self._pending:
            phase, start, end = self._pending[0]
            if not end.query():
                return
            self._pending.popleft()
            s = base + int(ref.elapsed_time(start) * 1e6)
            e = base + int(ref.elapsed_time(end) * 1e6)
            self._append(("gpu:" + phase, s, e))
