"""Every rank catches the same steps: the flight recorder's windows of a distributed job, shared through its store.

A rank whose detector asks for a window on a periodic stall (collectors/anomaly.py) publishes the ask in the
job's TCPStore (the store torchrun's agent hosts, runtime/rank_gather.py); every other rank reads it and traces
the same steps, so the straggler's trace and the waiters' traces line up. The store is only touched from the
flush thread (twice a second), never from the training thread: an ask is queued by the training thread and
published by the next flush, and the window is placed at least LEAD_S ahead (whole periods later, where the next
occurrence is too close), so the other ranks hear of it before it is due.

Polling costs the store one round trip a read; at a thousand ranks reading every flush that is 2,000 requests a
second on the agent's store. So a rank reads every `every` flushes, enough that the job's reads stay under
POLL_RPS a second (a rank's own asks still go out at the next flush), at most every MAX_POLL_S; the lead grows
by the flushes skipped, so every rank still hears of a window LEAD_S - 2 x FLUSH_S (1 s) or more before it opens,
as with a read every flush (benchmarks/job_store_poll.py: requests a second against the world size).

Keys: <prefix>anomaly/n (a counter, store.add) and <prefix>anomaly/<i> (the i-th ask, JSON). At most the
flight recorder's window budget per rank is ever published, so the keys are bounded by world size x budget.
"""
from __future__ import annotations

import json
import math
import os
from collections import deque
from typing import Callable

from .anomaly import Ask

LEAD_S = 2.0   # a shared window opens this long after its ask, at least: two flushes on every rank and then some
FLUSH_S = 0.5  # the flush thread's period (rundir/appenders.py): exchange() runs once a flush
POLL_RPS = 200.0   # the job's reads of the store a second, all ranks together, at most (up to MAX_POLL_S)
MAX_POLL_S = 5.0   # a rank reads at least this often: the lead stays a few seconds at any world size


def poll_every(world_size: int) -> int:
    """Read the store every this many flushes: world_size / (every x FLUSH_S) <= POLL_RPS, within MAX_POLL_S."""
    need = math.ceil(max(1, world_size) / (POLL_RPS * FLUSH_S))
    return max(1, min(need, int(MAX_POLL_S / FLUSH_S)))


class JobShare:
    """`connect()` -> (store, key prefix, this rank); called once, on the flush thread. `world_size`: the job's
    ranks (default: torchrun's WORLD_SIZE), which set how often the store is read."""

    def __init__(self, connect: Callable, status: Callable, world_size: int | None = None):
        self._connect, self._status = connect, status
        world = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE") or 1)
        self.every = poll_every(world)
        # a read every `every` flushes: a rank hears of an ask up to every - 1 flushes later than with one a flush
        self.lead_s = LEAD_S + (self.every - 1) * FLUSH_S
        self._flushes = 0
        self._store = self._prefix = None
        self.rank = None
        self._outbox: deque = deque(maxlen=16)
        self._read = 0
        self.reason: str | None = None

    def lead(self, ask: Ask, completed: int, median_ns: int, stall_ns: int = 0) -> Ask:
        """The ask moved whole periods later until it opens lead_s or more after now (training thread). Each
        period it moves over holds a stall: `stall_ns`, its time over the median step, counts toward the lead (a
        checkpoint of 150 ms every 20 steps of 6 ms: 2 s is 8 periods ahead, not 333 ordinary steps)."""
        if not ask.period or ask.period_s or median_ns <= 0:   # placed by time: the detector asked lead_s ahead
            return ask                                          # (its lead_ns), its stalls counted
        open_at, due, stalls = ask.open_at, ask.due, 0
        while (open_at - completed) * median_ns + stalls * max(0, stall_ns) < self.lead_s * 1e9:
            open_at, due, stalls = open_at + ask.period, due + ask.period, stalls + 1
        return Ask(open_at=open_at, due=due, period=ask.period, seen=ask.seen, period_s=ask.period_s)

    def publish(self, ask: Ask) -> None:
        """Queue a local ask for the next exchange (training thread: no store call here)."""
        self._outbox.append(ask)

    def exchange(self, deliver: Callable[[Ask, int], None]) -> None:
        """Publish the queued asks, hand every other rank's new ones to `deliver(ask, rank)` (flush thread)."""
        if self.reason is not None:
            return
        if self._store is None:
            try:
                self._store, self._prefix, self.rank = self._connect()
            except Exception as e:
                self.reason = f"job store unreachable: {type(e).__name__}: {e}"[:300]
            if self._store is None:
                self.reason = self.reason or "no job store"
                self._status("anomaly-share", False, f"flight recorder windows not shared: {self.reason}")
                return
        store, counter = self._store, self._prefix + "anomaly/n"
        while self._outbox:
            ask = self._outbox.popleft()
            n = store.add(counter, 1)
            store.set(f"{self._prefix}anomaly/{n}", json.dumps(
                {"open_at": ask.open_at, "due": ask.due, "period": ask.period, "seen": ask.seen, "rank": self.rank,
                 "period_s": ask.period_s}))
        self._flushes += 1
        if (self._flushes - 1) % self.every:
            return   # not this flush's turn to read (the first flush reads)
        total = store.add(counter, 0)
        while self._read < total:
            key = f"{self._prefix}anomaly/{self._read + 1}"
            if not store.check([key]):
                return   # counted, not yet set: the next flush reads it
            a = json.loads(store.get(key))
            self._read += 1
            if a.get("rank") != self.rank:
                deliver(Ask(open_at=int(a["open_at"]), due=a.get("due"), period=a.get("period"),
                            seen=int(a["seen"]), period_s=a.get("period_s")), int(a.get("rank", -1)))
