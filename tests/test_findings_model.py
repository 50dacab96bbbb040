"""Findings and actions are typed (analyzers/findings.py): a finding outside the contract fails where it is built,
and summary.json's findings keep the contract keys on a real run."""
import pytest

from conftest import GPU_RUNS, load_summary
from haiprof.analyzers.findings import FIX_IDS, SEVERITIES, Action, Finding, checked, edited
from haiprof.fixes import FIX_IDS as REGISTERED

CONTRACT = {"kind", "severity", "share", "message", "evidence", "fixes"}


def test_fix_ids_are_the_registered_fixes():
    assert set(FIX_IDS) == set(REGISTERED)


def test_unknown_fix_id_is_a_clear_error():
    with pytest.raises(ValueError, match=r"finding 'io': unknown fix id\(s\) \['turbo'\]"):
        Finding(kind="io", severity="high", share=0.5, message="m", fixes=["prefetch", "turbo"])


def test_unknown_severity_is_a_clear_error():
    with pytest.raises(ValueError, match="finding 'io': unknown severity 'critical'"):
        Finding(kind="io", severity="critical", message="m")


def test_action_fix_ids_checked():
    with pytest.raises(ValueError, match="unknown fix id"):
        Action(title="t", reason="r", gain_share=0.1, fix="turbo", kind="io")
    a = Action(title="t", reason="r", gain_share=0.1, fix=None, kind="communication")
    assert list(a.as_dict()) == ["title", "reason", "gain_share", "fix", "kind", "other_fixes", "gain_s", "predicted"]


def test_as_dict_keeps_the_contract_keys_and_values():
    ev = {"steps": 3}
    d = Finding(kind="energy", severity="info", message="m", evidence=ev, fixes=["prefetch"]).as_dict()
    assert list(d) == ["kind", "severity", "share", "message", "evidence", "fixes"]
    assert d["evidence"] is ev and d["share"] == 0.0
    d = edited(d, recommendation="r")
    assert d["recommendation"] == "r"


def test_checked_rejects_what_later_edits_break():
    good = Finding(kind="io", severity="high", message="m").as_dict()
    assert checked([good]) == [good]
    with pytest.raises(ValueError, match="unknown severity"):
        checked([{**good, "severity": "urgent"}])
    with pytest.raises(ValueError, match="finding 'io'"):
        checked([{**good, "priority": 1}])


@pytest.mark.skipif(not (GPU_RUNS / "h100-2026-11-22" / "h2d_base").is_dir(), reason="no recorded GPU runs here")
def test_real_run_findings_have_the_contract_keys(gpu_reports):
    (d, r), = gpu_reports(["h2d_base"]).values()
    assert r.returncode == 0, r.stderr
    s = load_summary(d)
    assert s["findings"]
    for f in s["findings"]:
        assert CONTRACT <= set(f) <= CONTRACT | {"recommendation", "removable_share"}, f["kind"]
        assert f["severity"] in SEVERITIES and set(f["fixes"]) <= set(FIX_IDS)
    for a in s.get("next_steps") or []:
        assert a["fix"] is None or a["fix"] in FIX_IDS
