"""Every rank catches the same steps: the flight recorder's windows of a distributed job, shared through its store.

A rank whose detector asks for a window on a periodic stall (collectors/anomaly.py) publishes the ask in the
job's TCPStore (the store torchrun's agent hosts, runtime/rank_gather.py); every other rank reads it and traces
the same steps, so the straggler's trace and the waiters' traces line up. The store is only touched from the
flush thread (twice a second), never from the training thread: an ask is queued by the training thread and
published by the next flush, and the window is placed at least LEAD_S ahead (whole periods later, where the next
occurrence is too close), so the other ranks hear of it before it is due.

Keys: <prefix>anomaly/n (a counter, store.add) and <prefix>anomaly/<i> (the i-th ask, JSON). At most the
flight recorder's window budget per rank is ever published, so the keys are bounded by world size x budget.
"""
from __future__ import annotations

import json
from collections import deque
from typing import Callable

from .anomaly import Ask

LEAD_S = 2.0   # a shared window opens this long after its ask, at least: two flushes on every rank and then some


class JobShare:
    """`connect()` -> (store, key prefix, this rank); called once, on the flush thread."""

    def __init__(self, connect: Callable, status: Callable):
        self._connect, self._status = connect, status
        self._store = self._prefix = None
        self.rank = None
        self._outbox: deque = deque(maxlen=16)
        self._read = 0
        self.reason: str | None = None

    def lead(self, ask: Ask, completed: int, median_ns: int) -> Ask:
        """The ask moved whole periods later until it opens LEAD_S or more after now (training thread)."""
        if not ask.period or median_ns <= 0:
            return ask
        open_at, due = ask.open_at, ask.due
        while (open_at - completed) * median_ns < LEAD_S * 1e9:
            open_at, due = open_at + ask.period, due + ask.period
        return Ask(open_at=open_at, due=due, period=ask.period, seen=ask.seen)

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
                {"open_at": ask.open_at, "due": ask.due, "period": ask.period, "seen": ask.seen, "rank": self.rank}))
        total = store.add(counter, 0)
        while self._read < total:
            key = f"{self._prefix}anomaly/{self._read + 1}"
            if not store.check([key]):
                return   # counted, not yet set: the next flush reads it
            a = json.loads(store.get(key))
            self._read += 1
            if a.get("rank") != self.rank:
                deliver(Ask(open_at=int(a["open_at"]), due=a.get("due"), period=a.get("period"),
                            seen=int(a["seen"])), int(a.get("rank", -1)))
