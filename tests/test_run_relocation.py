"""Run directories are relocatable (issue 28): a fixed run moved together with its baseline keeps its before/after.
fixes.json names the baseline relative to the run as well as absolute; readers try relative, then absolute, then a
sibling of the same name (an older fixes.json, with only the absolute path, moved with its baseline)."""
import json
import shutil

import pytest

from conftest import SCRIPTS, load_summary, run_haiprof

from haiprof.analysis.fix_results import add_fix_results
from haiprof.rundir import RunDir, links

WORKLOAD = SCRIPTS / "fix_workload.py"
ARGS = ["--steps", "12"]


@pytest.fixture(scope="module")
def made(fix_pair):
    """A baseline and a fused-optim run of it, side by side, as `haiprof run` leaves them (only copied from): WORKLOAD
    with ARGS, as conftest.fix_pair runs them."""
    parent = fix_pair
    s = load_summary(parent / "fixed")
    assert s["comparison"]["baseline_run"] == str((parent / "base").resolve()) and s["comparison"]["speedup"]
    return parent


def _moved(made, tmp_path, old_format=False):
    """Copies of both runs under tmp_path/a, then moved together to tmp_path/elsewhere/b."""
    for name in ("base", "fixed"):
        shutil.copytree(made / name, tmp_path / "a" / name)
    fx_path = tmp_path / "a" / "fixed" / "fixes.json"
    fx = json.loads(fx_path.read_text())
    fx["baseline_run"] = str((tmp_path / "a" / "base").resolve())   # as if it had been made here
    if old_format:   # written before the relative keys: only the absolute path
        fx = {k: v for k, v in fx.items() if not k.endswith(links.REL)}
    fx_path.write_text(json.dumps(fx))
    (tmp_path / "elsewhere").mkdir()
    dest = tmp_path / "elsewhere" / "b"
    shutil.move(tmp_path / "a", dest)
    assert not (tmp_path / "a").exists()
    return dest


def _assert_before_after(dest, r):
    assert r.returncode == 0, r.stderr
    assert "unreadable" not in r.stderr, r.stderr
    s = load_summary(dest / "fixed")
    assert "comparison_note" not in s["fixes"], s["fixes"]
    assert s["comparison"]["speedup"] and s["fixes"]["gain"]["speedup"], s["comparison"]
    assert s["comparison"]["baseline_run"] == str((dest / "base").resolve())
    assert s["fixes"]["baseline_run"] == str((dest / "base").resolve())
    assert s["loss_guard"]["status"] == "ok", s["loss_guard"]
    html = (dest / "fixed" / "report.html").read_text()
    assert 'id="before-after"' in html and "unreadable" not in html and "before/after against" in r.stderr


def test_fixes_json_names_the_baseline_relative_to_the_run(made):
    fx = json.loads((made / "fixed" / "fixes.json").read_text())
    assert fx["baseline_run_rel"] == "../base"
    assert fx["baseline_run"] == str((made / "base").resolve())   # older readers: still absolute
    assert fx["diagnosis_run"] is None and fx["diagnosis_run_rel"] is None


def test_a_fixed_run_moved_with_its_baseline_keeps_its_before_after(made, tmp_path):
    dest = _moved(made, tmp_path)
    _assert_before_after(dest, run_haiprof("report", dest / "fixed"))


def test_an_older_fixes_json_moved_with_its_baseline_finds_the_sibling(made, tmp_path):
    dest = _moved(made, tmp_path, old_format=True)
    assert "baseline_run_rel" not in json.loads((dest / "fixed" / "fixes.json").read_text())
    _assert_before_after(dest, run_haiprof("report", dest / "fixed"))


def _run(d):
    d.mkdir(parents=True)
    return d


def test_resolve_order(tmp_path):
    here = _run(tmp_path / "p" / "fixed")
    near, far = _run(tmp_path / "p" / "base"), _run(tmp_path / "q" / "base")
    both = {"baseline_run": str(far), "baseline_run_rel": "../base"}
    assert links.resolve(here, both, "baseline_run") == str(near.resolve())              # relative first
    assert links.resolve(here, {**both, "baseline_run_rel": "../gone"}, "baseline_run") == str(far.resolve())
    shutil.rmtree(near)
    assert links.resolve(here, both, "baseline_run") == str(far.resolve())               # then absolute
    old = {"baseline_run": str(tmp_path / "gone" / "other")}
    assert links.resolve(here, old, "baseline_run") == old["baseline_run"]               # found nowhere: as recorded
    _run(tmp_path / "p" / "other")
    assert links.resolve(here, old, "baseline_run") == str((tmp_path / "p" / "other").resolve())   # a sibling
    assert links.resolve(here, {"baseline_run": None}, "baseline_run") is None
    assert links.relative(here, far) == "../../q/base" and links.relative(here, None) is None


def test_interleaved_passes_resolve_where_they_are(tmp_path):
    """--interleave's pass pairs are links too: summary.json names them where they are now."""
    run = _run(tmp_path / "b" / "fixed")
    a, f = _run(tmp_path / "b" / "x-baseline"), _run(tmp_path / "b" / "x-fixed-pass")
    fx = {"spec": "fused-optim", "requested": {"fused-optim": None}, "results": [],
          "interleaved": [{"baseline_run": "/nowhere/a/x-baseline", "baseline_run_rel": "../x-baseline",
                           "fixed_run": "/nowhere/a/x-fixed-pass"}]}
    (run / "fixes.json").write_text(json.dumps(fx))
    summary = {"findings": []}
    add_fix_results(RunDir(run), {}, summary)
    assert summary["fixes"]["interleaved_runs"] == [{"baseline_run": str(a.resolve()), "fixed_run": str(f.resolve())}]
