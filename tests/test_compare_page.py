"""Before/after as a page (issue 13): `haiprof compare A B --html OUT` and the fixed run's own report show
baseline vs fixed per-phase bars and step-time distributions with the loss guard; runs of different commands
are refused unless --force. The page is checked in real Chromium: charts drawn, no console errors, no network."""
import json

import pytest

from conftest import SCRIPTS, artifact, run_haiprof
from test_report_browser import browser, open_report  # noqa: F401  (browser: a fixture)

from haiprof.analyzers.compare import describe_target, step_distribution
from haiprof.commands.compare import command_mismatch

WORKLOAD = SCRIPTS / "fix_workload.py"
ARGS = ["--steps", "12"]


def test_step_distribution_shares_bins_and_keeps_outliers_off_the_axis():
    before = [0.050] * 8 + [0.055, 6.0]     # a 6 s start-up step
    after = [0.030] * 9 + [0.031]
    d = step_distribution(before, after, bins=10)
    assert sum(d["before"]) == 10 and sum(d["after"]) == 10
    assert d["before"][-1] == 1 and d["after"][-1] == 0   # the start-up step in the "slower" bin only
    assert d["edges_ms"][-1] < 100                         # the axis is set by the steady steps
    assert d["after_p50_ms"] == pytest.approx(30) and d["before_p50_ms"] == pytest.approx(50)
    assert step_distribution([], after) is None and step_distribution(before, [0.0]) is None


def test_command_mismatch_names_both_commands(tmp_path):
    a = {"script": "train.py", "cwd": str(tmp_path), "argv": ["--lr", "1"], "rank": 0}
    assert command_mismatch(a, {**a, "rank": 1}) is None               # ranks of one command
    assert command_mismatch(a, {**a, "script": str(tmp_path / "train.py")}) is None   # resolved path
    why = command_mismatch(a, {**a, "argv": ["--lr", "2"]})
    assert "train.py --lr 1" in why and "train.py --lr 2" in why
    assert command_mismatch(a, {"module": "pkg.train", "argv": []})
    assert describe_target(("module", "pkg.train", ("-x",), None)) == "-m pkg.train -x"


@pytest.fixture(scope="module")
def runs(fix_pair):
    return fix_pair   # base/, fixed/ (--fix fused-optim): WORKLOAD, ARGS, as conftest.fix_pair runs them; only read


def test_compare_html_page(runs, browser, tmp_path):  # noqa: F811
    out = tmp_path / "sub" / "cmp.html"
    r = run_haiprof("compare", runs / "base", runs / "fixed", "--html", out)
    assert r.returncode == 0, r.stderr
    assert out.is_file() and f"page: {out}" in r.stdout and "loss guard: ok" in r.stdout
    html = out.read_text()
    assert "<script src" not in html and "<link" not in html
    page, problems, requests = open_report(browser, out)
    assert problems == []
    assert requests == [out.as_uri()]
    assert "ok" in page.locator("#loss-guard").inner_text()
    assert page.locator("#fig-ba_phases .bars path").count() >= 4    # before and after bars per phase
    assert page.locator("#fig-ba_steps .bars path").count() >= 2     # both runs' step-time histograms
    legend = page.locator("#fig-ba_steps .legend").text_content()
    assert "before (p50" in legend and "after (p50" in legend
    assert "fused-optim" not in page.locator("#fix-regression").all_inner_texts()
    page.screenshot(path=artifact("compare.png"), full_page=True)
    page.close()


def test_fixed_runs_report_shows_the_same_charts(runs, browser):  # noqa: F811
    s = json.loads((runs / "fixed" / "summary.json").read_text())
    dist = s["comparison"]["step_distribution"]
    assert sum(dist["before"]) > 0 and sum(dist["after"]) > 0
    page, problems, _ = open_report(browser, runs / "fixed" / "report.html")
    assert problems == []
    assert page.locator("#fixes #fig-ba_phases .bars path").count() >= 4
    assert page.locator("#fixes #fig-ba_steps .bars path").count() >= 2
    assert page.locator("#fixes #loss-guard").count() == 1
    page.close()


def test_compare_refuses_different_commands_unless_forced(runs, seeded, tmp_path):
    other = seeded[1]   # a run of another command (conftest.seeded: seeded_train.py), only read
    r = run_haiprof("compare", runs / "base", other)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("haiprof: error: the runs are of different commands") and r.stderr.count("\n") == 1
    assert "--force" in r.stderr and "Traceback" not in r.stderr
    out = tmp_path / "forced.html"
    f = run_haiprof("compare", "--force", runs / "base", other, "--html", out)
    assert f.returncode == 0, f.stderr
    assert f.stdout.startswith("WARNING: the runs are of different commands")
    assert "compared with --force" in out.read_text()
    j = json.loads(run_haiprof("compare", "--json", "--force", runs / "base", other).stdout)
    assert j["different_commands"] and j["comparison"]["step_distribution"]


def test_compare_html_unwritable_is_one_line(runs, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_haiprof("compare", runs / "base", runs / "fixed", "--html", blocker / "cmp.html")
    assert r.returncode == 2 and r.stderr.startswith("haiprof: error: cannot write") and "Traceback" not in r.stderr
