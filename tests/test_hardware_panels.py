"""Hardware panels (issue 13): rates in units that read, an empty cross-NUMA chart said in words, collectors that
did not run named once (their reasons live in the Collectors section), start/end as local timestamps."""
from types import SimpleNamespace

from haiprof.render import hardware
from haiprof.render.html import _when, section_collectors


def run_data(numa_rates, collectors):
    hw = {"collectors": collectors,
          "numa": {"cross_node": {"samples": 5, "nodes": 2, "cross_node_bytes_per_s": 0.0, "cross_node_share": 0.0},
                   "placement": {"processes": [], "gpus": [], "nics": []}}}
    tl = {"numa": [("node0", {"t0": [0, 1], "t1": [1, 2], "rate": numa_rates})]}
    return SimpleNamespace(summary={"hardware": hw, "findings": [], "energy": {"available": False, "reason": "no RAPL"},
                                    "step_detection": {}},
                           timelines={"hardware": tl}, meta={"start_monotonic_ns": 0},
                           status={n: {"available": False, "reason": c["reason"]} for n, c in collectors.items()})


def test_rates_read_in_decimal_units():
    assert hardware._fmt_rate(None) == "n/a"
    assert hardware._fmt_rate(0) == "0 B/s" and hardware._fmt_rate(950) == "950 B/s"
    assert hardware._fmt_rate(12_345) == "12.3 kB/s" and hardware._fmt_rate(1.25e6) == "1.25 MB/s"
    assert hardware._fmt_rate(3.4e9) == "3.4 GB/s" and hardware._fmt_rate(250e6) == "250 MB/s"


def test_all_zero_cross_numa_is_words_and_missing_collectors_are_named_once():
    reasons = {"gpu": {"available": False, "reason": "NVML not found (libnvidia-ml)"},
               "infiniband": {"available": False, "reason": "no /sys/class/infiniband"}}
    d = run_data([0.0, 0.0], reasons)
    figs = {}
    html = hardware.section_hardware(d, figs)
    assert "hw-numa" not in figs and "No cross-NUMA traffic" in html
    assert 'id="hw-missing"' in html and "gpu, energy (no power source), infiniband" in html and 'href="#collectors"' in html
    page = html + section_collectors(d, {})
    for c in reasons.values():
        assert page.count(c["reason"]) == 1   # the reason once: in the Collectors table
    d = run_data([0.0, 2.5e6], reasons)
    figs = {}
    hardware.section_hardware(d, figs)
    fig = figs["hw-numa"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "MB/s" and fig["data"][0]["y"] == [0.0, 2.5]


def test_start_and_end_are_local_timestamps():
    s = _when(1_700_000_000.5)
    assert s[:4] == "2023" and ":" in s and "1700000000" not in s
    assert _when(None) == "" and _when("x") == "x"
