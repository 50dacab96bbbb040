"""A long run keeps a snapshot report of itself (written by the sampler's low-priority child): a run killed with
SIGKILL still has a report of its steps so far, and a run that ends normally has its final report, not a
snapshot, and no half-made files."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import HAIPROF, SCRIPTS, run_haiprof


def _summary(out):
    try:
        return json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None


@pytest.mark.slow
def test_a_killed_run_keeps_a_recent_snapshot(tmp_path):
    out, stop = tmp_path / "run", tmp_path / "stop"
    proc = subprocess.Popen([*HAIPROF, "run", "--quiet", "--snapshot-every", "0.02", "--out", str(out),
                             str(SCRIPTS / "until_stopped.py"), str(stop)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, seen = time.monotonic() + 90, []
        while time.monotonic() < deadline and not seen:   # a snapshot while the run goes on
            s = _summary(out)
            # the snapshot whole: its summary and its page (a kill between the two keeps the previous page)
            if s and s.get("snapshot") and s["steps"] > 0 and (out / "report.html").is_file():
                seen.append(s["steps"])
            time.sleep(0.2)
        assert seen, proc.poll()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.5)
    s = _summary(out)
    assert s and s["snapshot"] is True and s["steps"] >= seen[-1] > 0
    assert (out / "report.html").is_file()


def test_the_final_report_replaces_the_snapshots(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("run", "--quiet", "--snapshot-every", "0.01", "--out", out, SCRIPTS / "exits.py", "loop", "60")
    assert r.returncode == 0, r.stderr
    s = _summary(out)
    assert s["exit_code"] == 0 and not s.get("snapshot") and s["steps"] == 60
    assert not list(out.glob(".*.tmp")) and not list(out.glob("*.tmp"))


def test_bad_snapshot_interval_is_one_line(tmp_path):
    r = run_haiprof("run", "--snapshot-every", "-1", "--out", tmp_path / "r", SCRIPTS / "exits.py", "ok")
    assert r.returncode == 2 and "--snapshot-every" in r.stderr and "Traceback" not in r.stderr


def test_snapshots_repeat_and_their_cost_stays_bounded(tmp_path):
    """The scheduler, with a child that takes 0.1 s: the next one starts no sooner than SPACING x that (and no
    sooner than the interval), so snapshots take at most 1/SPACING of a core however long the report gets."""
    from haiprof.rundir import RunDir
    from haiprof.runtime.sidecar import Snapshots

    # a child without an interpreter's start-up: beside busy processes a python child took ~1.5 s, so the next one
    # was due 30 s on, past the deadline
    snaps = Snapshots(RunDir(tmp_path), 0.05, ["sleep", "0.1"])
    time.sleep(0.1)
    snaps.poll()
    assert snaps.child is None   # due, but the run has not recorded a phase yet: nothing to report
    (tmp_path / "phases.bin").write_bytes(b"\0")
    starts = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(starts) < 2:
        before = snaps.child
        snaps.poll()
        if snaps.child is not None and snaps.child is not before:
            starts.append(time.monotonic())
        elif before is not None and snaps.child is None:   # the first one ended: the next is due SPACING x its time
            deadline = max(deadline, snaps.next_at + 10)     # on (longer on a busy machine: a nice-19 child is slow)
        time.sleep(0.02)
    snaps.stop()
    assert len(starts) == 2
    assert starts[1] - starts[0] >= 0.1 + Snapshots.SPACING * 0.1 - 0.05   # ran 0.1 s, then waited 20 x 0.1 s
