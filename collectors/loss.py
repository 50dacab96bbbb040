"""Loss collector: the value of each scalar passed to backward, for the fix correctness guard.

The scalar a script calls backward() on is its loss. A plain CPU loss is read as a float there and then (it is
already computed); a device's loss (or a tensor subclass's) is kept as a detached copy, since reading it would wait
for the device. `drain()`, on the flush thread twice a second, appends the floats to a text file (one value a line),
so a run killed with SIGKILL keeps its losses and memory stays flat over a long run; CUDA losses stay tensors until
the run ends (converting them earlier would sync the device from another thread). Read-only: the loss itself is
untouched.
"""
from __future__ import annotations

import functools
import math
import os

MAX_LOSSES = 100_000


class LossRecorder:
    def __init__(self, max_losses: int = MAX_LOSSES, stream_path=None):
        self.max_losses = max_losses
        self._values: list = []
        self._undo = None
        self._owner_pid = os.getpid()
        self.dropped = 0
        self._stream_path = stream_path   # losses as they are known, for a run that is killed
        self._stream = None               # its descriptor (OwnedFd: the script may close descriptors it did not open)
        self._streamed = 0                # values[:_streamed] are floats already in the file

    def install(self) -> "LossRecorder":
        import torch
        original = torch.autograd.backward

        @functools.wraps(original)
        def backward(tensors, *args, **kwargs):
            if os.getpid() == self._owner_pid and isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
                if len(self._values) >= self.max_losses:
                    self.dropped += 1
                elif type(tensors) is torch.Tensor and tensors.is_cpu and tensors.is_floating_point():
                    # a plain CPU loss is already computed: its float now (under 1 us) costs less than a copy, and
                    # leaves the flush thread no torch op to run (each hands the GIL to and from this thread)
                    value = tensors.detach().item()
                    self._values.append(value if math.isfinite(value) else None)
                else:   # a device's loss is copied, not read: reading it would wait for the device
                    self._values.append(tensors.detach().reshape(()).clone())
            return original(tensors, *args, **kwargs)

        torch.autograd.backward = backward
        self._undo = lambda: setattr(torch.autograd, "backward", original)
        return self

    def uninstall(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    @staticmethod
    def _as_float(t):
        if isinstance(t, float) or t is None:
            return t
        try:
            v = float(t.float().cpu())
        except Exception:   # a tensor from a torn-down device: say so in place of the value
            return None
        return v if math.isfinite(v) else None

    def drain(self) -> None:
        """Turn the leading CPU losses into floats and append them to the stream file (the flush thread; never
        raises). A CUDA loss stops the walk: it and those after it wait for the end of the run."""
        if os.getpid() != self._owner_pid:
            return
        values, start = self._values, self._streamed
        end = start
        n = len(values)
        while end < n:
            t = values[end]
            if not isinstance(t, float) and t is not None and getattr(t, "is_cpu", True) is False:
                break
            values[end] = self._as_float(t)
            end += 1
        if end > start:
            self._streamed = end
            if self._stream_path is not None:
                # one value a line, the line number its index; 8 significant digits (a float32 loss has ~7):
                # ~10 bytes a step
                text = "".join("nan\n" if values[i] is None else f"{values[i]:.8g}\n" for i in range(start, end))
                try:
                    if self._stream is None:
                        from haiprof.rundir.appenders import OwnedFd
                        self._stream = OwnedFd(self._stream_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                    self._stream.append(text.encode("ascii"))
                except OSError:
                    self._stream_path = None   # a full disk: losses.json at the end still has them
        if self._undo is None and self._stream is not None:   # uninstalled: nothing more will come
            try:
                self._stream.close()
            except OSError:
                pass
            self._stream = None

    def values(self) -> list:
        """Losses as floats (NaN/inf become None, JSON has no such numbers)."""
        return [self._as_float(t) for t in self._values]
