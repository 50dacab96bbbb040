"""Small edges of the command line, each one line and exit 2 (or a clamp said once), never a file replaced."""
import json

import pytest

from conftest import SCRIPTS, run_haiprof

SCRIPT = SCRIPTS / "seeded_train.py"


@pytest.fixture(scope="module")
def run(seeded):
    return seeded[1]   # a finished run of SCRIPT (conftest.seeded), only read here


@pytest.mark.parametrize("argv,start", [
    (["run", "--steps", "abc", "x.py"], "haiprof: error: haiprof run: argument --steps: invalid int value"),
    (["report"], "haiprof: error: haiprof report: the following arguments are required: run_dir"),
    (["compare", "a"], "haiprof: error: haiprof compare: the following arguments are required"),
    (["run", "--out", "", "x.py"], "haiprof: error: --out needs a directory"),
    (["run", "--fix", "auto,amp", "x.py"], "haiprof: error: --fix auto chooses the fixes from the diagnosis"),
    (["run", "--fix", "prefetch", "--fix", "auto", "x.py"], "haiprof: error: --fix given 2 times"),
    (["run", "--trace-at", "5,x", "x.py"], "haiprof: error: --trace-at takes step numbers"),
    (["run", "--trace-every", "0", "x.py"], "haiprof: error: --trace-every must be a positive number"),
])
def test_bad_input_is_one_line(argv, start, tmp_path):
    r = run_haiprof(*argv, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(start) and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == "" and not (tmp_path / "haiprof-runs").exists()


def test_dangling_symlink_out_is_named_as_such(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone" / "dir")
    r = run_haiprof("run", "--out", link, SCRIPT)
    assert r.returncode == 2 and "is a symbolic link to" in r.stderr and "which does not exist" in r.stderr


def test_tiny_sample_interval_is_clamped_and_said(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--sample-interval", "1e-9", "--out", out, SCRIPT)
    assert r.returncode == 0 and "--sample-interval 1e-09 s is below 0.02 s" in r.stderr
    t = [json.loads(x)["t_ns"] for x in (out / "samples" / "system.jsonl").read_text().splitlines()]
    gaps = sorted(b - a for a, b in zip(t, t[1:]))
    assert gaps and gaps[len(gaps) // 2] >= 0.8 * 0.02e9   # jittered +-20% around the clamped interval


def test_export_and_compare_never_replace_an_existing_file(run, tmp_path):
    meta = run / "meta.json"
    before = meta.read_text()
    r = run_haiprof("export", run, "--out", meta)
    assert r.returncode == 2 and "exists; choose a new file or pass --overwrite" in r.stderr
    r = run_haiprof("compare", run, run, "--html", meta)
    assert r.returncode == 2 and "exists; choose a new file or pass --overwrite" in r.stderr
    assert meta.read_text() == before
    page = tmp_path / "cmp.html"
    page.write_text("mine")
    assert run_haiprof("compare", run, run, "--html", page, "--overwrite").returncode == 0
    assert page.read_text() != "mine"
