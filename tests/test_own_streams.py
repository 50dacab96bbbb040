"""haiprof's messages go to the process's own stderr (fd 2 as it was at start), never into the script's: a script
that sends sys.stderr to a log file keeps a log of its own lines only; with sys.stderr = None nothing of ours lands
on stdout and tracing still works; a script that closes or replaces its streams ends as python ends it."""
import sys

import pytest

from conftest import SCRIPTS, in_parallel, load_summary, run_haiprof, run_python

S = SCRIPTS / "streams"


def test_script_stderr_sent_to_a_log_file_gets_none_of_ours(tmp_path):
    log = tmp_path / "log.txt"
    r = run_haiprof("run", "--out", tmp_path / "r", S / "stderr_to_file.py", log)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert log.read_text() == "to the log\n"                 # the script's own line, nothing of haiprof's
    assert "haiprof: report:" in r.stderr                    # ours went to the process's stderr


def test_stderr_none_keeps_our_verdict_off_stdout_and_tracing_works(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--out", out, S / "stderr_none.py")
    assert r.returncode == 0 and r.stdout == "done\n", (r.stdout, r.stderr)
    assert "haiprof: report:" in r.stderr
    st = [x for x in (out / "status.jsonl").read_text().splitlines() if '"collector": "trace"' in x]
    assert st and '"available": true' in st[-1], st
    assert load_summary(out)["traced_steps_excluded"] > 0


@pytest.mark.parametrize("how", ["close-stdout", "close-stderr", "os-close-1", "stringio", "none"])
def test_closed_or_replaced_streams_end_as_python(tmp_path, how):
    plain, r = in_parallel(lambda: run_python(S / "close_streams.py", how),
                           lambda: run_haiprof("run", "--quiet", "--out", tmp_path / "r", S / "close_streams.py", how))
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert (tmp_path / "r" / "report.html").is_file()


def test_our_lines_start_their_own_line_in_a_log_file(tmp_path):
    """A batch job's stderr is a file: after the script's unterminated last line, haiprof's first line starts on
    a line of its own (its newline added), never glued to `progress 100%`."""
    import subprocess

    from conftest import HAIPROF
    log = tmp_path / "job.err"
    with open(log, "w") as f:   # as `2> job.err` opens it: write-only, not appending
        r = subprocess.run([*HAIPROF, "run", "--out", tmp_path / "r", S / "partial_last_line.py"], stderr=f,
                           stdout=subprocess.PIPE, timeout=180)
    text = log.read_text()
    assert r.returncode == 0, text
    assert text.startswith("progress 100%\nhaiprof: ") and "\n\n" not in text, text


def test_line_start_is_read_back_from_files_only(tmp_path):
    import os

    from haiprof.errors import _at_line_start
    for content, mode, expected in ((b"", "wb", True), (b"done\n", "wb", True), (b"progress 100%", "wb", False),
                                    (b"progress 100%", "ab", False), (b"a\n", "ab", True)):
        with open(tmp_path / "f", mode) as f:
            f.write(content)
            f.flush()
            assert _at_line_start(f.fileno()) is expected, (content, mode)
    (tmp_path / "f").write_bytes(b"a\nbc")
    with open(tmp_path / "f", "r+b") as f:   # the write position, not the file's end, decides without O_APPEND
        f.seek(2)
        assert _at_line_start(f.fileno()) is True   # the byte before it is the newline
        f.seek(3)
        assert _at_line_start(f.fileno()) is False
    rd, wr = os.pipe()
    os.write(wr, b"no newline")
    assert _at_line_start(wr) is None   # a pipe cannot be read back: the script's python tells (next test)
    os.close(rd), os.close(wr)


@pytest.mark.parametrize("how, ours_after", [("unflushed", b"progress 100%\nhaiprof: "),
                                             ("carriage-return", b"progress 100%\rhaiprof: ")])
def test_our_lines_start_their_own_line_on_a_pipe(tmp_path, how, ours_after):
    """A pipe cannot be read back: the script's python watched its own stderr writes and told the launching
    process that the last one left its line open. Python's bytes come first, as python wrote them (`progress
    100%`, flushed at its exit, or ended by a carriage return)."""
    import subprocess

    from conftest import HAIPROF
    r = subprocess.run([*HAIPROF, "run", "--out", tmp_path / "r", S / "partial_last_line.py", how],
                       capture_output=True, timeout=180)
    assert r.returncode == 0 and r.stderr.startswith(ours_after), r.stderr
    assert b"\n\n" not in r.stderr, r.stderr


def test_our_lines_start_their_own_line_after_stdout_on_the_same_pipe(tmp_path):
    """`train.py 2>&1 | tee log`: stdout and stderr are one pipe, and the script's last line is an open one on
    stdout, still in python's buffer when the script ends."""
    import subprocess

    from conftest import HAIPROF
    r = subprocess.run([*HAIPROF, "run", "--out", tmp_path / "r", S / "partial_last_line.py", "stdout"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
    assert r.returncode == 0 and r.stdout.startswith(b"progress 100%\nhaiprof: "), r.stdout
    assert b"\n\n" not in r.stdout, r.stdout


@pytest.mark.parametrize("unbuffered", [False, True])
def test_the_watch_on_python_stderr_sees_its_last_byte(unbuffered):
    """StderrTail in a bare python, buffered and with `-u` (its text layer then writes to the file itself): each
    kind of write is seen once it reaches fd 2, and what was written is python's own bytes."""
    import os
    import subprocess
    code = """if True:
        import os, sys
        from haiprof.runtime.stderr_tail import StderrTail
        t = StderrTail()
        seen = [t.install()]
        sys.stderr.write("a\\n"); seen.append(t.line_open())
        print("b", end="", file=sys.stderr); seen.append(t.line_open())   # buffered: line_open flushes first
        sys.stderr.buffer.write(b"c\\r"); seen.append(t.line_open())
        sys.stderr.write("d"); sys.stderr.flush(); seen.append(t.line_open())
        os.write(2, b"\\n"); seen.append(t.line_open())   # past python's stream: not seen
        print(seen)
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    r = subprocess.run([sys.executable, *(["-u"] if unbuffered else []), "-c", code], capture_output=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == "[True, False, True, False, True, True]", r.stdout
    assert r.stderr == b"a\nbc\rd\n"


def test_the_watch_follows_stdout_only_while_it_is_our_stream(tmp_path):
    """stdout is watched where it is stderr's pipe (2>&1); once the script points fd 1 at a file of its own
    (dup2), its open line there is not ours to close."""
    import subprocess
    code = f"""if True:
        import os, sys
        from haiprof.runtime.stderr_tail import StderrTail
        t = StderrTail()
        t.install()
        seen = [len(t.streams)]
        print("a", end=""); seen.append(t.line_open())
        print(""); seen.append(t.line_open())
        fd = os.open({str(tmp_path / 'log')!r}, os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        print("b", end=""); seen.append(t.line_open())
        sys.stderr.write(repr(seen))
    """
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert r.returncode == 0 and r.stdout == b"a\n[2, True, False, False]", r.stdout
    assert (tmp_path / "log").read_bytes() == b"b"
