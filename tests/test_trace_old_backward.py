"""Traces recorded by PyTorch 1.8/1.9 have no `autograd::engine::evaluate_function` wrapper: the autograd nodes
(`CudnnConvolutionBackward`, `torch::autograd::AccumulateGrad`, ...) run bare on the engine's thread. Their backward
must still be backward, on the host and on the device, without changing what today's traces read.

The recorded case: two ResNet-50 training traces from the PyTorch profiler's TensorBoard plugin samples (the
project's shared/peer-traces/tb_plugin, beside the repository; README there). By kernel time their backward is about
twice their forward."""
import json
import os
from pathlib import Path

import pytest

from conftest import REPO, load_summary, run_haiprof
from haiprof.analyzers import trace_breakdown as TB
from haiprof.analyzers import trace_phases as TP
from haiprof.analyzers.kineto_reader import read_trace

PEER_TRACES = Path(os.environ.get("HAIPROF_PEER_TRACES", REPO.parent / "shared" / "peer-traces"))
TB_PLUGIN = PEER_TRACES / "tb_plugin"
OLD_TRACES = sorted(TB_PLUGIN.glob("resnet50_num_workers_*/*.pt.trace.json.gz")) if TB_PLUGIN.is_dir() else []


def _trace(tmp_path, wrapped: bool, engine_tid: int = 2, device: bool = True):
    """Four steps: forward on the main thread, then backward (two nodes; wrapped in evaluate_function as today's
    PyTorch records it, or bare as 1.8/1.9 did) on `engine_tid`, then the optimizer step."""
    ev, corr = [], [0]

    def op(name, ts, dur, tid=1, cat="cpu_op"):
        ev.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid})

    def kernel(ts, tid, dur=50):
        if not device:
            return
        corr[0] += 1
        ev.append({"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "ts": ts - 10, "dur": 5,
                   "pid": 1, "tid": tid, "args": {"correlation": corr[0]}})
        ev.append({"ph": "X", "cat": "Kernel", "name": "gemm_kernel", "ts": ts, "dur": dur, "pid": 0,
                   "tid": "stream 7", "args": {"correlation": corr[0], "stream": 7, "device": 0}})

    def node(name, ts, dur):
        if wrapped:
            op(f"autograd::engine::evaluate_function: {name}", ts, dur, tid=engine_tid)
        op(name, ts, dur, tid=engine_tid)

    for k, t in enumerate((0, 1000, 2000, 3000)):
        op(f"ProfilerStep#{k}", t, 1000, cat="Operator")
        op("aten::linear", t + 40, 200)
        kernel(t + 60, tid=1)
        node("AddmmBackward" if not wrapped else "AddmmBackward0", t + 300, 150)
        op("aten::mm", t + 310, 100, tid=engine_tid)
        kernel(t + 320, tid=engine_tid)
        kernel(t + 420, tid=engine_tid)
        node("torch::autograd::AccumulateGrad", t + 500, 100)
        op("Optimizer.step#SGD.step", t + 700, 200, cat="Operator")
        kernel(t + 720, tid=1)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0}] if device else []}))
    return read_trace(path)


def _spans(recs) -> dict:
    out = {}
    for name, a, b in recs:
        out[name] = out.get(name, 0) + (b - a)
    return out


@pytest.mark.parametrize("wrapped", [False, True], ids=["pytorch-1.8", "today"])
def test_bare_autograd_nodes_are_backward_like_wrapped_ones(tmp_path, wrapped):
    td = _trace(tmp_path, wrapped)
    recs, _ = TP.phase_records(td, TB.device_events(td, 0, filter_last_step=False))
    spans = _spans(recs)
    us = 1000   # records are ns
    assert spans["backward"] == 4 * 300 * us                   # first node to the end of the last, per step
    assert spans["gpu:backward"] == 2 * spans["gpu:forward"] == 2 * 4 * 50 * us
    assert spans["gpu:optimizer"] == spans["gpu:forward"]
    assert [r for r in recs if r[0] == "forward"][0][1:] == [0, 300 * us]   # forward ends where backward begins


def test_bare_nodes_on_the_main_thread_give_the_host_backward(tmp_path):
    """CPU training: the engine runs the nodes on the calling thread, the one with the ProfilerSteps."""
    td = _trace(tmp_path, wrapped=False, engine_tid=1, device=False)
    recs, _ = TP.phase_records(td, None)
    assert _spans(recs)["backward"] == 4 * 300 * 1000
    assert TP._autograd_threads(td.events) == set()


@pytest.mark.skipif(not OLD_TRACES, reason=f"no TensorBoard plugin sample traces at {TB_PLUGIN}")
@pytest.mark.parametrize("path", OLD_TRACES, ids=[p.parent.name for p in OLD_TRACES])
def test_old_resnet50_traces_split_backward_over_forward_over_optimizer(tmp_path, path):
    out = tmp_path / "run"
    r = run_haiprof("analyze", "--quiet", "--out", out, path, timeout=300)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    share, busy = s["phase_share"], s["device"]["busy"]
    assert share["backward"] > share["forward"] > share["optimizer"] > 0, share
    assert busy["backward"] > busy["forward"] > busy["optimizer"] > 0, busy
    # the README's kernel-time reference: ResNet-50's backward is about twice its forward on the device
    assert 1.5 < busy["backward"] / busy["forward"] < 2.5, busy
