import json

from conftest import run_haiprof

NAMES = ("system", "gpu", "infiniband", "nic", "numa", "membw", "rapl", "storage")


def test_doctor_lists_every_collector_with_reason_and_host_facts():
    r = run_haiprof("doctor", timeout=60)
    assert r.returncode == 0, r.stderr
    for name in NAMES:
        assert f"\n  {name}" in "\n" + r.stdout
    assert "cores:" in r.stdout and "NUMA nodes:" in r.stdout and "GPUs:" in r.stdout and "NICs:" in r.stdout
    j = json.loads(run_haiprof("doctor", "--json", timeout=60).stdout)
    rows = {c["collector"]: c for c in j["collectors"]}
    assert set(rows) == set(NAMES)
    for c in rows.values():
        assert c["available"] or (c["reason"] and c["how_to_enable"])
    assert j["host"]["cores"] >= 1 and "0" in j["host"]["numa_nodes"]


def test_doctor_bad_option_is_one_line():
    r = run_haiprof("doctor", "--nope", timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
