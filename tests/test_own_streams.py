"""haiprof's messages go to the process's own stderr (fd 2 as it was at start), never into the script's: a script
that sends sys.stderr to a log file keeps a log of its own lines only; with sys.stderr = None nothing of ours lands
on stdout and tracing still works; a script that closes or replaces its streams ends as python ends it."""
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
    assert _at_line_start(wr) is True   # a pipe cannot be read back: as before
    os.close(rd), os.close(wr)
