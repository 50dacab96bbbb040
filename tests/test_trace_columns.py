"""The two parse paths of the trace reader (fixed-field records, plain dicts) give the same columns, and the
load + temporal breakdown path stays free of pandas (its import is a large part of the time on real traces)."""
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pytest

from haiprof.analyzers import trace_columns
from haiprof.analyzers.kineto_reader import read_trace

DATA = Path(__file__).parent / "data" / "hta"
TRACES = [DATA / "trace_filter" / "sampled_rank-1.json.gz",
          DATA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
          DATA / "trace_file_list" / "inference_rank_1.json.gz"]


def _no_record(text):
    raise msgspec.ValidationError("every batch takes the dict path")


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_whole_file_streamed_records_and_dicts_agree(path, monkeypatch):
    whole = read_trace(path)                                # one msgspec call over the whole file
    monkeypatch.setattr(trace_columns, "WHOLE_FILE_MAX_BYTES", 0)
    streamed = read_trace(path)                             # batches of records
    monkeypatch.setattr(trace_columns, "_typed", _no_record)
    dicts = read_trace(path)                                # batches of orjson dicts
    for other in (streamed, dicts):
        # string pids/tids get negative ids in the order met, which depends on the batching: compare the strings
        a, b = whole.events.copy(), other.events.copy()
        for frame, td in ((a, whole), (b, other)):
            names = {v: k for k, v in td.metadata["string_ids"].items()}
            for col in ("pid", "tid"):
                frame[col] = [names.get(v, v) for v in frame[col]]
        pd.testing.assert_frame_equal(a, b)
        assert whole.ts_float == other.ts_float and whole.rank == other.rank
        assert set(whole.metadata["string_ids"]) == set(other.metadata["string_ids"])
        for key in ("process_names", "thread_names", "skipped_events", "gzipped",
                    "distributedInfo", "device_type"):
            assert whole.metadata.get(key) == other.metadata.get(key), key


def test_event_that_does_not_fit_the_record_falls_back(tmp_path):
    """`args` as a list, a number among the events, a string pid: rows still come out, nothing crashes."""
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
               "args": {"stream": 7, "correlation": 1, "External id": 3}},
              {"ph": "X", "cat": "cpu_op", "name": "op", "pid": "Spans", "tid": 1, "ts": 8.5, "dur": 1,
               "args": ["not", "an", "object"]},
              42,
              {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    assert isinstance(trace_columns.decode_batch(json.dumps(events))[0], dict)
    td = read_trace(p)
    cols = td.columns.arrays
    assert len(td.columns) == 2 and td.ts_float
    assert list(cols["stream"]) == [7, -1] and list(cols["external_id"]) == [3, -1]
    assert cols["pid"][1] < -1 and td.metadata["string_ids"] == {"Spans": int(cols["pid"][1])}
    assert td.metadata["process_names"] == {"0": "GPU 0"}
    assert td.metadata["skipped_events"] == {"not an object": 1, "M": 1}
    assert np.isclose(cols["ts_us"], [10, 8.5]).all()


def test_load_and_temporal_breakdown_do_not_import_pandas():
    code = ("import sys\n"
            "from haiprof.analyzers.kineto_reader import read_trace\n"
            "from haiprof.analyzers import trace_breakdown as B\n"
            f"td = read_trace({str(TRACES[0])!r})\n"
            "B.temporal_breakdown(B.analyse_ranks({0: td})[0])\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
