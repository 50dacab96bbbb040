"""The bundled examples get the verdict they were built to show, and the shares add up."""
import pytest

from conftest import SCRIPTS, load_summary, run_haiprof

PHASES = {"dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "other"}



@pytest.mark.parametrize("example,expected", [("input_bound.py", "io"), ("compute_bound.py", "compute")])
def test_bundled_example_verdict(example_run, example, expected):
    out, r = example_run(example)   # conftest.example_run: one run per example, shared
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["bottleneck"] == expected, s["headline"]
    assert set(s["phase_share"]) == PHASES
    assert abs(sum(s["phase_share"].values()) - 1) <= 0.01
    assert s["step_time_s"]["median"] > 0
    assert s["schema_version"] == 1 and s["exit_code"] == 0
    assert s["phase_share"]["h2d"] == 0  # CPU-only: measured zero, not a guess
    for f in s["findings"]:
        assert {"kind", "severity", "message", "evidence", "fixes"} <= set(f)
    top = next(f for f in s["findings"] if f["kind"] == expected)
    assert top["severity"] in ("high", "moderate") and top["evidence"]
    bound = [f for f in s["findings"] if f["kind"] in ("io", "compute", "launch", "communication")]
    assert bound[0] is not None and bound[0]["kind"] == expected, [(f["kind"], f["severity"]) for f in bound]
    if top["fixes"]:
        # one story: the verdict's finding leads the findings of its rank and "Do this next" starts with its fix
        assert s["next_steps"][0]["kind"] == expected and s["next_steps"][0]["fix"] == top["fixes"][0]
        # one sentence: the verdict's share and what its first fix can remove at most, in ms of the steady step
        assert f"--fix {s['next_steps'][0]['fix']} can remove at most" in s["headline"], s["headline"]
    else:   # every fix predicted to pay nothing here (amp on a CPU without bf16): the headline says why
        gone = top["evidence"]["fixes_left_out"]
        assert gone and all(why.startswith("not worth it here") for why in gone.values()), gone
        assert "its fixes are left out: " in s["headline"] and expected not in {a["kind"] for a in s["next_steps"]}
    assert s["headline"].count(". ") == 0 or "busy machine" in s["headline"], s["headline"]
    assert s["headline"] in r.stderr.replace("haiprof: ", "")


def test_input_bound_fix_is_prefetch(example_run):
    out, r = example_run("input_bound.py")
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    io = next(f for f in s["findings"] if f["kind"] == "io")
    assert io["fixes"] == ["prefetch"]
    assert io["evidence"]["dataloader_share"] >= 0.2 and io["severity"] == "high"


def test_seeded_training_identical_losses(seeded):
    plain, out, ours = seeded   # seeded_train.py under python and under haiprof (conftest.seeded)
    assert plain.returncode == 0 and ours.returncode == 0
    assert ours.stdout == plain.stdout
    assert len(plain.stdout.splitlines()) == 16
    assert load_summary(out)["steps"] == 16


def test_script_that_never_trains(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--out", out, SCRIPTS / "argv_echo.py")
    assert r.returncode == 0
    s = load_summary(out)
    assert s["bottleneck"] == "none" and s["steps"] == 0
    assert "no training steps detected" in s["headline"].lower()
    assert abs(sum(s["phase_share"].values()) - 1) <= 0.01
