"""The loss recorder (collectors/loss.py): a CPU loss is read as a float in the backward call itself, so the flush
thread runs no torch op for it (each op there hands the GIL to and from the training thread: it cost the fast
benchmark workload ~1.7% a step, benchmarks/component_cost.py); a device or subclass loss is still copied."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from haiprof.collectors.loss import LossRecorder


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def recorder(tmp_path):
    rec = LossRecorder(stream_path=tmp_path / "losses.stream").install()
    yield rec
    rec.uninstall()


def _step(w, scale=1.0):
    loss = (w * scale).pow(2).sum()
    loss.backward()
    return loss


def test_cpu_loss_is_a_float_at_backward_and_drained_without_torch_ops(recorder, tmp_path):
    w = torch.ones(4, requires_grad=True)
    losses = [_step(w, s) for s in (1.0, 2.0, 3.0)]
    assert recorder._values == [4.0, 16.0, 36.0]   # floats already: no tensor kept, nothing left to convert
    losses[0].detach().mul_(100)                   # the script changing its loss afterwards changes nothing here
    with OpLog() as log:
        recorder.drain()
    assert log.ops == []
    assert (tmp_path / "losses.stream").read_text().split() == ["4", "16", "36"]
    assert recorder.values() == [4.0, 16.0, 36.0]


def test_non_finite_cpu_loss_is_none(recorder):
    w = torch.tensor([float("inf")], requires_grad=True)
    _step(w)
    assert recorder.values() == [None]


def test_subclass_and_integer_like_losses_keep_the_copy(recorder):
    class Tagged(torch.Tensor):
        pass

    w = torch.ones(2, requires_grad=True)
    loss = (w * 3).sum().as_subclass(Tagged)
    loss.backward()
    kept = recorder._values[-1]
    assert isinstance(kept, torch.Tensor)   # a subclass's item() may do work of its own (a DTensor's: a collective)
    recorder.drain()
    assert recorder.values() == [6.0]
    assert not any(isinstance(v, torch.Tensor) for v in recorder._values)
