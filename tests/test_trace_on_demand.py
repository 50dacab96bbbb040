"""Op-level windows beyond the first: `--trace-at STEP`, and `haiprof trace RUN_DIR` asking a running job (one
process, and both ranks of a 2-rank gloo job, at the same step). Each window is its own trace file and its own
entry in summary.json `trace_windows`, its steps out of the statistics, compared with the steps around it."""
import subprocess
import time

import pytest

from conftest import HAIPROF, SCRIPTS, load_summary, phase_records, run_haiprof

LOOP = SCRIPTS / "reliability" / "loop_exit.py"   # STEPS EXIT_CODE


def test_trace_at_writes_its_own_window(tmp_path):
    out = tmp_path / "r"
    # the flight recorder off: a loaded machine's slow stretch would add a window of its own to the exact list
    r = run_haiprof("run", "--quiet", "--no-trace-on-anomaly", "--trace-at", "500", "--out", out, LOOP, "700", "0")
    assert r.returncode == 0, r.stderr
    assert (out / "trace.json.gz").is_file() and (out / "trace-step500.json.gz").is_file()
    s = load_summary(out)
    w = {x["file"]: x for x in s["trace_windows"]}
    assert set(w) == {"trace.json.gz", "trace-step500.json.gz"}
    assert w["trace-step500.json.gz"]["first_step"] == 500 and w["trace-step500.json.gz"]["steps"] >= 3
    assert w["trace-step500.json.gz"]["around_ms"] > 0
    assert s["traced_steps_excluded"] == w["trace.json.gz"]["steps"] + w["trace-step500.json.gz"]["steps"]
    assert 'id="windows"' in (out / "report.html").read_text()


def _wait_steps(run_dir, n, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if sum(r[0] == "@step" for r in phase_records(run_dir)) >= n:
                return
        except Exception:
            pass
        time.sleep(0.2)
    pytest.fail(f"{run_dir}: fewer than {n} steps after {timeout} s")


def _start_until_stopped(out, stop, *options):
    return subprocess.Popen([*HAIPROF, "run", "--quiet", *options, "--out", str(out),
                             str(SCRIPTS / "until_stopped.py"), str(stop)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def one_running_job(tmp_path_factory):
    """One until_stopped.py run, asked while it runs (the two tests below read what each ask got): a snapshot
    `haiprof report` after 50 steps, then `haiprof trace --at` a step ~3 s ahead; stopped once 20 steps past it.
    Returns a dict of the run directory, the asks' results, what the snapshot left and the run's own end."""
    tmp = tmp_path_factory.mktemp("running")
    out, stop = tmp / "r", tmp / "stop"
    got = {"out": out}
    proc = _start_until_stopped(out, stop)
    try:
        _wait_steps(out, 50)
        got["report"] = run_haiprof("report", out)
        got["snapshot"] = load_summary(out) if got["report"].returncode == 0 else None
        got["alive_after_report"] = proc.poll() is None
        at = got["at"] = sum(r[0] == "@step" for r in phase_records(out)) + 300   # ~3 s ahead of the run
        got["trace"] = run_haiprof("trace", out, "--steps", "2", "--at", str(at))
        if got["trace"].returncode == 0:
            _wait_steps(out, at + 20)
    finally:
        stop.touch()
        _, got["err"] = proc.communicate(timeout=180)
    got["returncode"] = proc.returncode
    return got


def test_haiprof_trace_asks_a_running_job(one_running_job):
    job = one_running_job
    out, at, r = job["out"], job["at"], job["trace"]
    assert r.returncode == 0 and "taken" in r.stdout and "not taken" not in r.stdout, (r.stdout, r.stderr)
    assert job["returncode"] == 0, job["err"]
    assert (out / f"trace-step{at}.json.gz").is_file()
    w = [x for x in load_summary(out)["trace_windows"] if x["file"] == f"trace-step{at}.json.gz"]
    assert w and w[0]["first_step"] == at and w[0]["steps"] >= 2
    r = run_haiprof("trace", out)   # ended: one line, exit 2
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not running" in r.stderr


def test_haiprof_trace_reaches_every_rank_at_the_same_step(tmp_path):
    out, stop = tmp_path / "job", tmp_path / "stop"
    proc = _start_until_stopped(out, stop, "--nproc-per-node", "2")
    try:
        for rank in (0, 1):
            _wait_steps(out / f"rank-{rank}", 20)
        r = run_haiprof("trace", out, "--steps", "2")
        assert r.returncode == 0, r.stderr
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("haiprof:")]
        assert len(lines) == 2 and all(": taken;" in ln for ln in lines), r.stdout
        at = int(lines[0].split("after step ")[1].split(":")[0])
        for rank in (0, 1):
            _wait_steps(out / f"rank-{rank}", at + 10)
    finally:
        stop.touch()
        _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-2000:]
    for rank in (0, 1):
        assert (out / f"rank-{rank}" / f"trace-step{at}.json.gz").is_file(), rank


def test_snapshot_report_of_a_running_job(one_running_job):
    job = one_running_job
    r = job["report"]
    assert r.returncode == 0, r.stderr
    assert "a snapshot of a run in progress" in r.stderr
    s = job["snapshot"]
    assert s["snapshot"] is True and s["steps"] >= 50 and s["exit_code"] is None
    assert any(f["kind"] == "incomplete" and "still in progress" in f["message"] for f in s["findings"])
    assert job["alive_after_report"]                     # the run goes on, undisturbed
    assert job["returncode"] == 0, job["err"]
    s = load_summary(job["out"])                         # the run's own report replaced the snapshot
    assert "snapshot" not in s and s["exit_code"] == 0
