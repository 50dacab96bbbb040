"""End to end: the two bundled input-bound variants get the right split, and the report explains what is missing."""
import json
from html import escape as esc

import pytest

from haiprof.analyzers.input_split import MIN_READ_RATE

from conftest import EXAMPLES, load_summary, run_haiprof


def _io(summary):
    io = [f for f in summary["findings"] if f["kind"] == "io"]
    assert io, summary["findings"]
    return io[0]


def _word(kind, split):
    """A storage wait with little local reading measured (tmpfs, a filesystem /proc/<pid>/io does not count) is
    named latency-bound: the word follows the read rate the run measured, not the machine the test runs on."""
    if kind != "storage":
        return kind
    rate = split.get("proc_read_bytes_per_s")
    rate = rate if rate is not None else split.get("disk_read_bytes_per_s")
    return "storage" if rate and rate >= MIN_READ_RATE else "latency"


@pytest.mark.slow
@pytest.mark.parametrize("example,kind", [("input_bound_storage.py", "storage"),
                                          ("input_bound_decode.py", "preprocessing")])
def test_split_on_bundled_examples(tmp_path, example, kind):
    out = tmp_path / "run"
    r = run_haiprof("run", "--quiet", "--out", out, EXAMPLES / example)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["bottleneck"] == "io", s["headline"]
    f = _io(s)
    assert f["evidence"]["input_bound"] == kind, json.dumps(f["evidence"]["input_split"])
    assert f["fixes"] == ["prefetch"] and f["recommendation"]
    word = _word(kind, f["evidence"]["input_split"])
    assert f"{word}-bound" in s["headline"]
    # every hardware collector is accounted for: available, or unavailable with a reason
    for name, st in s["hardware"]["collectors"].items():
        assert st["available"] or st["reason"], name
    html = (out / "report.html").read_text()
    assert 'id="hardware"' in html and f"<b>{kind}-bound</b>" in html
    if not s["hardware"]["collectors"]["gpu"]["available"]:   # named once in Hardware, its reason in Collectors
        assert "Not collected on this run: gpu" in html
        assert html.count(esc(s["hardware"]["collectors"]["gpu"]["reason"])) == 1
    if not s["energy"]["available"]:
        assert "energy (no power source)" in html
    samples = (out / "samples" / "storage.jsonl").read_text().splitlines()
    costs = [json.loads(x)["cost_ns"] for x in samples if x.strip()]
    assert costs and sorted(costs)[len(costs) // 2] < 50_000_000  # a diskstats sample costs well under 50 ms
