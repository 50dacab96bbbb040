"""GPU-side phase timing with CUDA events: no device synchronize, ever.

Each timed host phase also records a (start, end) event pair on the current stream. Pairs are resolved later,
only once `end.query()` says the GPU got there, and mapped onto the host clock through a reference event recorded
while the device was idle. Output records are ("gpu:<phase>", start_ns, end_ns), emitted in issue order.

The training thread only records: `begin`/`end` take an event from a pool of resolved ones (creating CUDA events
only while the pool is empty, i.e. during the first steps) and record it on the current stream through torch's C
bindings (torch.cuda.Event.record builds a Stream object in Python on every call). `resolve()` (event query,
elapsed time, the output record) runs wherever the owner drives it: the phase writer's flush thread in
`haiprof run`, every half second. Querying an event from another thread is legal; one resolver runs at a time.
"""
from __future__ import annotations

import threading
import time
from collections import deque


def _stream_recorder(torch):
    """record(event) on the current stream of the current device, without torch.cuda.Event.record's per-call
    Python (current_stream() builds a Stream each time); falls back to event.record() where the private bindings
    differ."""
    try:
        C = torch._C
        get_device, get_stream = C._cuda_getDevice, C._cuda_getCurrentStream
        record_on = C._CudaEventBase.record
        Stream = torch.cuda.Stream
    except AttributeError:
        return lambda ev: ev.record()
    streams: dict = {}

    def record(ev):
        key = get_stream(get_device())          # (stream_id, device_index, device_type): C calls, no objects
        stream = streams.get(key)
        if stream is None:
            stream = streams[key] = Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
        record_on(ev, stream)

    return record


class CudaPhaseTimer:
    MAX_PENDING = 4096  # bound memory if the GPU falls far behind; older pairs are dropped, not waited for

    def __init__(self, torch, append, clock=time.monotonic_ns, new_event=None, record=None):
        self._append = append
        self._clock = clock
        self._new_event = new_event or (lambda: torch.cuda.Event(enable_timing=True))
        self._record = record or _stream_recorder(torch)
        self._pending: deque = deque()   # (phase, start, end): appended by the hooks, popped by the resolver
        self._pool: deque = deque()      # resolved events, ready to be recorded again
        self._lock = threading.Lock()    # one resolver at a time (flush thread, uninstall)
        self.created = 0                 # CUDA events created (the pool's high-water mark, x2 per pair)
        self.dropped = 0                 # pairs dropped because the GPU fell MAX_PENDING pairs behind
        self._ref = self._new_event()
        self._ref.record()
        self._ref.synchronize()  # once, at install: anchors GPU time to the host clock
        self._ref_host_ns = clock()

    def _event(self):
        try:
            return self._pool.pop()
        except IndexError:
            self.created += 1
            return self._new_event()

    def begin(self):
        ev = self._event()
        self._record(ev)
        return ev

    def end(self, phase: str, start_event) -> None:
        ev = self._event()
        self._record(ev)
        self._pending.append((phase, start_event, ev))

    def resolve_all(self, timeout_s: float) -> None:
        """At the end of the run (the training is over, nothing to slow down): resolve until every pair is, or
        timeout_s passes (a wedged GPU must not hold the exit). The last steps' device ends are then recorded,
        not lost to a script that ended without a synchronize."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.resolve()
            if not self._pending or time.monotonic() >= deadline:
                return
            time.sleep(0.002)

    def resolve(self) -> None:
        """Emit every pair the GPU has finished, in order; stop at the first unfinished one. Thread-safe."""
        with self._lock:
            pending, pool = self._pending, self._pool
            while len(pending) > self.MAX_PENDING:   # never recycled: the GPU may not have reached them
                pending.popleft()
                self.dropped += 1
            ref, base = self._ref, self._ref_host_ns
            while pending:
                phase, start, end = pending[0]
                if not end.query():
                    return
                pending.popleft()
                try:
                    # The offset from the reference event loses precision as the run grows (cudaEventElapsedTime
                    # is a float of ms); the duration is measured between the pair itself.
                    s = base + int(ref.elapsed_time(start) * 1e6)
                    e = s + int(start.elapsed_time(end) * 1e6)
                except RuntimeError:   # start not reached (the script switched streams inside the phase)
                    self.dropped += 1
                    continue
                self._append(("gpu:" + phase, s, e))
                pool.append(start)
                pool.append(end)
