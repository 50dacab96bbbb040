"""Findings only above a significance floor, each floor a rule (issue 28): haiprof's own trace export is not the
script's checkpoint, a memory rise over a short start-up is no leak, a stall at every step is no periodic stall,
and a few empty pageable copies are no finding, nor a reason to title an action "Pin host memory"."""
import numpy as np
import pytest

from conftest import load_summary
from haiprof.analysis import whole_run

MS = 1_000_000


# -- 1. haiprof's own trace export is not "a checkpoint?" ------------------------------------------------------

def _slow_rows_around_a_write(marks):
    """Ten 10 ms steps; the process tree writes 13 MB in the sampler interval that holds step 6 (steps 3-12)."""
    start = np.arange(10, dtype=np.int64) * 11 * MS
    a = {"index": np.arange(10, dtype=np.int64) + 3, "start": start, "end": start + 10 * MS}
    t = np.arange(0, 120 * MS, 5 * MS)
    wrote = np.where(t >= a["start"][3] + 2 * MS, 13 * 10**6, 0)
    system = [{"t_ns": int(x), "proc_write_bytes": int(w)} for x, w in zip(t, wrote)]
    rows = [{"step": 6, "time_ms": 10.0, "phases_ms": {}, "notes": []}]
    whole_run._context(rows, a, marks(a), system)
    return rows[0]["notes"]


def test_a_write_while_haiprof_exports_its_trace_is_haiprofs_own():
    # the window's end mark (taken after the export) falls in the interval of the write
    notes = _slow_rows_around_a_write(lambda a: [["@trace-begin", int(a["start"][0])] * 2,
                                                 ["@trace-end", int(a["start"][3]) + 3 * MS] * 2])
    assert len(notes) == 1 and "checkpoint" not in notes[0]
    assert "wrote 13 MB" in notes[0] and "haiprof's own export of its op-level trace" in notes[0]


def test_a_window_the_run_ended_inside_owns_the_writes_after_it():
    notes = _slow_rows_around_a_write(lambda a: [["@trace-begin", int(a["start"][1])] * 2])
    assert "haiprof's own" in notes[0]


def test_a_write_away_from_any_trace_window_may_be_a_checkpoint():
    notes = _slow_rows_around_a_write(lambda a: [["@trace-begin", int(a["start"][0])] * 2,
                                                 ["@trace-end", int(a["start"][1])] * 2])
    assert notes == ["the process wrote 13 MB to disk around it (a checkpoint?)"]


@pytest.mark.parametrize("name", ["compute_a", "compute_base", "nanogpt", "launch_g"])
def test_recorded_runs_blame_no_checkpoint_on_the_trace_export(gpu_reports, name):
    """These H100 runs write no checkpoint: the 2-13 MB written around a slow step right after the tracing window
    (steps 2-6) is the trace's export."""
    d, r = gpu_reports([name])[name]
    assert r.returncode == 0, r.stderr
    notes = [n for row in load_summary(d)["slowest_steps"] for n in row["notes"]]
    assert not any("checkpoint" in n for n in notes), notes
    assert any("haiprof's own export of its op-level trace" in n for n in notes), notes


# -- 2. a memory rise over the start-up is no leak -------------------------------------------------------------

def _whole_run(n_steps, step_s, rss):
    """whole_run.analyze over `n_steps` steady steps of `step_s` each, host RSS sampled every 0.5 s by rss(t_s)."""
    from step_rows import step_columns
    ns = int(step_s * 1e9)
    steps = step_columns([(i + 3, i * ns, (i + 1) * ns, {"forward": ns}) for i in range(n_steps)])
    t = np.arange(0, n_steps * ns, int(0.5e9))
    system = [{"t_ns": int(x), "rss_bytes": int(rss(x / 1e9))} for x in t]
    return [f for f in whole_run.analyze(steps, [], {"system": system})["findings"] if f["kind"] == "memory-creep"]


GIB = 2**30


def test_a_rise_over_twelve_steps_is_no_leak():
    # 12 steps of 6.3 s: the model loads its weights, 1.5 -> 1.73 GiB (the "10.91 GiB per hour")
    assert _whole_run(12, 6.3, lambda t: 1.5 * GIB + 0.23 * GIB * t / 76) == []


def test_a_rise_that_stops_is_start_up_allocation_not_a_leak():
    # 400 steps over 200 s; RSS grows 1 GiB over the first 60 s (weights, allocator pools), then holds
    assert _whole_run(400, 0.5, lambda t: 2 * GIB + GIB * min(t, 60.0) / 60) == []


def test_one_late_allocation_is_a_jump_not_a_leak():
    # recorded launch_auto's shape: flat, then a cache built once in the run's last tenth
    assert _whole_run(300, 0.1, lambda t: 1.7 * GIB + 0.01 * GIB * t + (6 * GIB if t > 27 else 0)) == []


def test_a_leak_that_keeps_its_rate_is_found():
    found = _whole_run(400, 0.5, lambda t: 2 * GIB + 5e6 * t)
    assert len(found) == 1 and found[0]["evidence"]["steps"] == 400
    assert found[0]["evidence"]["bytes_per_s"] == pytest.approx(5e6, rel=0.1)


def test_recorded_launch_auto_has_no_leak(gpu_reports):
    """launch_auto (299 steady steps, 6 s): host RSS flat at 1.7 GiB, then +5.9 GiB at once near the end."""
    d, r = gpu_reports(["launch_auto"])["launch_auto"]
    assert r.returncode == 0, r.stderr
    assert not [f["message"] for f in load_summary(d)["findings"] if f["kind"] == "memory-creep"]


# -- 3. a stall at every step is the step itself, not a periodic stall ---------------------------------------

def _starts(d):
    return np.concatenate([[0.0], np.cumsum(d)[:-1]])


def test_a_slow_stretch_of_adjacent_steps_is_no_periodic_stall():
    from haiprof.analyzers import long_run
    d = 10 * MS * (1 + 0.05 * np.random.default_rng(0).standard_normal(600))
    d[200:260] *= 3   # 60 slow steps in a row (a neighbour's burst): one occurrence, no period ("every 1 steps")
    assert long_run.periodic_stalls(d, _starts(d)) is None


def test_dense_irregular_stalls_have_no_period_in_steps_or_seconds():
    """Recorded h2d_auto's shape: 100 ms DataLoader waits 1 to 6 steps apart on 4 ms steps. A step's slack made
    "every 2 steps" of them, and the stalls' own length evenly spaced them in time ("every 0.118 s")."""
    from haiprof.analyzers import long_run
    rng = np.random.default_rng(0)
    d = 4 * MS * (1 + 0.05 * rng.standard_normal(600))
    i = int(rng.integers(1, 7))
    while i < 600:
        d[i] += 100 * MS * (1 + 0.1 * rng.standard_normal())
        i += int(rng.integers(1, 7))
    assert long_run.periodic_stalls(d, _starts(d)) is None


def test_a_short_exact_period_is_still_found():
    from haiprof.analyzers import long_run
    d = 10 * MS * (1 + 0.05 * np.random.default_rng(0).standard_normal(600))
    d[::3] += 30 * MS
    f = long_run.periodic_stalls(d, _starts(d))
    assert f and f["evidence"]["period_steps"] == 3 and f["message"].startswith("a stall every 3 steps")


@pytest.mark.parametrize("name", ["h2d_auto", "h2d_p"])
def test_recorded_prefetch_runs_stall_once_an_epoch(gpu_reports, name):
    """gpu_h2d.py: 1024 images in batches of 128, so 8 steps an epoch; with DataLoader workers (--fix prefetch)
    the epoch's first batch waits ~150-300 ms. Stalls in between are irregular: once "a stall every 2 steps"."""
    d, r = gpu_reports([name])[name]
    assert r.returncode == 0, r.stderr
    stalls = [f for f in load_summary(d)["findings"] if f["kind"] == "periodic-stall"]
    assert len(stalls) == 1 and stalls[0]["evidence"]["period_steps"] == 8, [f["message"] for f in stalls]


# -- 4. pageable copies: weighed against the step, never counted alone --------------------------------------

def test_pageable_copies_that_cannot_be_weighed_are_no_finding():
    from haiprof.analyzers.h2d import pageable_finding
    six = {"copies": 6, "pageable": 6, "pinned": 0, "pageable_bytes": 0, "pinned_bytes": 0,
           "pageable_us": 5.537, "pinned_us": 0.0, "pageable_share": 1.0}   # launch_base's trace
    assert pageable_finding(six, None) is None                       # no traced step time: nothing to weigh
    assert pageable_finding(six, None, traced_us=90_000.0) is None   # 0.006% of the traced steps
    assert pageable_finding(six, False, traced_us=None)["severity"] == "info"   # pin_memory=False still says so


def test_a_weighed_pageable_finding_says_its_share_without_empty_sizes():
    from haiprof.analyzers.h2d import pageable_finding
    heavy = {"copies": 6, "pageable": 6, "pinned": 0, "pageable_bytes": 0, "pinned_bytes": 0,
             "pageable_us": 25_074.8, "pinned_us": 0.0, "pageable_share": 1.0}   # h2d_base: 77 MB batches
    f = pageable_finding(heavy, None, traced_us=77_400.0)
    assert f["severity"] == "moderate" and f["share"] == pytest.approx(0.324, abs=0.001)
    assert "pageable memory (25.1 ms, 32.4% of the traced time)" in f["message"] and "(," not in f["message"]


def _io_summary(busy_h2d, pageable_gpu_share, pinned_gpu_share=0.0):
    copies = [{"kind": "HtoD pageable", "share": pageable_gpu_share, "gb_per_s": 10.5}]
    copies += [{"kind": "HtoD pinned", "share": pinned_gpu_share}] if pinned_gpu_share else []
    return {"steps": 31, "steps_measured": 30, "step_time_s": {"steady": 0.5},
            "device": {"idle_by_host": {"dataloader": 0.97}, "busy": {"h2d": busy_h2d}},
            "gpu": {"pageable_h2d_share": pageable_gpu_share, "copies": copies},
            "findings": [{"kind": "io", "severity": "high", "share": 0.97, "message": "m", "evidence": {},
                          "fixes": ["prefetch"]}]}


def test_pin_memory_is_the_title_only_where_pageable_copies_take_the_step():
    from haiprof.analyzers import actions
    # io_base: the GPU idles 97% of the step; its 19 µs of copies are 8% of GPU time and 0.2% of the step
    a = actions.rank(_io_summary(0.0024, 0.082))[0]
    assert not a["title"].startswith("Pin") and "pageable" not in a["reason"], a
    # h2d_base: copies fill 31% of the step, all of them pageable
    a = actions.rank(_io_summary(0.31, 0.90))[0]
    assert a["title"].startswith("Pin host memory") and "take 31% of the step (90% of GPU time)" in a["reason"]
    # copies fill 20% of the step, but only a tenth of their time is pageable: 2% of the step
    assert not actions.rank(_io_summary(0.20, 0.05, 0.45))[0]["title"].startswith("Pin")


@pytest.mark.parametrize("name,pageable,pin_title", [
    ("launch_base", False, False),   # 6 pageable copies, 5.5 µs in all: 0.1% of GPU time
    ("io_base", False, False),       # 19 µs of copies on a GPU idle 97% of the step
    ("compute_a", True, True),       # 15.5 ms of 6.5 GB/s copies: 5% of the traced time, 8% of the step
    # 77 MB batches: 32% of the traced time, 31% of the step; pinning's fix (prefetch) is predicted slower there
    ("h2d_base", True, False),
])
def test_recorded_pageable_findings_above_the_floor_only(gpu_reports, name, pageable, pin_title):
    d, r = gpu_reports([name])[name]
    assert r.returncode == 0, r.stderr
    s = load_summary(d)
    found = [f for f in s["findings"] if f["kind"] == "pageable-h2d"]
    assert bool(found) == pageable, [f["message"] for f in found]
    if found:
        assert found[0]["share"] >= 0.01 and "% of the traced time" in found[0]["message"]
    titles = [a["title"] for a in s.get("next_steps") or []]
    assert any(t.startswith("Pin host memory") for t in titles) == pin_title, titles
