"""The flight recorder's detector: finds the slow moments while the run goes, and says where to trace the next one.

Fed one step time per optimizer step (`observe`), it keeps a rolling median of the last RING ordinary step times
and calls a step anomalous when it takes more than `factor` x that median (and MIN_EXCESS_NS more). A slow step
cannot be traced once it is over, so the detector predicts the next one:

  * a periodic stall (a checkpoint every N steps): once three intervals between occurrences agree (the last one and
    three earlier ones, +-1 step from 10 steps on; slow steps in a row are one occurrence, from its first step), the period is known and the window is placed so that the
    step where the next stall is due is the middle one of its three recorded steps;
  * a slow stretch (STRETCH anomalous steps in a row: the machine or the data got slow): the steps just after are
    traced at once, while it lasts;
  * a one-off slow step is never traced (nothing says when it comes back); the report lists it.

Cost: O(1) per step and bounded memory: two fixed-size rings (RING step times, ANOMALIES anomaly steps), the median
re-sorted every MEDIAN_EVERY steps (a sort of RING floats), the period looked for only on an anomalous step
(ANOMALIES^2 comparisons). Steps a tracing window touched are skipped: the profiler slows them.
"""
from __future__ import annotations

from dataclasses import dataclass

RING = 32            # ordinary step times kept for the rolling median
MEDIAN_EVERY = 8     # the median is re-sorted every this many steps (amortised: a sort of 32 floats / 8 steps)
MIN_STEPS = 8        # no verdict on a step before this many ordinary steps were seen
ANOMALIES = 8        # the last anomalous steps kept to learn a period from
MIN_EXCESS_NS = 2_000_000   # and at least 2 ms over the median: scheduler jitter on tiny steps is no stall
STRETCH = 5          # this many anomalous steps in a row: a slow stretch, traced at once
FACTOR = 3.0         # default k: a step over 3x the rolling median is a slow moment
MIN_PERIOD = 3       # slow every other step is a slow run, not a periodic stall
SIZE_AGREE = 0.33    # the occurrences a period is learned from take at least a third of the largest one's time


@dataclass(frozen=True)
class Ask:
    """Where to open a window: after `open_at` steps have completed (its profiler warm-up step is the next one,
    its recorded steps the three after); `due`: the step (0-based, the report's numbering) expected to be slow,
    `period`: the learned period in steps (None for a slow stretch), `seen`: the anomalous step that triggered it."""
    open_at: int
    due: int | None
    period: int | None
    seen: int


class AnomalyDetector:
    def __init__(self, factor: float = FACTOR, min_excess_ns: int = MIN_EXCESS_NS):
        self.factor, self.min_excess_ns = float(factor), int(min_excess_ns)
        self._ring = [0] * RING
        self._n = 0                  # ordinary steps seen (the ring holds min(n, RING) of them)
        self._median = 0
        self._seen = [(-1, 0)] * ANOMALIES   # the last occurrences (first step, its time), a ring
        self._k = 0
        self._run = 0                # anomalous steps in a row
        self._traced_periods: set = set()   # a period traced once is not traced again (bounded by the budget)
        self.anomalies = 0           # how many were seen (the end-of-run status line)

    @property
    def median_ns(self) -> int:
        """The rolling median step time (0 before MIN_STEPS steps)."""
        return self._median

    def observe(self, step: int, duration_ns: int) -> Ask | None:
        """`step`: the step just finished (0-based), `duration_ns` its time. Returns where to trace, or None."""
        med = self._median
        slow = self._n >= MIN_STEPS and duration_ns > self.factor * med and duration_ns - med >= self.min_excess_ns
        self._ring[self._n % RING] = duration_ns
        self._n += 1
        if self._n % MEDIAN_EVERY == 0 or self._n == MIN_STEPS:
            window = sorted(self._ring[:min(self._n, RING)])
            self._median = window[len(window) // 2]
        if not slow:
            self._run = 0
            return None
        self.anomalies += 1
        self._run += 1
        if self._run == STRETCH:
            return Ask(open_at=step + 1, due=None, period=None, seen=step)
        if self._run > 1:
            return None   # slow steps in a row are one occurrence, from its first step (its period's)
        period = self._period(step, duration_ns)
        self._seen[self._k % ANOMALIES] = (step, duration_ns)
        self._k += 1
        # a multiple of a period already traced is that stall again, an occurrence apart (one was traced, so the
        # detector never saw its time)
        if period is None or any(period % p <= 1 or p - period % p <= 1 for p in self._traced_periods):
            return None
        self._traced_periods.add(period)
        due = step + period
        # recorded steps are open_at+1 .. open_at+3 (0-based): the due step in the middle
        return Ask(open_at=max(step + 1, due - 2), due=due, period=period, seen=step)

    def _period(self, step: int, duration_ns: int) -> int | None:
        """A period three intervals agree on: step - a == a - b == b - c (+-1 from 10 steps on) for earlier
        occurrences a, b, c of a like size (each at least SIZE_AGREE of the largest: a checkpoint's stalls, not
        one of them beside the random slow steps of a busy machine). Three intervals, not two: a busy machine's
        dozen slow steps in a hundred hold three evenly spaced ones by chance, rarely four."""
        seen = {s: d for s, d in self._seen if 0 <= s < step}

        def near(at: int, tol: int):
            return [(s, d) for s, d in seen.items() if abs(s - at) <= tol]

        for a, da in sorted(seen.items(), reverse=True):
            p = step - a
            if p < MIN_PERIOD:
                continue
            tol = 1 if p >= 10 else 0
            for b, db in near(a - p, tol):
                for _, dc in near(b - p, tol):
                    sizes = (duration_ns, da, db, dc)
                    if min(sizes) >= SIZE_AGREE * max(sizes):
                        return p
        return None
