"""`haiprof analyze` end to end, as a real subprocess, on HTA's test traces and on broken files."""
import gzip
import json
import shutil
from pathlib import Path

import pytest

from conftest import in_parallel, load_summary, run_haiprof

DATA = Path(__file__).parent / "data" / "hta"
CONTRACT = ("schema_version", "bottleneck", "phase_share", "steps", "step_time_s", "exit_code", "findings")


def _check_contract(summary):
    for k in CONTRACT:
        assert k in summary
    assert summary["bottleneck"] in ("io", "compute", "launch", "communication", "none")
    assert abs(sum(summary["phase_share"].values()) - 1) <= 0.01
    for f in summary["findings"]:
        assert {"kind", "severity", "message", "evidence", "fixes"} <= set(f)
    # The analysis results are not mistaken for a tracing-window trace of a `haiprof run` directory.
    assert summary.get("launch") is None


def test_directory_of_rank_traces(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("analyze", DATA / "trace_filter", "--out", out)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    _check_contract(s)
    assert s["source"] == "trace" and set(s["trace"]["ranks"]) == {"0", "1"}
    tb = s["trace"]["ranks"]["1"]["temporal_breakdown"]
    assert tb["compute_time_pct"] == pytest.approx(22.57, abs=0.1)
    meta = json.loads((out / "meta.json").read_text())
    assert [t["rank"] for t in meta["traces"]] == [0, 1]
    html = (out / "report.html").read_text()
    assert 'id="trace-ranks"' in html and 'id="kernel-types"' in html
    assert "haiprof: report:" in r.stderr


def test_gpu_trace_verdict_and_report_rebuild(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("analyze", DATA / "nccl_parser_config" / "nccl_data.json.gz", "--out", out)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    _check_contract(s)
    # DDP ResNet: the GPU idles 78% of the span waiting for the host while most kernels outlast nothing
    assert s["bottleneck"] == "launch" and s["steps"] >= 2
    launch = [f for f in s["findings"] if f["kind"] == "launch"]
    assert len(launch) == 1 and launch[0]["evidence"]["timeline"] == "device" and launch[0]["share"] > 0.5
    assert s["device"]["idle_share"] > 0.5 and s["device"]["kernel_source"] == "kernels"
    r2 = run_haiprof("report", out, "--quiet")
    assert r2.returncode == 0, r2.stderr
    assert load_summary(out)["bottleneck"] == "launch"


def test_cpu_only_trace_says_no_gpu(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("analyze", DATA / "cpu_only", "--out", out)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    _check_contract(s)
    f = [f for f in s["findings"] if f["kind"] == "no-device"]
    assert f and "no GPU activity" in f[0]["message"] and "gloo:all_reduce" in f[0]["message"]
    assert s["trace"]["ranks"]["34"]["temporal_breakdown"] is None
    assert "No GPU activity" in (out / "report.html").read_text()


def test_truncated_trace_is_analysed_and_flagged(tmp_path):
    raw = gzip.decompress((DATA / "trace_filter" / "sampled_rank-0.json.gz").read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(raw[: int(len(raw) * 0.8)])
    r = run_haiprof("analyze", p, "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    s = load_summary(tmp_path / "run")
    assert any(f["kind"] == "truncated" for f in s["findings"])
    assert s["trace"]["ranks"]["0"]["truncated"] is True


def _bad(tmp_path, name, content):
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.mkdir()
    return p


@pytest.mark.parametrize("name, content, words", [
    ("empty.json", b"", "empty file"),
    ("cut.json.gz", gzip.compress(b'{"traceEvents": [{"ph": "X"}]}', mtime=0)[:15], "compressed stream"),
    ("cut.json", b'{"traceEvents": [{"ph": "X", "cat": "ke', "no complete event"),
    ("noevents.json", b'{"schemaVersion": 1}', "not a PyTorch profiler trace"),
    ("emptydir", None, "no PyTorch profiler traces"),
])
def test_bad_input_one_line_nonzero(tmp_path, name, content, words):
    p = _bad(tmp_path, name, content)
    r = run_haiprof("analyze", p, "--out", tmp_path / "run")
    assert r.returncode != 0
    assert words in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("haiprof: error:")


@pytest.mark.parametrize("rel", ["memory_analysis/memory_timeline.raw.gz",
                                 "execution_trace/benchmark_simple_add_et.json.gz"])
def test_non_kineto_files(tmp_path, rel):
    r = run_haiprof("analyze", DATA / rel, "--out", tmp_path / "run")
    assert r.returncode != 0 and "not a PyTorch profiler trace" in r.stderr and "Traceback" not in r.stderr


def test_directory_skips_non_traces_and_assigns_missing_ranks(tmp_path):
    d = tmp_path / "traces"
    d.mkdir()
    shutil.copy(DATA / "rank_unavailable" / "rank_not_found.json.gz", d / "a.json.gz")
    shutil.copy(DATA / "distributed_info_unavailable" / "distributed_info_not_found.json.gz", d / "b.json.gz")
    (d / "junk.json").write_text("[1, 2]")
    r = run_haiprof("analyze", d, "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    s = load_summary(tmp_path / "run")
    assert set(s["trace"]["ranks"]) == {"0", "1"}
    assert any("skipped" in n for n in s["trace"]["notes"]) and "analysed as rank" in r.stderr


def test_trace_inside_a_run_directory_is_judged_with_the_runs_steps(tmp_path, example_run):
    # One engine: `haiprof analyze RUN/trace.json.gz` analyses the trace together with the steps the run recorded
    # beside it, as `haiprof report RUN` does, so the two agree; --trace-only judges the traced steps alone.
    run, r = example_run("input_bound.py")   # conftest.example_run: a run of the bundled example, only read here
    assert r.returncode == 0, r.stderr
    ran = load_summary(run)
    assert (run / "trace.json.gz").is_file() and ran["traced_steps_excluded"] >= 1
    out, alone = tmp_path / "analyzed", tmp_path / "alone"
    r, r_alone = in_parallel(   # two independent analyses of the same trace, side by side
        lambda: run_haiprof("analyze", run / "trace.json.gz", "--out", out),
        lambda: run_haiprof("analyze", "--quiet", "--trace-only", run / "trace.json.gz", "--out", alone))
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["source"] == "trace" and s["trace"]["ranks"]["0"]["events"] > 0
    assert s["bottleneck"] == ran["bottleneck"] == "io"
    assert s["steps"] == ran["steps"] and s["step_time_s"]["steady"] == ran["step_time_s"]["steady"]
    assert s["phase_share"] == ran["phase_share"]
    assert "recorded by `haiprof run`" in r.stderr and json.loads((out / "meta.json").read_text())["steps_from_run"]
    r = r_alone
    assert r.returncode == 0, r.stderr
    s = load_summary(alone)
    _check_contract(s)
    assert 2 <= s["steps"] <= ran["traced_steps_excluded"] and "ProfilerStep" in s["step_detection"]["boundary"]
