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
