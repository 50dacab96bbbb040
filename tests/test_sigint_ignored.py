"""A job started with SIGINT ignored (a shell script's background job) ignores Ctrl-C to its end, as python does:
the report phase must not put a Ctrl-C handler of its own over the inherited SIG_IGN."""
import json
import os
import signal
import subprocess
import sys
import time

from conftest import HAIPROF, SCRIPTS, load_summary


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # inherited by the exec'd interpreter, as from `cmd &`


def _start(argv):
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ignore_sigint, start_new_session=True)


def test_ctrl_c_to_the_group_during_the_report_is_ignored_when_sigint_was_ignored(tmp_path):
    out = tmp_path / "r"
    argv = [str(SCRIPTS / "exits.py"), "ok", "50"]
    plain = _start([sys.executable, *argv])
    proc = _start([*HAIPROF, "run", "--quiet", "--out", str(out), *argv])
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:   # meta.json gets its end_time just before the report is written
            try:
                if json.loads((out / "meta.json").read_text()).get("end_time"):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.002)
        for _ in range(2):   # Ctrl-C twice to each process group, as a terminal would
            for p in (proc, plain):
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGINT)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=120)
        _, plain_err = plain.communicate(timeout=120)
    finally:
        for p in (proc, plain):
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert proc.returncode == plain.returncode == 0, err
    assert "report not written" not in err and "finishing the report" not in err, err
    assert (out / "report.html").is_file() and load_summary(out)["steps"] == 50
