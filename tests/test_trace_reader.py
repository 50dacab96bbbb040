"""The Kineto reader: formats, legacy names, truncation, bad input (real HTA test traces, and files cut from them)."""
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haiprof.analyzers import json_stream, trace_columns
from haiprof.analyzers.kineto_reader import NotAProfilerTrace, TraceError, read_trace

DATA = Path(__file__).parent / "data" / "hta"
NS_TRACE = DATA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
SMALL = DATA / "trace_filter" / "sampled_rank-1.json.gz"


def test_columns_and_contract():
    td = read_trace(SMALL)
    ev = td.events
    for col in ("name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "stream", "correlation"):
        assert col in ev.columns
    assert ev["ts_us"].dtype == np.float64 and ev["dur_us"].dtype == np.float64
    assert isinstance(ev["name"].dtype, pd.CategoricalDtype)
    assert td.rank == 1 and not td.truncated
    assert td.metadata["distributedInfo"]["world_size"] == 128
    assert set(ev["ph"].unique()) <= {"X", "i", "I"}


def test_legacy_category_names_are_normalised():
    td = read_trace(DATA / "trace_file_list" / "inference_rank_1.json.gz")
    cats = set(td.events["cat"].unique())
    assert "kernel" in cats and "cuda_runtime" in cats
    assert not cats & {"Kernel", "Runtime"}


def test_ns_resolution_trace_keeps_microseconds():
    td = read_trace(NS_TRACE)
    assert td.ts_float and td.metadata["display_time_unit"] == "ns"
    steps = td.events[td.events["name"].astype(str).str.startswith("ProfilerStep#")]
    # ProfilerStep durations of this DDP ResNet are tens of milliseconds: the values are µs, not ns
    assert 10_000 < steps["dur_us"].median() < 200_000


def test_missing_rank_amd_and_mtia():
    assert read_trace(DATA / "rank_unavailable" / "rank_not_found.json.gz").rank is None
    assert read_trace(DATA / "distributed_info_unavailable" / "distributed_info_not_found.json.gz").rank is None
    assert read_trace(DATA / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz").device_type == "rocm"
    mtia = read_trace(DATA / "mtia_inference_trace" / "mtia_inference_rank_0.json.gz")
    assert mtia.device_type == "mtia" and (mtia.events["cat"] == "mtia_ccp_events").any()


def test_plain_and_gzip_give_the_same_frame(tmp_path):
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(SMALL.read_bytes()))
    pd.testing.assert_frame_equal(read_trace(plain).events, read_trace(SMALL).events)


def test_batch_cutting_is_exact_with_tiny_chunks(tmp_path, monkeypatch):
    """Many chunk boundaries, a name containing '},' and nested objects: same rows as one big read."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f'op}},{{"x{i}', "pid": 1, "tid": 2, "ts": i, "dur": 1,
               "args": {"nested": [{"a": 1}, {"b": 2}], "correlation": i}} for i in range(300)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    whole = read_trace(p).events
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 97)
    monkeypatch.setattr(trace_columns, "WHOLE_FILE_MAX_BYTES", 0)   # stream it, even though it is small
    small = read_trace(p)
    pd.testing.assert_frame_equal(small.events, whole)
    assert len(whole) == 300 and whole["name"].iloc[7] == 'op},{"x7'
    assert list(whole["correlation"][:3]) == [0, 1, 2] and small.metadata["displayTimeUnit"] == "ms"


def test_truncated_json_keeps_the_readable_prefix(tmp_path):
    raw = gzip.decompress(SMALL.read_bytes())
    full = read_trace(SMALL).events
    p = tmp_path / "cut.json"
    p.write_bytes(raw[: int(len(raw) * 0.6)])
    td = read_trace(p)
    assert td.truncated and "truncated" in td.truncation_reason
    assert 0 < len(td.events) < len(full)
    n = len(td.events)
    assert list(td.events["ts_us"]) == list(full["ts_us"][:n])


def test_truncated_gzip_keeps_the_readable_prefix(tmp_path):
    data = SMALL.read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    td = read_trace(p)
    assert td.truncated and len(td.events) > 0


@pytest.mark.parametrize("content, kind, words", [
    (b"", TraceError, "empty file"),
    (b"   \n", TraceError, "empty file"),
    (b'{"schemaVersion": 1, "deviceProperties": []}', NotAProfilerTrace, "not a PyTorch profiler trace"),
    (b"[[-1, 1, 37888, 7]]", NotAProfilerTrace, "not a PyTorch profiler trace"),
    (b"hello", NotAProfilerTrace, "not JSON"),
    (b'{"traceEvents": [{"ph": "X", "na', TraceError, "no complete event"),
    (gzip.compress(b'{"traceEvents": [', mtime=0)[:12], TraceError, "compressed stream"),
])
def test_bad_input_is_one_clear_error(tmp_path, content, kind, words):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(kind) as e:
        read_trace(p)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_non_kineto_files_from_the_peer_suite():
    for f in (DATA / "memory_analysis" / "memory_timeline.raw.gz",
              DATA / "execution_trace" / "benchmark_simple_add_et.json.gz"):
        with pytest.raises(NotAProfilerTrace, match="not a PyTorch profiler trace"):
            read_trace(f)


_VALID = json.dumps({"distributedInfo": {"rank": 3}, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2,
     "args": {"stream": 7, "correlation": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 9, "dur": 1,
     "args": {"correlation": 5}},
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]}).encode()
_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                        max_size=4), max_leaves=12)
_event = st.dictionaries(st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]), _json_values)


def _check(tmp_path, data: bytes):
    p = tmp_path / "fuzz.json"
    p.write_bytes(data)
    try:
        td = read_trace(p)
    except TraceError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert {"name", "ts_us", "dur_us"} <= set(td.events.columns)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(_VALID)), flip=st.integers(0, len(_VALID) - 1), byte=st.integers(0, 255),
       gz=st.booleans())
def test_fuzz_mutated_and_cut_traces(tmp_path, cut, flip, byte, gz):
    data = bytearray(_VALID)
    data[flip] = byte
    data = bytes(data[:cut])
    _check(tmp_path, gzip.compress(data)[: max(1, cut // 2)] if gz else data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(top=st.dictionaries(st.text(max_size=12), _json_values, max_size=3),
       events=st.one_of(st.lists(_event, max_size=6), _json_values))
def test_fuzz_odd_structures(tmp_path, top, events):
    top = dict(top)
    top["traceEvents"] = events
    _check(tmp_path, json.dumps(top).encode())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(tmp_path, data):
    _check(tmp_path, data)


def test_a_window_trace_is_read_whole_or_not_at_all(tmp_path):
    """windows.load_trace (the report's one JSON parse of a window's trace): orjson's parse, Python's json where
    orjson refuses what it takes (a NaN from a profiler's counter), None for a file cut short or not gzip."""
    from haiprof.analysis.windows import load_trace, read_events
    ev = {"ph": "X", "name": "aten::mm", "ts": 1.0, "dur": 2.5, "args": {"x": "µ"}}
    good = tmp_path / "a.json.gz"
    good.write_bytes(gzip.compress(json.dumps({"traceEvents": [ev]}).encode()))
    assert read_events(good) == [ev]
    nan = tmp_path / "nan.json"
    nan.write_text('{"traceEvents": [{"ph": "C", "name": "util", "args": {"v": NaN}}]}')
    assert math.isnan(load_trace(nan)["traceEvents"][0]["args"]["v"])
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(good.read_bytes()[:-12])
    assert load_trace(cut) is None
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 40)
    assert load_trace(bad) is None and load_trace(tmp_path / "missing.json") is None
    (tmp_path / "text.json").write_text('{"traceEvents": [')
    assert load_trace(tmp_path / "text.json") is None and read_events(tmp_path / "text.json") is None
