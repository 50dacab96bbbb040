"""What a copy of the user's model leaves out. haiprof puts things on the user's modules (the phase collector's
hooks on the root modules, the compile fix's compiled forward); copy.deepcopy, pickle and torch.save(model) must
not take them along (they hold haiprof's state, or do not pickle). One wrapper of nn.Module.__getstate__ per
user of this, each with its own change to the state; the undo restores the previous one."""
from __future__ import annotations

from typing import Callable


def leave_out_of_copies(transform: Callable[[dict], dict]) -> Callable[[], None]:
    """Copies of every module get transform(state) as their state from now on; returns the undo."""
    import torch.nn as nn

    original = nn.Module.__getstate__

    def __getstate__(self):
        return transform(original(self))

    __getstate__.__haiprof_wrapped__ = original
    nn.Module.__getstate__ = __getstate__

    def undo():
        if nn.Module.__getstate__ is __getstate__:
            nn.Module.__getstate__ = original
    return undo
