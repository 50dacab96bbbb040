"""Small things of issue 13: fewer than 3 measured steps conclude nothing; run --help and README say what
there is (the torchrun form, every option, the summary keys)."""
from conftest import SCRIPTS, load_summary, run_haiprof


def test_steps_3_measures_too_few_steps_for_a_verdict(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--quiet", "--steps", "3", "--out", out, SCRIPTS / "seeded_train.py")
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["steps"] == 3 and s["steps_analyzed"] < 3
    assert s["bottleneck"] == "none" and "Too little data" in s["headline"]
    assert s["next_steps"] == []


def test_run_help_shows_the_torchrun_form():
    r = run_haiprof("run", "--help", timeout=60)
    assert r.returncode == 0
    assert "haiprof run [options] -- torchrun" in r.stdout and "--master-addr" in r.stdout


def test_readme_documents_every_run_option_and_the_summary_keys():
    from conftest import REPO
    from haiprof.commands.run import _run_parser
    readme = (REPO / "README.md").read_text()
    flags = {o for a in _run_parser()._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
    missing = sorted(f for f in flags if f"`{f}" not in readme)
    assert not missing, f"README's option table lacks {missing}"
    assert "-- torchrun" in readme
    for key in ("device", "next_steps", "gpu", "memory", "eval_s", "eval_share", "steps_measured", "steady"):
        assert f"`{key}`" in readme, key
    assert "plotly.js" in readme and "DecompressionStream" in readme   # how the charts come and why offline
