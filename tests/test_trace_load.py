"""windows.load_trace parses a trace with orjson and falls back to json for what orjson refuses, so every trace
reads as it did with json alone; what json could not read is still None."""
from __future__ import annotations

import gzip
import json

from haiprof.analysis.windows import load_trace

TRACE = {"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1.5, "dur": 2, "args": {"Input Dims": [[2, 3]]}},
                         {"ph": "i", "name": "marker é", "ts": 10, "s": "t"}], "displayTimeUnit": "ms"}


def test_plain_and_gzipped_traces_read_as_json_reads_them(tmp_path):
    text = json.dumps(TRACE)
    (tmp_path / "t.json").write_text(text, encoding="utf-8")
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text.encode()))
    assert load_trace(tmp_path / "t.json") == TRACE == load_trace(tmp_path / "t.json.gz")


def test_what_only_json_reads_is_read_by_json(tmp_path):
    text = '{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 18446744073709551617}]}'   # orjson refuses both
    (tmp_path / "t.json").write_text(text)
    (event,) = load_trace(tmp_path / "t.json")["traceEvents"]
    assert event["dur"] == 18446744073709551617 and event["ts"] != event["ts"]


def test_unreadable_traces_are_none(tmp_path):
    whole = gzip.compress(json.dumps(TRACE).encode())
    (tmp_path / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "bad.json").write_bytes(b'{"traceEvents": [\xff\xfe]}')
    (tmp_path / "short.json").write_text('{"traceEvents": [{"ph": "X"')
    for name in ("cut.json.gz", "bad.json", "short.json", "missing.json"):
        assert load_trace(tmp_path / name) is None, name
