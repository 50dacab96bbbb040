import json

import pytest

from conftest import run_haiprof

NAMES = ("system", "gpu", "infiniband", "nic", "numa", "membw", "rapl", "storage", "tcp")


@pytest.fixture(scope="module")
def doctor():
    """`haiprof doctor` and `haiprof doctor --json`, each run once for the module: (text result, json result)."""
    return run_haiprof("doctor", timeout=60), run_haiprof("doctor", "--json", timeout=60)


def test_doctor_lists_every_collector_with_reason_and_host_facts(doctor):
    r, as_json = doctor
    assert r.returncode == 0, r.stderr
    for name in NAMES:
        assert f"\n  {name}" in "\n" + r.stdout
    assert "cores:" in r.stdout and "NUMA nodes:" in r.stdout and "GPUs:" in r.stdout and "NICs:" in r.stdout
    j = json.loads(as_json.stdout)
    rows = {c["collector"]: c for c in j["collectors"]}
    assert set(rows) == set(NAMES)
    for c in rows.values():
        assert c["available"] or (c["reason"] and c["how_to_enable"])
    assert j["host"]["cores"] >= 1 and "0" in j["host"]["numa_nodes"]


def test_doctor_bad_option_is_one_line():
    r = run_haiprof("doctor", "--nope", timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr


def test_doctor_reports_cuda_kineto_and_cupti(doctor):
    import torch
    r, as_json = doctor
    assert r.returncode == 0, r.stderr
    tail = r.stdout.split("\ntorch:\n", 1)[1]
    for word in ("torch: ", "CUDA: ", "torch.profiler (Kineto): ", "CUPTI: "):
        assert word in tail, tail
    t = json.loads(as_json.stdout)["torch"]
    assert t["torch"] == torch.__version__ and t["cuda_available"] == torch.cuda.is_available()
    assert t["kineto"] is True and "CPU" in t["profiler_activities"]
    if torch.version.cuda is None:
        assert t["cupti"]["found"] is None and "CPU-only" in tail


def test_doctor_cuda_build_without_cupti_says_what_is_missing(monkeypatch):
    import torch

    from haiprof.commands import doctor
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(doctor, "_find_cupti", lambda: None)
    t = doctor.torch_facts()
    assert t["cupti"] == {"found": False, "where": None}
    text = "\n".join(doctor.torch_lines(t))
    assert "CUDA: built for 12.4" in text and "CUPTI: not found" in text
    monkeypatch.setattr(doctor, "_find_cupti", lambda: "/opt/x/libcupti.so.12")
    assert "CUPTI: /opt/x/libcupti.so.12" in "\n".join(doctor.torch_lines(doctor.torch_facts()))
    assert "unavailable" in doctor.torch_lines({"torch": None, "error": "import torch failed"})[0]
