"""Whole-run findings on real runs of examples/long_run_shapes.py under `haiprof run`: drift, a stall every 50
steps, a leak: each gets its finding and no other whole-run finding; the steady run gets none."""
import pytest

from conftest import EXAMPLES, load_summary, run_haiprof

WHOLE_RUN = {"drift", "periodic-stall", "memory-creep"}


@pytest.mark.parametrize("shape,expected", [("steady", set()), ("drift", {"drift"}), ("stall", {"periodic-stall"}),
                                            ("leak", {"memory-creep"})])
def test_each_shape_gets_its_finding(tmp_path, shape, expected):
    out = tmp_path / shape
    r = run_haiprof("run", "--quiet", "--sample-interval", "0.05", "--out", out,
                    EXAMPLES / "long_run_shapes.py", "--shape", shape, timeout=300)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    found = {f["kind"] for f in s["findings"] if f["kind"] in WHOLE_RUN}
    # A leak also slows the steps as the heap grows, and pauses them (allocations, the garbage collector): a
    # drift or stalls beside it are true, and allowed; on the other shapes nothing else is.
    allowed = {"drift", "periodic-stall"} if shape == "leak" else set()
    assert expected <= found <= expected | allowed, [f["message"] for f in s["findings"]]
    slowest = s["slowest_steps"]
    assert len(slowest) == 20 and all(a["time_ms"] >= b["time_ms"] for a, b in zip(slowest, slowest[1:]))
    if shape == "stall":
        f = next(f for f in s["findings"] if f["kind"] == "periodic-stall")
        assert f["evidence"]["period_steps"] == 50 and "outside the training phases" in f["message"]
        top = sorted(row["step"] for row in slowest[:f["evidence"]["stalls"]])
        assert all(b - a == 50 for a, b in zip(top, top[1:]))   # the slowest steps are the checkpoints
        page = (out / "report.html").read_text()
        assert 'id="slowest"' in page and f'data-step="{slowest[0]["step"]}"' in page
