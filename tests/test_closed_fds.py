"""A script that closes every descriptor it did not open (a daemon's os.closerange(3, ...)) and then opens its own
files, which get the low numbers haiprof's files had: haiprof writes nothing into them (they hold what python's run
leaves, under the numbers python gives them), reopens its own files, and the run is whole: summary, report, the
steps after the closerange, sampling that went on, and a status line saying what was reopened."""
import json

from conftest import in_parallel, load_summary, run_haiprof, run_python

USER_FILES = 6
AFTER = 60   # steps after the closerange; a pause every 20 lets flushes and samples happen meanwhile

SCRIPT = f"""\
import os, time, torch
m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)
def step():
    opt.zero_grad(); m(torch.randn(4, 8)).sum().backward(); opt.step()
for i in range(5):
    step()
os.closerange(3, 4096)
files = [open(f"user{{k}}.log", "w") for k in range({USER_FILES})]
numbers = [f.fileno() for f in files]   # the numbers python gives: haiprof's are elsewhere
for k, f in enumerate(files):
    f.write(f"line {{k}}\\n"); f.flush()
for i in range({AFTER}):
    step()
    if i % 20 == 0:
        time.sleep(0.6)
for f in files:
    f.write("end\\n"); f.flush()
for f in files[::2]:
    f.close()   # the others stay open until the interpreter's exit, after haiprof's report
print("done", numbers)
"""


def _user_files(d):
    return {p.name: p.read_bytes() for p in sorted(d.glob("user*.log"))}


def test_closerange_then_own_files_get_nothing_of_ours_and_the_run_is_whole(tmp_path):
    plain_dir, hp_dir = tmp_path / "plain", tmp_path / "hp"
    for d in (plain_dir, hp_dir):
        d.mkdir()
        (d / "daemon.py").write_text(SCRIPT)
    out = tmp_path / "run"
    plain, r = in_parallel(lambda: run_python("daemon.py", cwd=plain_dir),
                           lambda: run_haiprof("run", "--out", out, "daemon.py", cwd=hp_dir))
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout), r.stderr
    assert plain.returncode == 0 and plain.stdout.startswith("done [3, 4,"), plain.stdout
    assert plain.stderr == "" and "haiprof: report:" in r.stderr, r.stderr   # our lines: on our stderr
    assert all(ln.startswith("haiprof") for ln in r.stderr.splitlines()), r.stderr
    expected = {f"user{k}.log": f"line {k}\nend\n".encode() for k in range(USER_FILES)}
    assert _user_files(plain_dir) == expected
    assert _user_files(hp_dir) == expected            # nothing of haiprof's in the script's files

    assert (out / "report.html").is_file()
    assert load_summary(out)["steps"] == 5 + AFTER   # the steps after the closerange are recorded
    status = [json.loads(x) for x in (out / "status.jsonl").read_text().splitlines()]
    files = [s for s in status if s["collector"] == "files"]
    assert files and "reopened" in files[-1]["reason"] and "phases.bin" in files[-1]["reason"], status

    # the sampler went on after the script closed our end of its pipe
    from haiprof.rundir import RunDir
    rd = RunDir(out)
    forwards = [rec[1] for rec in rd.read_phase_records() if rec[0] == "forward"]
    closed_at = forwards[5]   # the first step after the closerange
    assert any(s["t_ns"] > closed_at + 1e9 for s in rd.read_samples("system"))


def _take_number(fd, path):
    """What the script does: close haiprof's descriptor and get the same number for a file of its own."""
    import os
    opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    mine = os.dup2(opened, fd)   # closes ours, the number is the script's file now
    os.close(opened)
    return mine


def test_appender_never_writes_nor_closes_a_number_the_script_took(tmp_path):
    import os

    from haiprof.rundir import RunDir
    rd = RunDir.create(tmp_path / "r")
    app = rd.phase_appender()
    app.append(("forward", 1, 2))
    app.flush()
    mine = _take_number(app._file.fd, tmp_path / "user.log")
    app.append(("backward", 2, 3))
    app.flush()
    app.close()
    os.write(mine, b"still mine\n")   # not closed by haiprof
    os.close(mine)
    assert (tmp_path / "user.log").read_bytes() == b"still mine\n"
    assert rd.read_phase_records() == [["forward", 1, 2], ["backward", 2, 3]] and app.reopened == 1



def test_a_number_taken_before_it_was_moved_high_is_left_to_the_script(tmp_path):
    """The race the loop script below hit (EBADF on its own log file): haiprof's file opened at a low number, the
    script's closerange closes it and its own open() gets the number, then haiprof moves "its" number high. The
    copy is of the script's file, and the low number, the script's now, must not be closed."""
    import os

    from haiprof.errors import fd_identity, fd_kept_high
    ours = tmp_path / "ours.bin"
    ours.write_bytes(b"")
    low = os.open(ours, os.O_RDONLY)
    st = os.stat(ours)
    os.close(low)                                               # the script's closerange
    mine = os.open(tmp_path / "user.log", os.O_WRONLY | os.O_CREAT)   # ... and its own file, at the same number
    assert mine == low
    high = fd_kept_high(low, expect=(st.st_dev, st.st_ino))
    assert fd_identity(high) != (st.st_dev, st.st_ino)          # the caller sees the copy is not its file
    os.write(mine, b"still mine\n")                             # EBADF before: the low number was closed
    os.close(mine)
    os.close(high)
    assert (tmp_path / "user.log").read_bytes() == b"still mine\n"
    # the file really ours is moved and its low number closed, as before
    low = os.open(ours, os.O_RDONLY)
    high = fd_kept_high(low, expect=(st.st_dev, st.st_ino))
    assert high != low and fd_identity(low) is None and fd_identity(high) == (st.st_dev, st.st_ino)
    os.close(high)

def test_a_failed_chunk_write_still_leaves_whole_chunks(tmp_path, monkeypatch):
    import errno
    import os

    from haiprof.rundir import RunDir
    rd = RunDir.create(tmp_path / "r")
    app = rd.phase_appender()
    app.append(("forward", 1, 2))
    app.flush()
    size = (rd.path / "phases.bin").stat().st_size
    real = os.write

    def half_then_full(fd, data):   # a disk that fills in the middle of a chunk
        if fd == app._file.fd and len(data) > 8:
            return real(fd, bytes(data[:8]))
        raise OSError(errno.ENOSPC, "No space left on device")

    app.append(("backward", 2, 3))
    monkeypatch.setattr(os, "write", half_then_full)
    try:
        app.flush()
    except OSError:
        pass
    monkeypatch.setattr(os, "write", real)
    assert (rd.path / "phases.bin").stat().st_size == size
    assert rd.read_phase_records() == [["forward", 1, 2]]
    app.close()


def test_own_stderr_taken_by_the_script_is_copied_again_from_fd_2(tmp_path, monkeypatch):
    import os

    from haiprof import errors
    monkeypatch.setattr(errors, "_OWN_STDERR", [None])
    monkeypatch.setattr(errors, "_STDERR_RETAKEN", [0])
    errors.keep_stderr()
    fd = errors._OWN_STDERR[0][0]
    mine = _take_number(fd, tmp_path / "user.log")
    errors.say("haiprof: a line of ours")
    os.close(mine)
    assert (tmp_path / "user.log").read_bytes() == b"" and errors.stderr_retaken() == 1
    os.close(errors._OWN_STDERR[0][0])


def test_sidecar_goes_on_when_the_script_closes_its_pipe_and_stops_on_sigterm(tmp_path):
    import os
    import time

    from haiprof.rundir import RunDir
    from haiprof.runtime.sidecar import Sidecar
    rd = RunDir.create(tmp_path / "r")
    side = Sidecar.start(rd, os.getpid(), 0.1)
    deadline = time.monotonic() + 60
    while not rd.read_samples("system") and time.monotonic() < deadline:   # sampling (its imports done)
        time.sleep(0.05)
    os.close(side.fd)   # the script's os.closerange
    time.sleep(0.3)
    assert side.proc.poll() is None and not side.check()
    t0 = time.monotonic()
    side.stop()
    assert side.proc.returncode == 0 and time.monotonic() - t0 < 1.0


LOOP = """\
import os, torch
m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(600):
    opt.zero_grad(); m(torch.randn(4, 8)).sum().backward(); opt.step()
    if i % 4 == 0:   # closes whatever haiprof holds, often while its threads reopen or write
        os.closerange(3, 4096)
        for k in range(4):
            with open(f"u{k}.log", "a") as f:
                f.write("x\\n")
print("ok")
"""


def test_a_script_closing_descriptors_in_a_loop_gets_nothing_of_ours(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP)
    out = tmp_path / "run"
    r = run_haiprof("run", "--quiet", "--out", out, "loop.py", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ok\n", ""), r.stderr
    assert [(tmp_path / f"u{k}.log").read_bytes() for k in range(4)] == [b"x\n" * 150] * 4
    assert load_summary(out)["steps"] == 600 and (out / "report.html").is_file()
