"""Kernels launched from the autograd engine's thread belong to backward, and a kernel launched inside a phase
belongs to that phase even when a shorter phase (zero_grad) began later and already ended."""
import json

from haiprof.analyzers import trace_breakdown as TB
from haiprof.analyzers import trace_phases as TP
from haiprof.analyzers.kineto_reader import read_trace


def _trace(tmp_path):
    ev, corr = [], [0]

    def op(name, ts, dur, tid=1, cat="cpu_op"):
        ev.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid})

    def kernel(ts, launch_ts, tid, dur=50):
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": launch_ts, "dur": 5,
                   "pid": 1, "tid": tid, "args": {"correlation": corr[0]}})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "ts": ts, "dur": dur, "pid": 0, "tid": 7,
                   "args": {"correlation": corr[0], "stream": 7, "device": 0}})

    for k, t in enumerate((0, 1000, 2000, 3000)):
        op(f"ProfilerStep#{k}", t, 1000, cat="user_annotation")
        op("Optimizer.zero_grad#SGD.zero_grad", t + 10, 20, cat="user_annotation")
        op("aten::linear", t + 40, 200)                       # forward on the main thread
        kernel(t + 60, t + 50, tid=1)
        op("autograd::engine::evaluate_function: MmBackward0", t + 300, 300, tid=2)   # the engine's thread
        kernel(t + 320, t + 310, tid=2)
        kernel(t + 420, t + 410, tid=2)
        op("Optimizer.step#SGD.step", t + 700, 200, cat="user_annotation")
        kernel(t + 720, t + 710, tid=1)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0}]}))
    return read_trace(path)


def test_engine_thread_kernels_are_backward_and_forward_is_not_zero_grad(tmp_path):
    td = _trace(tmp_path)
    dev = TB.device_events(td, 0, filter_last_step=False)
    recs, _ = TP.phase_records(td, dev)
    gpu = [r for r in recs if r[0].startswith("gpu:")]
    by_phase = {}
    for name, a, b in gpu:
        by_phase[name] = by_phase.get(name, 0) + (b - a)
    assert by_phase["gpu:backward"] == 2 * by_phase["gpu:forward"] > 0       # two engine kernels per step
    assert by_phase["gpu:optimizer"] == by_phase["gpu:forward"]             # only the optimizer step's own kernel
