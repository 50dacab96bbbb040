"""Whether a run directory's run is still going: its pid alive is not enough (pids are reused), the process's
start time recorded beside it must match; and `haiprof trace` on a file says it is not a run directory."""
import json
import os
import socket
import time

from conftest import run_haiprof
from haiprof.rundir import RunDir
from haiprof.rundir.liveness import start_ticks


def _unfinished_run(d, pid, pid_start):
    d.mkdir()
    meta = {"host": socket.gethostname(), "pid": pid, "start_time": time.time() - 60, "end_time": None,
            "exit_code": None}
    if pid_start is not None:
        meta["pid_start"] = pid_start
    (d / "meta.json").write_text(json.dumps(meta))
    return d


def test_a_live_pid_that_started_at_another_time_is_not_the_run(tmp_path):
    mine = start_ticks(os.getpid())
    assert isinstance(mine, int)
    reused = _unfinished_run(tmp_path / "reused", os.getpid(), mine + 1)   # the pid lives, a stranger's now
    live, why = RunDir(reused).in_progress()
    assert not live and "is gone" in why and "another process" in why
    r = run_haiprof("trace", "--wait", "1", reused)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not running" in r.stderr, r.stderr
    assert not (reused / "control").exists()      # no request left for a run that is not there
    assert RunDir(_unfinished_run(tmp_path / "same", os.getpid(), mine)).in_progress() == (True, "")
    assert RunDir(_unfinished_run(tmp_path / "older", os.getpid(), None)).in_progress() == (True, "")


def test_meta_json_records_its_writers_start_beside_its_pid(tmp_path):
    run = RunDir(tmp_path)
    run.write_meta({"pid": os.getpid(), "start_time": time.time()})
    run.update_meta(end_time=None)
    assert run.read_meta()["pid_start"] == start_ticks(os.getpid())
    RunDir(tmp_path / "x").path.mkdir()
    RunDir(tmp_path / "x").write_meta({"pid": 1})          # another process's pid: nothing recorded for it
    assert "pid_start" not in RunDir(tmp_path / "x").read_meta()


def test_trace_on_a_file_says_it_is_not_a_run_directory(tmp_path):
    f = tmp_path / "train.py"
    f.write_text("print(1)\n")
    r = run_haiprof("trace", f)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "not a run directory" in r.stderr and "no such directory" not in r.stderr
