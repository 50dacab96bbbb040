"""The report is written on Ctrl-C and SIGTERM; after SIGKILL `haiprof report` renders what was flushed."""
import signal
import subprocess
import sys
import time

from conftest import HAIPROF, SCRIPTS, load_summary, run_haiprof


def _start_loop(out):
    proc = subprocess.Popen([*HAIPROF, "run", "--out", str(out), str(SCRIPTS / "exits.py"), "loop", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)  # let a flush (every 0.5 s) and a few samples happen
    return proc


def _python_status(sig):
    """What plain python returns for the same signal (the status we must reproduce)."""
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "exits.py"), "loop", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    return proc.returncode


def test_sigint_writes_report(tmp_path):
    out = tmp_path / "r"
    proc = _start_loop(out)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == _python_status(signal.SIGINT) == -signal.SIGINT
    assert "KeyboardInterrupt" in err
    s = load_summary(out)
    assert s["exit_code"] == 130 and s["steps"] >= 4
    assert (out / "report.html").is_file()


def test_sigterm_writes_report(tmp_path):
    out = tmp_path / "r"
    proc = _start_loop(out)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == _python_status(signal.SIGTERM) == -signal.SIGTERM
    s = load_summary(out)
    assert s["exit_code"] == 128 + signal.SIGTERM and s["steps"] >= 4
    assert (out / "report.html").is_file()


def test_script_that_sigterms_itself(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--out", out, SCRIPTS / "exits.py", "sigterm-self")
    assert r.returncode == -signal.SIGTERM
    assert load_summary(out)["steps"] == 5


def test_sigkill_then_report_renders_flushed_data(tmp_path):
    out = tmp_path / "r"
    proc = _start_loop(out)
    proc.kill()
    proc.communicate(timeout=30)
    assert not (out / "summary.json").exists()
    time.sleep(1.5)  # the side sampler notices its parent is gone and exits
    r = run_haiprof("report", out)
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["finished"] is False and s["exit_code"] is None
    assert s["steps"] >= 4  # everything up to the last flush
    assert any(f["kind"] == "incomplete" for f in s["findings"])
    assert s["utilization"]["samples"] >= 2
    html = (out / "report.html").read_text()
    assert "did not finish" in html
