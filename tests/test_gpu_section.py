"""GPU section inputs without a GPU: kernel and copy tables from trace events, device memory per step from the
collector's `@mem` records (allocator counters, throttled), the >90%-of-capacity finding, the ranked actions."""
import json

from haiprof.analyzers import actions
from haiprof.analyzers import gpu_kernels as G
from haiprof.analyzers.kineto_reader import read_trace
from haiprof.collectors.phases import MEM_EVERY_NS, MEM_MARK, PhaseRecorder


def _trace(tmp_path, events):
    """The events as a trace file, read the one way a report reads it (its columns)."""
    p = tmp_path / f"trace{len(list(tmp_path.iterdir()))}.json"
    p.write_text(json.dumps({"traceEvents": events}))
    return read_trace(p).columns


def _ev(cat, name, dur, nbytes=None):
    e = {"ph": "X", "cat": cat, "name": name, "dur": dur, "ts": 0}
    if nbytes is not None:
        e["args"] = {"bytes": nbytes}
    return e


def test_kernels_and_copies_by_kind(tmp_path):
    events = [_ev("kernel", "void at::native::vectorized_elementwise_kernel<4, F>(int, F)", 10.0)] * 3 + [
        _ev("kernel", "sm80_xmma_gemm_f32f32_tn_n_execute_kernel__5x_cublas", 50.0),
        _ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 100.0, 800_000_000 // 1000),
        _ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 20.0, 500_000),
        _ev("gpu_memset", "Memset (Device)", 1.0, 64),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 1e6}]
    g = G.summarize(_trace(tmp_path, events), steps=2)
    assert g["top_kernels"][0]["name"] == "sm80_xmma_gemm_f32f32_tn_n_execute_kernel__5x_cublas"
    assert g["top_kernels"][1] == {**g["top_kernels"][1], "name": "vectorized_elementwise_kernel", "count": 3}
    kinds = {c["kind"]: c for c in g["copies"]}
    assert set(kinds) == {"HtoD pageable", "HtoD pinned", "memset"}
    assert abs(kinds["HtoD pageable"]["gb_per_s"] - 8.0) < 1e-9          # 800 kB in 100 µs
    assert abs(g["pageable_h2d_share"] - 100 / 201) < 1e-9
    assert G.summarize(_trace(tmp_path, [events[-1]])) is None


def test_mangled_and_anonymous_kernel_names():
    assert G.short_name("_ZN17cutlass__5x_cudnn6KernelINS_4convE") == "cutlass__5x_cudnn::Kernel"
    assert G.short_name("void at::native::(anonymous namespace)::reduce_kernel<512, 1>(R)") == "reduce_kernel"


class _FakeCuda:
    def __init__(self):
        self.calls = 0

    def memory_stats(self):
        self.calls += 1
        return {"allocated_bytes.all.current": 10, "allocated_bytes.all.peak": 20,
                "reserved_bytes.all.current": 30, "reserved_bytes.all.peak": 95}


def test_memory_marks_are_throttled_and_feed_per_step_memory():
    out = []
    rec = PhaseRecorder(out.append)
    rec._torch_cuda = _FakeCuda()
    for t in (0, MEM_EVERY_NS // 2, MEM_EVERY_NS, 3 * MEM_EVERY_NS):
        rec._memory_mark(t)
    assert [r[1] for r in out] == [0, MEM_EVERY_NS, 3 * MEM_EVERY_NS] and out[0][0] == MEM_MARK
    mem = G.memory_per_step([list(r) for r in out], [1, MEM_EVERY_NS + 1, 2 * MEM_EVERY_NS], capacity=100)
    assert [p["index"] for p in mem["per_step"]] == [0, 1]
    assert mem["peak_reserved_bytes"] == 95 and mem["peak_share_of_capacity"] == 0.95
    f = G.memory_finding(mem["peak_reserved_bytes"], 100, "allocator")
    assert f["kind"] == "memory" and "activation checkpointing" in f["message"]
    assert G.memory_finding(80, 100, "allocator") is None
    assert G.memory_per_step([["@step", 1, 1]], [1], 100) is None


def test_actions_rank_by_expected_gain_and_name_pinned_memory():
    summary = {"bottleneck": "io", "steps": 40, "step_time_s": {"steady": 0.030},
               "device": {"idle_by_host": {"dataloader": 0.5}, "busy": {"h2d": 0.3}},
               "gpu": {"pageable_h2d_share": 0.9, "copies": [{"kind": "HtoD pageable", "gb_per_s": 9.2}]},
               "findings": [
                   {"kind": "compute", "severity": "moderate", "share": 0.3, "message": "m", "fixes": ["amp"]},
                   {"kind": "io", "severity": "high", "share": 0.8, "message": "m", "fixes": ["prefetch"]},
                   {"kind": "energy", "severity": "info", "share": 0.0, "message": "m", "fixes": ["prefetch"]}]}
    acts = actions.rank(summary)
    assert [a["fix"] for a in acts] == ["prefetch", "amp"]
    assert "pin_memory" in acts[0]["title"] and "pageable" in acts[0]["reason"] and "9.2 GB/s" in acts[0]["reason"]
    assert abs(acts[0]["gain_s"] - 0.024) < 1e-9
    assert actions.rank({"bottleneck": "none", "steps": 1, "findings": summary["findings"]}) == []


def test_one_row_per_kernel_with_its_launching_op_and_tensor_cores(tmp_path):
    def k(name, dur, corr):
        return {"ph": "X", "cat": "kernel", "name": name, "dur": dur, "ts": 100, "args": {"correlation": corr}}

    def launch(ts, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "pid": 1, "tid": 7,
                "args": {"correlation": corr}}
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": 0, "dur": 100, "pid": 1, "tid": 7},
           {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": 10, "dur": 30, "pid": 1, "tid": 7},
           {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "ts": 50, "dur": 20, "pid": 1, "tid": 7}]
    events = ops + [launch(20, 1), launch(60, 2), launch(62, 3), launch(90, 4),
                    k("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 80.0, 1),
                    k("void at::native::vectorized_elementwise_kernel<4, A>(int, A)", 5.0, 2),
                    k("void at::native::vectorized_elementwise_kernel<4, B>(int, B)", 5.0, 3),
                    k("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_ffma_execute_kernel", 10.0, 4)]
    g = G.summarize(_trace(tmp_path, events), steps=1)
    rows = {r["name"]: r for r in g["top_kernels"]}
    ew = rows["vectorized_elementwise_kernel"]
    assert (ew["count"], ew["variants"], ew["launched_by"]) == (2, 2, "aten::relu")   # one row, innermost op
    gemm = rows["ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"]
    assert gemm["launched_by"] == "aten::addmm" and gemm["tensor_cores"]
    assert not rows["sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_ffma_execute_kernel"]["tensor_cores"]
    assert rows["sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_ffma_execute_kernel"]["launched_by"] == \
        "aten::linear"                                   # launched outside addmm/relu: the enclosing op
    assert abs(g["tensor_core_share"] - 0.8) < 1e-9
