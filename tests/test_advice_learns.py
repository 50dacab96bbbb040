"""Advice learns from what was measured: never recommend what the script already does (autocast, a compiled
model, a fused/foreach optimizer), nor a fix this run applied, which shows its measurement instead."""
import pytest

from haiprof.analyzers import actions

from conftest import SCRIPTS, in_parallel, load_summary, run_haiprof

SCRIPT = SCRIPTS / "advice" / "already_tuned.py"
DONE = {"amp", "compile", "fused-optim"}


@pytest.mark.slow
def test_what_the_script_already_does_is_never_advised(tmp_path):
    r, plain = in_parallel(lambda: run_haiprof("run", "--quiet", "--out", tmp_path / "tuned", SCRIPT),
                           lambda: run_haiprof("run", "--quiet", "--out", tmp_path / "plain", SCRIPT, "--no-amp",
                                               "--no-compile", "--no-fused"))
    assert r.returncode == 0, r.stderr
    s = load_summary(tmp_path / "tuned")
    assert DONE <= set(s["script_uses"]) and DONE <= set(s["advice_left_out"]), s["script_uses"]
    assert not DONE & {a["fix"] for a in s["next_steps"]}, s["next_steps"]
    html = (tmp_path / "tuned" / "report.html").read_text()
    assert "Not recommended:" in html and "the script already does it" in html
    # nowhere else on the page either: not in a finding's fixes, the headline or the Findings box
    assert not DONE & {x for f in s["findings"] for x in f["fixes"]}, [(f["kind"], f["fixes"]) for f in s["findings"]]
    findings_box = html.split('<section id="findings">')[1].split("</section>")[0]
    for x in DONE:
        assert f"--fix {x}" not in s["headline"] and f"--fix {x}" not in findings_box, (x, s["headline"])
    # a CPU run never speaks of a GPU in its verdict, findings or actions
    words = [s["headline"], *(f["message"] for f in s["findings"]), *(a["reason"] for a in s["next_steps"])]
    assert not [w for w in words if "GPU" in w], words

    assert plain.returncode == 0, plain.stderr
    s = load_summary(tmp_path / "plain")
    assert not DONE & set(s["script_uses"]), s["script_uses"]
    # left out, if at all, for what it is predicted to pay here (analyzers/whatif.py), never as already done
    assert not [x for x in DONE if "already does it" in s["advice_left_out"].get(x, "")], s["advice_left_out"]


def _summary(**extra):
    return {"steps": 50, "steps_measured": 50, "step_time_s": {"steady": 0.1},
            "findings": [{"kind": "io", "severity": "high", "share": 0.6, "message": "m", "evidence": {},
                          "fixes": ["prefetch"]},
                         {"kind": "compute", "severity": "moderate", "share": 0.4, "message": "m", "evidence": {},
                          "fixes": ["amp", "compile"]}], **extra}


def test_a_fix_measured_in_this_run_is_shown_not_recommended():
    assert [a["fix"] for a in actions.rank(_summary())] == ["prefetch", "amp"]
    slower = _summary(fixes={"results": [{"id": "prefetch", "status": "applied"}], "gain": {"speedup": 0.72}})
    assert actions.left_out(slower) == {"prefetch": "applied in this run: measured 0.72x on the steady step"}
    assert [a["fix"] for a in actions.rank(slower)] == ["amp"]
    uses_amp = _summary(script_uses={"amp": "autocast (cuda)"})
    ranked = actions.rank(uses_amp)
    assert [a["fix"] for a in ranked] == ["prefetch", "compile"] and "Compile" in ranked[1]["title"]


def test_a_pinned_loader_gets_no_pin_memory_advice():
    s = _summary(gpu={"pageable_h2d_share": 0.2, "copies": [{"kind": "HtoD pageable", "gb_per_s": 3.0}]})
    assert actions.rank(s)[0]["title"].startswith("Pin host memory")
    pinned = _summary(gpu=s["gpu"], script_uses={"pin_memory": "DataLoader(pin_memory=True)"})
    assert not actions.rank(pinned)[0]["title"].startswith("Pin")


def test_the_verdicts_action_comes_first_even_where_another_gains_more():
    """One story: an io finding graded moderate is no verdict (io needs high), yet it can remove more than the
    compute verdict's fix; the first action is still the verdict's, the other follows."""
    s = _summary()
    s["bottleneck"] = "compute"
    s["findings"][0]["severity"] = "moderate"
    assert [a["fix"] for a in actions.rank(s)] == ["amp", "prefetch"]
