"""benchmarks/probe_set.py: its comparison catches a real difference between two runs, and a few representative
probes run green end to end (python and `haiprof run` alike). The whole set is a benchmark, not a test."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import probe_set  # noqa: E402


def _probe(name: str) -> probe_set.Probe:
    return probe_set.load_probe(probe_set.PROBES / f"{name}.py")


def test_every_probe_says_what_it_tries():
    probes = probe_set.all_probes()
    assert len(probes) >= 70
    assert all(p.what for p in probes), [p.name for p in probes if not p.what]
    assert len({p.name for p in probes}) == len(probes)


def test_docstring_keys_are_read_as_written():
    p = _probe("nonutf8_argv")
    assert p.args == [b"caf\xe9", b"\xff\xfe", b"plain"]
    assert _probe("read_stdin").stdin == b"lr=0.1\nsteps=5\n"
    assert _probe("trace_at_1").haiprof_args == ["--trace-at", "1"]
    assert _probe("m_pkg_no_main").module == "trainpkg"
    assert _probe("m_no_such_module").no_report
    assert _probe("stderr_partial_oswrite").expected_diff and not _probe("stderr_partial_line").expected_diff
    assert _probe("syntax_error").what.startswith("A script with a syntax error")   # read without parsing it


def test_comparison_flags_two_real_runs_that_differ(tmp_path):
    """Two real python runs of one probe, given different arguments: rc, stderr (and so the verdict) differ."""
    p = _probe("argparse_error")
    out = tmp_path / "out"
    bad = probe_set.run_once(p, tmp_path / "a", [sys.executable, p.path.name, "--epochs", "many"], out)
    good = probe_set.run_once(p, tmp_path / "b", [sys.executable, p.path.name, "--epochs", "3"], out)
    assert bad.rc == 2 and good.rc == 0
    diffs = probe_set.compare(bad, good, None)
    assert any(d.startswith("rc:") for d in diffs) and any(d.startswith("stderr") for d in diffs)
    assert probe_set.compare(bad, bad, None) == []
    # a run directory that is missing its report is a difference too
    assert probe_set.compare(good, good, tmp_path) == ["no summary.json + report.html in the run directory"]


def test_own_lines_must_be_whole_lines():
    py = probe_set.Result(0, b"", b"progress 100%", {})
    glued = probe_set.Result(0, b"", b"progress 100%haiprof: Compute-bound\n", {})
    apart = probe_set.Result(0, b"", b"haiprof: note\nprogress 100%", {})
    assert probe_set.compare(py, apart, None) == []
    assert probe_set.compare(py, glued, None)
    # the newline haiprof puts before its line after the script's open one is haiprof's; one more is not
    assert probe_set.compare(py, probe_set.Result(0, b"", b"progress 100%\nhaiprof: Compute-bound\n", {}), None) == []
    assert probe_set.compare(py, probe_set.Result(0, b"", b"progress 100%\n\nhaiprof: Compute-bound\n", {}), None)
    whole = probe_set.Result(0, b"", b"done\n", {})
    assert probe_set.compare(whole, probe_set.Result(0, b"", b"done\nhaiprof: Compute-bound\n", {}), None) == []
    # a user file that differs is a difference
    assert probe_set.compare(probe_set.Result(0, b"", b"", {"a.txt": b"1"}),
                             probe_set.Result(0, b"", b"", {"a.txt": b"2"}), None) == ["files differ: ['a.txt']"]


# jit_script: a ScriptModule root took no forward hooks, and narrowing to it raised inside the script's opt.step()
# the script's own python (runtime/child_run.py): python's stack under the script, its command line, and a report
# after a SIGKILL
@pytest.mark.parametrize("name", ["exit_string", "sigint_ignored", "closerange_reopen", "jit_script",
                                  "traceback_print_stack", "proc_cmdline", "recursion_error", "sigkill_self"])
def test_representative_probes_are_green(tmp_path, name):
    probe, diffs = probe_set.check(_probe(name), tmp_path)
    assert diffs == []
