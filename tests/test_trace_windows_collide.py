"""One tracing window at a time, whatever asks for it: two torch.profiler sessions on one thread kill the process
(a segfault in export_chrome_trace). Real `haiprof run` processes, compared with plain python; the request file's
parser checked on the bad inputs that used to kill the flush thread."""
import json

import pytest

from conftest import in_parallel, load_summary, phase_records, run_haiprof, run_python

TRAIN = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for i in range(30):
    opt.zero_grad(); m(torch.randn(32, 64)).sum().backward(); opt.step()
print("done", flush=True)
"""

TWO_THREADS = """
import threading, torch
def train(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for i in range(30):
        opt.zero_grad(); m(torch.randn(32, 64)).sum().backward(); opt.step()
ts = [threading.Thread(target=train, args=(s,)) for s in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
print("done", flush=True)
"""


def _windows(out):
    """(begin, end) of every window, from the run's own marks, in time order."""
    marks = [r for r in phase_records(out) if r[0] in ("@trace-begin", "@trace-end")]
    marks.sort(key=lambda r: r[1])
    return marks


def _never_overlap(out):
    marks = _windows(out)
    names = [m[0] for m in marks]
    assert names == ["@trace-begin", "@trace-end"] * (len(names) // 2), names   # begin, end, begin, end ...
    return len(names) // 2


@pytest.mark.parametrize("opts", [["--trace-at", "1"], ["--trace-every", "0.00001"]], ids=["at-1", "every-step"])
def test_a_requested_window_and_the_default_one_never_overlap(tmp_path, opts):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = tmp_path / "run"
    r, plain = in_parallel(lambda: run_haiprof("run", "--quiet", *opts, "--out", out, script, cwd=tmp_path),
                           lambda: run_python(script, cwd=tmp_path))
    assert r.returncode == plain.returncode == 0, r.stderr[-2000:]   # was -11 (segfault) with --trace-at 1
    assert r.stdout == plain.stdout
    status = [json.loads(x) for x in (out / "status.jsonl").read_text().splitlines()]
    failed = [s for s in status if s["collector"].startswith("trace") and "failed" in s["reason"]]
    assert not failed, failed
    assert _never_overlap(out) >= 2          # the default window ran too, after the requested one
    assert (out / "trace.json.gz").is_file()
    s = load_summary(out)
    assert s["steps"] == 30


def test_two_training_threads_open_the_default_window_once(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(TWO_THREADS)
    out = tmp_path / "run"
    # the flight recorder off: two threads' interleaved steps can look like a slow stretch (a window of its own)
    r = run_haiprof("run", "--quiet", "--no-trace-on-anomaly", "--out", out, script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]   # was a segfault, or two windows listing trace.json.gz twice
    assert r.stdout == "done\n" and "Leaked callback" not in r.stderr
    assert _never_overlap(out) == 1
    files = [w["file"] for w in load_summary(out).get("trace_windows", [])]
    assert files == ["trace.json.gz"], files


@pytest.mark.parametrize("text", ["[1, 2]", '{"at_step": 1e999}', '{"steps": "3"}', '{"steps": 0}',
                                  '{"steps": true}', '{"at_step": -4}', '{"steps": 1e6}', "nul\\x00", "7"])
def test_a_malformed_trace_request_is_a_status_line_not_a_dead_flush_thread(tmp_path, text):
    from haiprof.collectors.trace_requests import CONTROL_DIR, REQUEST, TraceRequests
    from haiprof.collectors.trace_window import TraceWindow
    status = []
    first = TraceWindow(tmp_path, [].append, lambda *a: status.append(a), active_steps=0)
    asked = TraceRequests(tmp_path, [].append, lambda *a: status.append(a), first)
    (tmp_path / CONTROL_DIR).mkdir()
    (tmp_path / CONTROL_DIR / REQUEST).write_text(text)
    asked.poll()   # raised AttributeError / OverflowError on the flush thread before
    assert status[-1][0] == "trace-request" and status[-1][1] is False
    assert "unreadable trace request" in status[-1][2]
    assert not asked._pending


def test_a_good_trace_request_is_queued(tmp_path):
    from haiprof.collectors.trace_requests import parse_request
    assert parse_request('{"steps": 2, "at_step": 40}') == (2, 40)
    assert parse_request('{"at_step": null}') == (3, None)
    assert parse_request('{"steps": 5.0}') == (5, None)
