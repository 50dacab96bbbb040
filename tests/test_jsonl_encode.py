"""JsonlAppender.encode: the direct formatting of phase records is byte-for-byte json.dumps's output."""
import json

from haiprof.rundir import JsonlAppender, read_jsonl


def test_fast_path_matches_json_dumps_and_round_trips(tmp_path):
    app = JsonlAppender(tmp_path / "phases.jsonl")
    records = [("gpu:forward", 514619881175, 514619904059), ("@step", 1, 1), ("fwd", 0, -1),
               ('odd "name"\\\n', 2, 3), ("ünïcode", 4, 5),
               # not the fast path: other shapes and types keep json.dumps
               ("@loader", 1, 1, 4, True), ("x", True, 2), ("x", 1.5, 2), ["list", 1, 2], {"a": 1}, (1, 2, 3)]
    for r in records:
        assert app.encode(r) == json.dumps(r, separators=(",", ":"), default=str), r
        app.append(r)
    app.close()
    back = read_jsonl(tmp_path / "phases.jsonl")
    assert back == [list(r) if isinstance(r, (tuple, list)) else r for r in records]
