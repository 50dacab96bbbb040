"""The flight recorder's detector: finds the slow moments while the run goes, and says where to trace the next one.

Fed one step time per optimizer step (`observe`), it keeps a rolling median of the last RING ordinary step times
and calls a step anomalous when it takes more than `factor` x that median (and MIN_EXCESS_NS more). A slow step
cannot be traced once it is over, so the detector predicts the next one:

  * a periodic stall (a checkpoint every N steps): once three intervals between occurrences agree (the last one and
    three earlier ones, +-1 step from 10 steps on; slow steps in a row are one occurrence, at its largest step),
    the period is known and the window is placed so that the step where the next stall is due is the middle one
    of its three recorded steps;
  * a stall on a clock (a checkpoint every T seconds, a logger flushing every 30 s) while the step time drifts:
    its period in steps does not hold, its period in time does. The start times of the occurrences are kept too;
    once three intervals in time agree (+-TIME_TOL recent steps; MIN_TIME_PERIOD steps or longer), the next due
    time is known, and the window is placed at the last moment, on the step expected to contain it: when the due
    time is under DUE_AHEAD steps away (the mean of the last PACE ordinary steps: the step time now, not the
    rolling median's), so the due step is the middle one of the recorded three. A stall both periods explain is
    placed on the step its step period names while the step time holds (within DRIFT of the one it was learned
    at: a step-counted stall's time varies with its own length and a busy machine's steps, its step does not),
    by its clock once the step time changed; a step period asked for once is not asked for again, by steps
    or by its clock, while it holds;
  * a period is taken only where the occurrences are of a like size and more than chance would line up: where
    other like-sized slow steps lie between them, the odds of a chance grid must stay under CHANCE;
  * an occurrence is looked at once its slow steps in a row are over (at its largest step): a busy machine's
    slow step just before a checkpoint is not the checkpoint;
  * a slow stretch (STRETCH anomalous steps in a row: the machine or the data got slow): the steps just after are
    traced at once, while it lasts;
  * a one-off slow step is never traced (nothing says when it comes back); the report lists it;
  * a periodic window whose recorded steps held no slow step (`missed`, told by the caller) was placed by a wrong
    period: it is forgotten, and the stall's next occurrences can ask again while the budget lasts.

Cost: O(1) per step and bounded memory: four fixed-size rings (RING step times, ANOMALIES anomaly steps, RECENT
and PACE step times), the median re-sorted every MEDIAN_EVERY steps (a sort of RING floats), the periods looked
for only once a slow moment is over (ANOMALIES^3 comparisons at most; through the HIDDEN step ranges windows hid,
ANOMALIES x 4 x their steps), and while a window waits for its due time a sort of RATE floats and a mean of PACE
a step. Steps a tracing window touched are skipped: the profiler slows them (a period's chain may pass through
them: one of four places, `hidden`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

RING = 32            # ordinary step times kept for the rolling median
MEDIAN_EVERY = 8     # the median is re-sorted every this many steps (amortised: a sort of 32 floats / 8 steps)
MIN_STEPS = 8        # no verdict on a step before this many ordinary steps were seen
ANOMALIES = 16       # the anomalous steps kept to learn a period from (see _room: which one goes)
MIN_EXCESS_NS = 2_000_000   # and at least 2 ms over the median: scheduler jitter on tiny steps is no stall
STRETCH = 5          # this many anomalous steps in a row: a slow stretch, traced at once
FACTOR = 3.0         # default k: a step over 3x the rolling median is a slow moment
MIN_PERIOD = 3       # slow every other step is a slow run, not a periodic stall
SIZE_AGREE = 0.33    # the occurrences a period is learned from take at least a third of the largest one's time
TIME_SIZE_AGREE = 0.5   # ... half, for a period in time: its wider tolerance lines up a busy machine's slow steps
RECENT = 3           # the step time now: a median of the last this many ordinary steps (a drift shows at once)
PACE = 4             # steps to a due time are counted in the mean of the last this many ordinary steps: a busy
                     # machine's steps flip between two times (3 and 8 ms), and the steps to go add up their mean
TIME_TOL = 1.5       # intervals in time agree within this many median steps (a timer's stall starts at the next
                     # step boundary: each start is late by up to a step; wider lets random slow steps line up)
DUE_AHEAD = 3.5      # a window placed by time opens when its due time is under this many steps away (and 1.5 or
                     # more: the warm-up step first), on the step it falls in. Two steps wide: a step longer than
                     # the span (a busy machine's 8 ms beside 3 ms ones) jumped a one-step span, period after period
MIN_TIME_PERIOD = 10  # median steps: a period in time is told from chance only when TIME_TOL is a small part of
                     # it (a busy machine's scheduler slows every few steps at a regular pace); a stall on a
                     # shorter clock is as well placed by its period in steps
MISSED = 3           # a period this many times one already traced is that stall again, an occurrence or two
                     # hidden by the window that traced it (and the first one of a period may go unseen)
HIDDEN = 8           # the step ranges a window hid from the detector kept (a window's, at most a few a run)
CHANCE = 0.02       # a step period is taken when the odds that the busy machine's other slow steps line up so are
                     # under this (a noise-only run: a window in ~25% of runs without it)
RATE = 15            # the step time a step period was learned at, and is checked against: a median of this many
                     # last steps (a drift shows within RATE/2 steps; a busy machine's noise mostly averages out)
DRIFT = 0.2          # a step period holds while the step time stays within this of the one it was learned at: a
                     # stall both periods explain is then placed on its step. Beyond it, a clock's stall no longer
                     # comes every so many steps and the period in time places it


@dataclass(frozen=True)
class Ask:
    """Where to open a window: after `open_at` steps have completed (its profiler warm-up step is the next one,
    its recorded steps the three after); `due`: the step (0-based, the report's numbering) expected to be slow,
    `period`: the learned period in steps (None for a slow stretch), `seen`: the anomalous step that triggered it."""
    open_at: int
    due: int | None
    period: int | None
    seen: int
    period_s: float | None = None   # the learned period in seconds, when the window was placed by time


class _Plan(NamedTuple):
    """A period in time learned, its window not yet placed (AnomalyDetector._due_by_time)."""
    due_ns: int               # when the next occurrence is due
    period_ns: int
    seen: int                 # the occurrence it was learned at
    step_due: int | None      # the step the step period names for it, if the stall has one
    period: int | None        # that step period
    stall_ns: int             # the stall's time over the median: what each period between adds to the time to go
    rate: int                 # the step time it was learned at (_rate): the step period holds while this does


def _beyond_chance(tried: int, hit: float, fourth) -> bool:
    """Whether a grid of three agreeing intervals is more than a busy machine's other slow steps would line up:
    each of the two earlier intervals holds one of them with probability `hit`, for any of `tried` occurrences
    tried as the first; under CHANCE, or under it with a fourth interval that agrees too (`fourth`: an iterable
    of bools, read only when needed)."""
    odds = tried * hit * hit
    return odds <= CHANCE or (odds * hit <= CHANCE and any(fourth))


def _off_grid(distance: int, period: int, tol: int) -> bool:
    """A slow step this many steps before the current one is not on the period's grid (a stall's own earlier
    occurrence is no chance slow step)."""
    r = distance % period
    return min(r, period - r) > tol


class AnomalyDetector:
    def __init__(self, factor: float = FACTOR, min_excess_ns: int = MIN_EXCESS_NS, lead_ns: int = 0):
        self.factor, self.min_excess_ns = float(factor), int(min_excess_ns)
        # a window placed by time is asked for this long before it opens (a distributed job: every rank hears of
        # it first, collectors/job_share.py); 0: at the last moment, on the step time now
        self.lead_ns = int(lead_ns)
        self._ring = [0] * RING
        self._recent = [0] * RECENT
        self._pace = [0] * PACE      # the last ordinary step times, for _pace_ns
        self._ordinary = 0           # ordinary steps seen
        self._plan: _Plan | None = None   # a period in time learned, its window not yet placed
        self._traced_times: list = []   # periods in time traced (bounded by the budget: one a learned period)
        self._n = 0                  # steps seen (the ring holds min(n, RING) of them)
        self._median = 0
        self._seen: list = []        # occurrences kept, at most ANOMALIES (step, its time, its start ns, the step
                                     # time then); _room says which one a new one replaces
        self._last = -1              # where the last occurrence is in _seen
        self._run = 0                # anomalous steps in a row
        self._open = False           # an occurrence not yet looked at: its slow steps in a row may not be over
        self._traced_periods: set = set()   # a period traced once is not traced again (bounded by the budget)
        self._placed: dict = {}      # the periods each periodic ask was placed by, by its `seen` (see missed)
        self._hidden: list = []      # [first, last] step ranges a tracing window hid (see hidden), at most HIDDEN
        self.anomalies = 0           # how many were seen (the end-of-run status line)
        self.stall_ns = 0            # the last occurrence's time over the median: what each period adds to a lead

    def is_slow(self, duration_ns: int) -> bool:
        """Whether a step of this time is a slow moment now (against the rolling median)."""
        med = self._median
        return self._n >= MIN_STEPS and duration_ns > self.factor * med and duration_ns - med >= self.min_excess_ns

    def hidden(self, step: int) -> None:
        """A step the detector was not shown (a tracing window touched it: the profiler slows it). A stall due
        there may have come: a period's chain may pass through it (_period_across)."""
        if self._hidden and self._hidden[-1][1] == step - 1:
            self._hidden[-1][1] = step
        else:
            self._hidden = self._hidden[1 - HIDDEN:] + [[step, step]]

    def missed(self, ask: Ask) -> None:
        """The window placed for a periodic stall recorded no slow step: the period it was placed by was wrong
        (slow steps that lined up by chance on a busy machine, a step time that changed right after the stall).
        Forgotten, so the stall's next occurrences are looked at afresh, not taken for one already traced."""
        if ask.seen not in self._placed:   # another rank's ask (a job), or one long forgotten
            return
        period, period_ns = self._placed.pop(ask.seen)
        self._traced_periods.discard(period)
        if period_ns is not None and self._traced_times:
            self._traced_times.remove(min(self._traced_times, key=lambda p: abs(p - period_ns)))

    def _asked(self, ask: Ask, period: int | None, period_ns: int | None) -> Ask:
        self._placed[ask.seen] = (period, period_ns)
        while len(self._placed) > 4:   # bounded: the budget's windows, a few at most
            del self._placed[next(iter(self._placed))]
        return ask

    @property
    def median_ns(self) -> int:
        """The rolling median step time (0 before MIN_STEPS steps)."""
        return self._median

    def observe(self, step: int, duration_ns: int, end_ns: int | None = None) -> Ask | None:
        """`step`: the step just finished (0-based), `duration_ns` its time, `end_ns` when it ended (a monotonic
        clock; None: no periods in time). Returns where to trace, or None. An occurrence is looked at on the first
        ordinary step after it (its slow steps in a row are over: it is at its largest one), so the ask for a
        periodic stall comes a step after the stall, never on a busy machine's slow step just before it."""
        slow = self.is_slow(duration_ns)
        self._ring[self._n % RING] = duration_ns
        if not slow:
            self._recent[self._n % RECENT] = duration_ns
            self._pace[self._ordinary % PACE] = duration_ns
            self._ordinary += 1
        self._n += 1
        if self._n % MEDIAN_EVERY == 0 or self._n == MIN_STEPS:
            window = sorted(self._ring[:min(self._n, RING)])
            self._median = window[len(window) // 2]
        if not slow:
            self._run = 0
            ask = self._occurrence(step, end_ns) if self._open else None
            if ask is None and self._plan is not None and end_ns is not None:
                ask = self._due_by_time(step, end_ns)
            return ask
        self.anomalies += 1
        self._run += 1
        if self._run == STRETCH:
            self._open = False
            return Ask(open_at=step + 1, due=None, period=None, seen=step)
        if self._run > 1:
            # slow steps in a row are one occurrence, at its largest step: a busy machine's slow step just before
            # a checkpoint would give the occurrence that step's start and size. A larger one takes its place
            if duration_ns <= self._seen[self._last][1]:
                return None
            at = self._last
        else:
            at = self._room(duration_ns)
        start_ns = -1 if end_ns is None else end_ns - duration_ns
        self._seen[at] = (step, duration_ns, start_ns, self._step_now())
        self._last = at
        self._open = self._run < STRETCH
        return None

    def _room(self, duration_ns: int) -> int:
        """Where a new occurrence goes: a free place, else the oldest of those too small to share a period with it
        (under SIZE_AGREE of its time), else the oldest it could share one with or smaller, else the oldest. A
        busy machine's slow steps then push out each other, never the stalls they come between (beside two busy
        processes, a dozen of them between two checkpoints a second apart left no three checkpoints to learn
        from), and a stall pushes out the small ones first; stalls age out by stalls."""
        if len(self._seen) < ANOMALIES:
            self._seen.append(None)
            return len(self._seen) - 1
        everyone = range(len(self._seen))
        smaller = [i for i in everyone if self._seen[i][1] < SIZE_AGREE * duration_ns]
        like = [i for i in everyone if self._seen[i][1] * SIZE_AGREE <= duration_ns]
        return min(smaller or like or everyone, key=lambda i: self._seen[i][0])

    def _occurrence(self, step: int, end_ns: int | None) -> Ask | None:
        """The last occurrence, now that it is over (`step`: the ordinary step just after it): a period learned
        from it, and where to trace the next one."""
        self._open = False
        seen, duration_ns, start_ns, now = self._seen[self._last]
        med = self._median
        period = self._period(seen, duration_ns)   # (each looks among the earlier occurrences only)
        period_ns = self._period_in_time(start_ns, duration_ns, now) if start_ns >= 0 else None
        self.stall_ns = duration_ns - med
        # a small multiple of a period already traced is that stall again, an occurrence apart (one was traced, so
        # the detector never saw its time): not asked for again, by steps or by time. Only small ones: every period
        # is near some multiple of a short one (3 steps), which would hide every later stall
        if period is not None and any(abs(period - m * p) <= 1 for p in self._traced_periods
                                      for m in range(1, 1 + MISSED)):
            return None
        if period_ns is not None and (self._plan is not None or any(
                abs(period_ns - m * p) <= TIME_TOL * med for p in self._traced_times for m in range(1, 1 + MISSED))):
            return None   # a stall on a clock already placed or traced, whatever its period in steps now
        if period_ns is not None and end_ns is not None:
            # placed later (_due_by_time): by its step period while the step time holds, else by its clock
            self._traced_times.append(period_ns)
            if period is not None:
                self._traced_periods.add(period)
            self._plan = _Plan(start_ns + period_ns, period_ns, seen, None if period is None else seen + period,
                               period, self.stall_ns, self._rate())
            return self._due_by_time(step, end_ns)
        if period is None:
            return None
        # (its period in time is not marked traced: if the step time drifts, the step period stops holding and the
        # clock's window on the same stall is the one that lands)
        self._traced_periods.add(period)
        due = seen + period
        while due - 2 <= step and period:   # (a period of 3 or 4: the next occurrence is too close)
            due += period
        # recorded steps are open_at+1 .. open_at+3 (0-based): the due step in the middle
        return self._asked(Ask(open_at=due - 2, due=due, period=period, seen=seen), period, None)

    def _due_by_time(self, step: int, now_ns: int) -> Ask | None:
        """The window of a period in time, once its due time is close: the step expected to contain it. Asked for
        lead_ns ahead (a job's ranks hear of it first), a stall due sooner is skipped for a later one, whole periods
        on, and each stall between now and then counts for its time, not as ordinary steps. A stall with a step
        period too is placed on its step while the step time holds (within DRIFT of the one it was learned at): a
        step-counted stall's time varies with its own length and the busy machine's steps, its step does not."""
        due_ns, period_ns, seen, step_due, period, stall_ns, rate = self._plan
        if step_due is not None and abs(self._rate() - rate) <= DRIFT * rate:
            return self._due_by_steps(step, step_due, period, seen)
        per = self._pace_ns() if self.lead_ns <= 0 else self._median   # far ahead: the rolling median
        if per <= 0:
            return None
        soonest = 1.5 * per + self.lead_ns   # the warm-up step comes first, and every rank must hear of it
        moved = 0
        if due_ns - now_ns < soonest:        # too close to trace: the next one that is not
            moved = 1 + int((now_ns + soonest - due_ns) // period_ns)
            due_ns += moved * period_ns
            step_due = None if step_due is None else step_due + moved * period
        latest = (DUE_AHEAD + 1) * per + self.lead_ns if self.lead_ns > 0 else DUE_AHEAD * per
        # far ahead, a stall between now and then jumps the time to go past the last moment: asked at once
        if due_ns - now_ns >= latest and not (moved and self.lead_ns > 0):
            self._plan = _Plan(due_ns, period_ns, seen, step_due, period, stall_ns, rate)
            return None
        self._plan = None
        between = max(0, math.ceil((due_ns - now_ns) / period_ns) - 1)   # stalls due before this one
        ahead = (due_ns - now_ns - between * max(0, stall_ns)) / per      # ordinary steps to go until the due time
        due = step + 1 + int(round(ahead))   # the step now starting is step + 1, it starts now
        return self._asked(Ask(open_at=due - 2, due=due, period=None, seen=seen, period_s=period_ns / 1e9),
                           period, period_ns)

    def _due_by_steps(self, step: int, step_due: int, period: int, seen: int) -> Ask | None:
        """A stall both periods explain, its step time holding: its step, at the last moment (DUE_AHEAD steps
        ahead, so a drift before then still hands it to the clock), or at once with a lead (a job: the ranks'
        store moves it whole periods on, collectors/job_share.py)."""
        while step_due - 2 <= step:   # too close to trace (a step missed while a window ran): the next one
            step_due += period
        if self.lead_ns <= 0 and step_due - step > DUE_AHEAD + 1:
            self._plan = self._plan._replace(step_due=step_due)
            return None
        period_ns = self._plan.period_ns
        self._plan = None
        return self._asked(Ask(open_at=step_due - 2, due=step_due, period=period, seen=seen), period, period_ns)

    def _period(self, step: int, duration_ns: int) -> int | None:
        """A period three intervals agree on: step - a == a - b == b - c (+-1 from 10 steps on) for earlier
        occurrences a, b, c of a like size (each at least SIZE_AGREE of the largest: a checkpoint's stalls, not
        one of them beside the random slow steps of a busy machine). Three intervals, not two: a busy machine's
        dozen slow steps in a hundred hold three evenly spaced ones by chance, rarely four. And more than chance
        would line up: where other slow steps of a like size lie between them, the odds that they fall on such a
        grid by chance must stay under CHANCE, or a fourth interval must agree too."""
        seen = {s: d for s, d, _, _ in self._seen if 0 <= s < step}

        def near(at: int, tol: int):
            return [(s, d) for s, d in seen.items() if abs(s - at) <= tol]

        for a, da in sorted(seen.items(), reverse=True):
            p = step - a
            if p < MIN_PERIOD:
                continue
            tol = 1 if p >= 10 else 0
            for b, db in near(a - p, tol):
                for c, dc in near(b - p, tol):
                    sizes = (duration_ns, da, db, dc)
                    if min(sizes) < SIZE_AGREE * max(sizes):
                        continue
                    # chance: each of the two earlier intervals holds one of the like-sized others (their density
                    # over the chain's span) in its 2 tol + 1 steps, for any of the occurrences tried as the first
                    floor = SIZE_AGREE * max(sizes)
                    others = sum(1 for s, d in seen.items() if c <= s and s not in (a, b, c) and d >= floor)
                    # ... or over all the slow steps kept, off the chain's grid: a short period's span (12 steps)
                    # often holds none of a busy machine's, whose rate over the run still lines up a grid
                    before = [s for s, d in seen.items() if s < c and d >= floor and _off_grid(step - s, p, tol)]
                    rate = max(others / (step - c), (others + len(before)) / (step - min(seen)))
                    if _beyond_chance(len(seen), (2 * tol + 1) * rate,
                                      (min(sizes + (dd,)) >= SIZE_AGREE * max(sizes + (dd,))
                                       for _, dd in near(c - p, tol))):
                        return p
        return self._period_across(step, duration_ns, seen, near) if self._hidden else None

    def _period_across(self, step: int, duration_ns: int, seen: dict, near) -> int | None:
        """A period whose chain passes through a step a window hid (a slow stretch's window over a checkpoint),
        which otherwise breaks every chain across it for three more occurrences: four intervals back, one place
        hidden, three like-sized occurrences, the odds of a chance grid over them and every hidden place tried."""
        for first, last in self._hidden:
            for k in (1, 2, 3, 4):   # the hidden place is the k-th back
                for h in range(first, last + 1):
                    p, off = divmod(step - h, k)
                    if off or p < MIN_PERIOD:
                        continue
                    tol = 1 if p >= 10 else 0
                    picks = [(j, *max(near(step - j * p, tol) or [(None, 0)], key=lambda sd: sd[1]))
                             for j in (1, 2, 3, 4) if j != k]
                    sizes = (duration_ns, *(d for _, _, d in picks))
                    if any(s is None for _, s, _ in picks) or min(sizes) < SIZE_AGREE * max(sizes):
                        continue
                    # the period the three occurrences space out must bring this step and the hidden place too,
                    # each +-tol: not +-tol at every place (a slow step 3 short of a grid of 20 fits 19 so)
                    (j0, s0, _), (j1, s1, _) = picks[0], picks[-1]
                    est = (s0 - s1) / (j1 - j0)
                    if abs(s0 + j0 * est - step) > tol or not first - tol <= step - k * est <= last + tol:
                        continue
                    floor, start = SIZE_AGREE * max(sizes), step - 4 * p - tol
                    others = sum(1 for s, d in seen.items() if s >= start and d >= floor) - len(picks)
                    tried = len(seen) * 4 * (last - first + 1)   # each place of each hidden step is a try too
                    if tried * ((2 * tol + 1) * max(0, others) / (step - start)) ** 3 <= CHANCE:
                        return p
        return None

    def _rate(self) -> int:
        """The step time over the last RATE steps, slow ones included (a median: a stall among them is one of
        RATE), to tell whether a step period still holds."""
        r = sorted(self._ring[(self._n - k) % RING] for k in range(1, 1 + min(self._n, RATE)))
        return r[len(r) // 2]

    def _pace_ns(self) -> int:
        """The mean of the last PACE ordinary steps: the time a step to go takes, on average, now."""
        r = self._pace[:min(self._ordinary, PACE)]
        return sum(r) // len(r) if r else 0

    def _step_now(self) -> int:
        """The step time now: the median of the last RECENT ordinary steps."""
        r = sorted(self._recent[:min(self._n, RECENT)])
        return r[len(r) // 2]

    def _period_in_time(self, start_ns: int, duration_ns: int, now: int) -> int | None:
        """A period in time three intervals agree on (the start times: t - a == a - b == b - c within TIME_TOL
        steps), of occurrences of a like size, as _period in steps. Their mean, (t - c) / 3: each start is late by
        up to a step, the last interval alone can be a step off. A step here is the longer of the rolling median
        and the step time at each occurrence compared: on a busy machine, or once the steps slowed, a start is late
        by up to a step of that time, not of the median's."""
        med = self._median
        seen = [(t, d, w) for _, d, t, w in self._seen if 0 <= t < start_ns]
        for a, da, wa in sorted(seen, reverse=True):
            p = start_ns - a
            if p < MIN_TIME_PERIOD * med:
                continue
            for b, db, wb in seen:
                if abs(a - p - b) > TIME_TOL * max(med, now, wa, wb):
                    continue
                for c, dc, wc in seen:
                    sizes = (duration_ns, da, db, dc)
                    tol = TIME_TOL * max(med, now, wa, wb, wc)
                    if abs(b - p - c) > tol or min(sizes) < TIME_SIZE_AGREE * max(sizes):
                        continue
                    # the odds of a chance grid, as in steps: like-sized others over the span, 2 tol wide each
                    floor = TIME_SIZE_AGREE * max(sizes)
                    others = sum(1 for t, d, _ in seen if c <= t and t not in (a, b, c) and d >= floor)
                    if _beyond_chance(len(seen), 2 * tol * others / (start_ns - c),
                                      (abs(c - p - e) <= tol and min(sizes + (de,)) >= TIME_SIZE_AGREE * max(
                                          sizes + (de,)) for e, de, _ in seen)):
                        return (start_ns - c) // 3
        return None
