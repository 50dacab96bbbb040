"""prefetch on CUDA: copy the next batch to the GPU on a side stream while the current step computes.

The script still calls `batch.to("cuda")` itself; once a batch is already on the device that call is a no-op.
To never change what the script sees, the prefetcher first watches one batch: only if the script moves every
tensor of it to the same CUDA device does it start handing out batches already on that device.
"""
from __future__ import annotations

from .base import FixContext


def _tensors(obj, torch, out: list) -> list:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, torch, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, torch, out)
    return out


def _to_device(obj, torch, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_device(x, torch, device) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, torch, device) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v, torch, device)) for k, v in obj.items())
    return obj


class _Watch:
    """Which CUDA device the script copies the watched batch's tensors to (None until all of them went)."""

    def __init__(self, tensors):
        self.pending = {id(t) for t in tensors}
        self.devices: set = set()

    def saw(self, tensor, result) -> None:
        if id(tensor) in self.pending and getattr(result, "is_cuda", False):
            self.pending.discard(id(tensor))
            self.devices.add(result.device)

    def device(self):
        return next(iter(self.devices)) if not self.pending and len(self.devices) == 1 else None


class DevicePrefetchIter:
    def __init__(self, inner, torch, state, watches: list):
        self._inner, self._torch, self._state, self._watches = inner, torch, state, watches
        self._device = None
        self._stream = None
        self._ready = None        # the next batch, already copied (or being copied) on the side stream
        self._watch = None

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._inner)

    def __getattr__(self, name):   # anything else the script reads from its iterator
        return getattr(self._inner, name)

    def _prepare(self):
        try:
            cpu_batch = next(self._inner)
        except StopIteration:
            self._ready = None
            return
        with self._torch.cuda.stream(self._stream):
            self._ready = _to_device(cpu_batch, self._torch, self._device)

    def __next__(self):
        torch = self._torch
        if self._device is None:
            if self._watch is not None:
                self._watches.remove(self._watch)
                self._device = self._watch.device()
                self._watch = None
                if self._device is not None:
                    self._stream = torch.cuda.Stream(device=self._device)
                    self._state.applied("DataLoader", f"device prefetcher: next batch copied to {self._device} "
                                        "on a side stream, overlapping compute")
                    self._prepare()
            if self._device is None:
                batch = next(self._inner)
                if not self._state.details.get("device_watch_done"):
                    self._watch = _Watch(_tensors(batch, torch, []))
                    self._watches.append(self._watch)
                    self._state.details["device_watch_done"] = True
                return batch
        if self._ready is None:
            raise StopIteration
        batch = self._ready
        torch.cuda.current_stream(self._device).wait_stream(self._stream)
        for t in _tensors(batch, torch, []):
            t.record_stream(torch.cuda.current_stream(self._device))
        self._prepare()
        return batch


def install(ctx: FixContext) -> None:
    import torch
    from torch.utils.data import DataLoader

    watches: list = []
    original_iter = DataLoader.__iter__
    original_to, original_cuda = torch.Tensor.to, torch.Tensor.cuda

    def to(self, *args, **kwargs):
        out = original_to(self, *args, **kwargs)
        for w in watches:
            w.saw(self, out)
        return out

    def cuda(self, *args, **kwargs):
        out = original_cuda(self, *args, **kwargs)
        for w in watches:
            w.saw(self, out)
        return out

    def patched_iter(self):
        it = original_iter(self)
        if not ctx.in_main_process() or not torch.cuda.is_available():
            return it
        return DevicePrefetchIter(it, torch, ctx.state, watches)

    ctx.patch(DataLoader, "__iter__", patched_iter)
    ctx.patch(torch.Tensor, "to", to)
    ctx.patch(torch.Tensor, "cuda", cuda)
