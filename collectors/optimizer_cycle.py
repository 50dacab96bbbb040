"""Which optimizer step ends a training step.

One optimizer: each of its steps. Several stepping in one iteration (a GAN's discriminator and generator, Muon
beside AdamW for the other parameters, WGAN's five critic steps per generator step): a training step is the
whole cycle, or haiprof counted twice the steps at half the step time the script's own clock sees. The step ends
at the step of the optimizer that first stepped last among those that stepped recently: the one that closes the
cycle (G after D; the generator after its critics). An optimizer that steps once and never again (a calibration)
stops counting after WINDOW optimizer steps, so it can merge at most that many into one step.
"""
from __future__ import annotations

import collections
import weakref

WINDOW = 16   # optimizer steps: longer than any cycle (WGAN's 5 critic steps + 1 of the generator)


class OptimizerCycle:
    def __init__(self, window: int = WINDOW):
        self._order: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # optimizer -> when first stepped
        self._next = 0
        self._recent: collections.deque = collections.deque(maxlen=window)
        self._count: collections.Counter = collections.Counter()

    def ends_step(self, optimizer) -> bool:
        try:
            order = self._order.get(optimizer)
            if order is None:
                order = self._order[optimizer] = self._next
                self._next += 1
        except TypeError:   # not weak-referenceable or not hashable: each of its steps ends one, as for one optimizer
            return True
        if len(self._recent) == self._recent.maxlen:
            old = self._recent[0]
            self._count[old] -= 1
            if not self._count[old]:
                del self._count[old]
        self._recent.append(order)
        self._count[order] += 1
        return order == max(self._count)
