"""A full disk never changes the training: full at start, one line and exit 2 before the script runs, nothing left
behind; filling during the run, the script's output and exit code are python's, one warning line, no .tmp file,
and what reached the disk still makes a report. Both on a real full filesystem (a small tmpfs; needs root) and
with a writer that fails with ENOSPC (any machine)."""
import subprocess
import sys

import pytest

from conftest import SCRIPTS, in_parallel, load_summary, run_haiprof

LOOP = SCRIPTS / "reliability" / "loop_exit.py"


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt, leave: int) -> None:
    import os
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    (mnt / "fill").write_bytes(b"\0" * max(0, free - leave))


def _python(*args):
    return subprocess.run([sys.executable, str(LOOP), *map(str, args)], capture_output=True, text=True, timeout=300)


def _our_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("haiprof")]


def test_full_at_start_is_one_line_and_nothing_left(small_fs):
    _fill(small_fs, 0)
    r = run_haiprof("run", "--out", small_fs / "r", LOOP, 100, 0)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("haiprof: error: cannot write the run directory") and r.stderr.count("\n") == 1
    assert sorted(p.name for p in small_fs.iterdir()) == ["fill"]


# One exit status each (the same code keeps both): a success stays a success beside haiprof's warning on the real
# full filesystem, and a failure keeps its own code with the failing writer.
@pytest.mark.parametrize("code", [0])
def test_disk_filling_during_the_run_keeps_the_scripts_exit(small_fs, code):
    _fill(small_fs, 150_000)
    out = small_fs / "r"
    plain, r = in_parallel(lambda: _python(12000, code),
                           lambda: run_haiprof("run", "--out", out, LOOP, 12000, code, timeout=300))
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (code, plain.stdout), r.stderr
    assert "Traceback" not in r.stderr
    lines = _our_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("haiprof: warning: could not write"), lines
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    (small_fs / "fill").unlink()
    again = run_haiprof("report", "--quiet", out)
    assert again.returncode == 0, again.stderr
    assert load_summary(out)["steps"] > 0


@pytest.mark.parametrize("code", [3])
def test_writer_failing_with_enospc_keeps_the_scripts_exit(tmp_path, code):
    out = tmp_path / "r"
    plain, r = in_parallel(lambda: _python(6000, code, 2),
                           lambda: run_haiprof("run", "--out", out, LOOP, 6000, code, 2))
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (code, plain.stdout), r.stderr
    lines = _our_lines(r.stderr)
    assert len(lines) == 1 and "could not write phases.bin" in lines[0] and "No space left" in lines[0], lines
    r = run_haiprof("report", "--quiet", out)
    assert r.returncode == 0 and 0 < load_summary(out)["steps"] < 6000


def test_a_full_disk_at_the_trace_export_leaves_no_kineto_tmp_file(small_fs):
    # torch.profiler (Kineto) writes trace.json.tmp and renames it; haiprof removed only its own .tmp files
    import torch
    from haiprof.collectors.trace_window import TraceWindow
    status = []
    win = TraceWindow(small_fs, [].append, lambda *a: status.append(a), warmup_steps=1, active_steps=2,
                      watch=False)
    m = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for n in range(1, 6):
        if n == 3:
            _fill(small_fs, 0)   # full just before the window's last step exports the trace
        opt.zero_grad()
        m(torch.randn(64, 256)).sum().backward()
        opt.step()
        win.on_step(n)
    win.close()
    left = sorted(p.name for p in small_fs.iterdir())
    assert not [n for n in left if n.endswith(".tmp")] and "trace.json.gz" not in left, left
    assert status and status[-1][1] is False, status


def test_a_report_failing_for_space_names_the_command_that_rebuilds_it(small_fs):
    out = small_fs / "r"
    r = run_haiprof("run", "--quiet", "--out", out, LOOP, 200, 0)
    assert r.returncode == 0, r.stderr
    (out / "summary.json").unlink()
    (out / "report.html").unlink()
    _fill(small_fs, 0)
    r = run_haiprof("report", "--quiet", out)
    assert r.returncode != 0 or "could not write" in r.stderr
    lines = _our_lines(r.stderr)
    assert lines and f"haiprof report {out}" in lines[-1], lines


def test_the_step_records_keep_their_room_when_something_else_fills_the_disk(small_fs):
    # CI: a trace export and the loss stream took the last 150 KB before the first chunk of phases.bin: 0 steps
    from haiprof.rundir import ChunkAppender
    from haiprof.phasestore import read_chunks
    path = small_fs / "phases.bin"
    app = ChunkAppender(path)
    _fill(small_fs, 0)   # another writer takes all that is left
    for n in range(5000):
        app.append(("forward", n * 1000, n * 1000 + 500))
    app.flush()
    app.close()
    records, skipped = read_chunks(path)
    assert len(records) == 5000 and not skipped
    st = path.stat()
    assert st.st_blocks * 512 < st.st_size + 64 * 1024, "the reservation past the end was given back"
