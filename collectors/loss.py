"""Loss collector: the value of each scalar passed to backward, for the fix correctness guard.

The scalar a script calls backward() on is its loss. Values are kept as detached tensors (no device sync in the
training loop) and converted to floats once, when the run ends. Read-only: the loss itself is untouched.
"""
from __future__ import annotations

import functools
import math
import os

MAX_LOSSES = 100_000


class LossRecorder:
    def __init__(self, max_losses: int = MAX_LOSSES):
        self.max_losses = max_losses
        self._values: list = []
        self._undo = None
        self._owner_pid = os.getpid()
        self.dropped = 0

    def install(self) -> "LossRecorder":
        import torch
        original = torch.autograd.backward

        @functools.wraps(original)
        def backward(tensors, *args, **kwargs):
            if os.getpid() == self._owner_pid and isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
                if len(self._values) < self.max_losses:
                    self._values.append(tensors.detach().reshape(()).clone())
                else:
                    self.dropped += 1
            return original(tensors, *args, **kwargs)

        torch.autograd.backward = backward
        self._undo = lambda: setattr(torch.autograd, "backward", original)
        return self

    def uninstall(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    def values(self) -> list:
        """Losses as floats (NaN/inf become None, JSON has no such numbers)."""
        out = []
        for t in self._values:
            try:
                v = float(t.float().cpu())
            except Exception:   # a tensor from a torn-down device: say so in place of the value
                v = None
            out.append(v if v is not None and math.isfinite(v) else None)
        return out
