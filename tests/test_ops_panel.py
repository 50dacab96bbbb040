"""The op-level report panel, rendered by `haiprof report` and drawn by a real headless Chromium."""
import gzip
import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import run_haiprof
from haiprof.rundir import RunDir
from test_report_browser import browser  # noqa: F401  (the module's Chromium fixture)

EVIL = '<img src=x onerror="window.__xss=1">'
HTA = Path(__file__).resolve().parent / "data" / "hta_launch"


def _run_dir(path: Path, steps: int = 8) -> RunDir:
    """A run directory as `haiprof run` leaves it: meta, phase intervals with step marks, a traced window."""
    rd = RunDir.create(path)
    rd.write_meta({"target_name": "panel", "exit_code": 0, "haiprof_argv": ["train.py"], "how": "exit"})
    t, ms = 1_000_000_000, 1_000_000
    with open(rd.file("phases.jsonl"), "w") as f:
        for i in range(steps):
            f.write(json.dumps(["forward", t, t + 4 * ms]) + "\n")
            f.write(json.dumps(["backward", t + 4 * ms, t + 9 * ms]) + "\n")
            f.write(json.dumps(["@step", t + 10 * ms, t + 10 * ms]) + "\n")
            if i == 2:
                f.write(json.dumps(["@trace-begin", t + 10 * ms + 1, t + 10 * ms + 1]) + "\n")
            if i == 5:
                f.write(json.dumps(["@trace-end", t + 10 * ms + 1, t + 10 * ms + 1]) + "\n")
            t += 10 * ms
    rd.record_status("trace", True, "3 step(s) traced")
    return rd


def _cpu_trace(path: Path) -> None:
    events, ts = [], 1000.0
    for k in range(1, 4):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": ts, "dur": 2000,
                       "pid": 1, "tid": 1})
        for i in range(300):   # hundreds of tiny ops per step, one of them with a hostile name
            events.append({"ph": "X", "cat": "cpu_op", "name": EVIL if i % 3 == 0 else "aten::add",
                           "ts": ts + 5 + 6 * i, "dur": 2, "pid": 1, "tid": 1})
        ts += 2000
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def _draw(browser, report: Path) -> dict:  # noqa: F811
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    page.wait_for_function("document.querySelectorAll('#ops .main-svg').length >= 2", timeout=20000)
    out = {"xss": page.evaluate("window.__xss === 1"), "errors": errors,
           "top_ops": page.inner_text("#top-ops"), "charts": page.evaluate(
               "Array.from(document.querySelectorAll('#ops .chart')).map(e => e.querySelector('.main-svg') !== null)")}
    page.close()
    return out


def test_panel_escapes_op_names_and_draws(browser, tmp_path):  # noqa: F811
    rd = _run_dir(tmp_path / "run")
    _cpu_trace(rd.file("trace.json.gz"))
    r = run_haiprof("report", "--quiet", rd.path)
    assert r.returncode == 0, r.stderr
    html = rd.file("report.html").read_text()
    assert EVIL not in html and "&lt;img src=x onerror=" in html
    s = json.loads(rd.file("summary.json").read_text())
    assert s["launch"]["cpu"]["ops_per_step"] == 300 and s["traced_steps_excluded"] == 4
    drawn = _draw(browser, rd.file("report.html"))
    assert drawn["xss"] is False and drawn["errors"] == []
    assert EVIL in drawn["top_ops"]            # shown as text, not run
    assert drawn["charts"] and all(drawn["charts"])


def test_gpu_panel_from_a_real_ddp_trace(tmp_path):
    rd = _run_dir(tmp_path / "run")
    shutil.copy(HTA / "nccl_parser_config" / "nccl_data.json.gz", rd.file("trace.json.gz"))
    r = run_haiprof("report", "--quiet", rd.path)
    assert r.returncode == 0, r.stderr
    html = rd.file("report.html").read_text()
    assert "GPU kernels" in html and "900 (2700 kernels, 3 steps)" in html and "host wait" in html
    s = json.loads(rd.file("summary.json").read_text())
    assert s["launch"]["gpu"]["kernels_per_step"] == 900


def test_unreadable_trace_is_a_reason_in_the_report(tmp_path):
    rd = _run_dir(tmp_path / "run")
    rd.file("trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00 truncated")
    r = run_haiprof("report", "--quiet", rd.path)
    assert r.returncode == 0, r.stderr
    s = json.loads(rd.file("summary.json").read_text())
    assert "gzip file truncated" in s["launch"]["error"]
    assert "gzip file truncated" in rd.file("report.html").read_text()
