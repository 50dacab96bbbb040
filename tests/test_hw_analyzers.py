"""Pure hardware analyzers on constructed inputs: counters, energy per step/phase, the input-bound split."""
import pytest

from haiprof.analyzers import counters, energy, input_split
from haiprof.analyzers.steps import build_steps

MS = 1_000_000


def test_counter_delta_wrap_saturation_reset():
    assert counters.delta(10, 25) == (15, "")
    assert counters.delta(2**32 - 10, 5, width=32) == (15, "wrapped")
    assert counters.delta(100, 2**32 - 1, width=32) == (2**32 - 101, "saturated")
    assert counters.delta(900, 100, max_value=1000) == (200, "wrapped")
    assert counters.delta(2**40, 5, width=64) == (None, "reset")


def _steps(n=4, step_ms=100, dl_ms=40):
    """n steps of step_ms each: dataloader first, then forward+backward, optimizer step at the end."""
    recs = []
    for i in range(n):
        t = i * step_ms * MS
        recs += [("dataloader", t, t + dl_ms * MS), ("forward", t + dl_ms * MS, t + 70 * MS),
                 ("backward", t + 70 * MS, t + 95 * MS), ("optimizer", t + 95 * MS, t + step_ms * MS),
                 ("@step", t + step_ms * MS, t + step_ms * MS)]
    steps, _ = build_steps(recs)
    return recs, steps


def test_energy_splits_joules_by_phase_with_constant_power():
    recs, steps = _steps()
    intervals = energy.phase_intervals(recs)
    segs = [(0, 400 * MS, 200.0)]  # 200 W for the whole run
    e = energy.summarize(steps, steps[1:], intervals, {"gpu": segs})
    assert e["available"] and e["steps"] == 3
    assert e["joules_per_step_median"] == pytest.approx(20.0)        # 200 W x 0.1 s
    assert e["waiting_for_input_share"] == pytest.approx(0.40)
    assert e["phase_joules"]["forward"] == pytest.approx(3 * 200 * 0.030)


def test_energy_follows_power_that_differs_between_phases():
    recs, steps = _steps()
    # Low power (50 W) while waiting for data, high (300 W) during compute: waiting is 40% of time, less energy.
    segs = []
    for i in range(4):
        t = i * 100 * MS
        segs += [(t, t + 40 * MS, 50.0), (t + 40 * MS, t + 100 * MS, 300.0)]
    e = energy.summarize(steps, steps[1:], energy.phase_intervals(recs), {"gpu": segs, "cpu": []})
    expected = (50 * 0.04) / (50 * 0.04 + 300 * 0.06)
    assert e["waiting_for_input_share"] == pytest.approx(expected)
    f = energy.finding(e, 0.05)
    assert f["kind"] == "energy" and f["message"].startswith(f"{100 * expected:.0f}% of energy")


def test_energy_from_nvml_counter_and_power_samples():
    samples = [{"t_ns": k * 500 * MS, "devices": [{"index": 0, "energy_mj": 1000 + k * 50_000},
                                                  {"index": 1, "power_mw": 100_000}]} for k in range(3)]
    segs = energy.gpu_segments(samples)
    assert sorted(round(w) for _, _, w in segs) == [100, 100, 100, 100]


def test_energy_unavailable_without_sources():
    recs, steps = _steps()
    assert energy.summarize(steps, steps, [], {"gpu": [], "cpu": []}) == {"available": False}


IO = {"kind": "io", "severity": "high", "share": 0.6, "message": "60% of step time waits for the DataLoader",
      "evidence": {"dataloader_share": 0.6}, "fixes": ["prefetch"]}


def _dl_records(busy_share, runq_share=0.0, n=10):
    wall = 50 * MS
    return [["dataloader", i * 100 * MS, i * 100 * MS + wall, int(busy_share * wall * (1 - runq_share)),
             int(runq_share * wall)] for i in range(n)]


def _loader(records):
    return input_split.loader_of_records(records)


def test_split_num_workers_0_storage_vs_preprocessing():
    storage = input_split.classify(IO, _loader(_dl_records(0.1)), [], {"vda": {"read_bytes_per_s_mean": 80e6}}, 8,
                                   0.7, 0.5)
    decode = input_split.classify(IO, _loader(_dl_records(1.0, runq_share=0.5)), [], {}, 8, 0.7, 0.5)
    assert storage["evidence"]["input_bound"] == "storage" and decode["evidence"]["input_bound"] == "preprocessing"
    assert storage["fixes"] == decode["fixes"] == ["prefetch"]
    assert "more DataLoader workers than cores" in storage["recommendation"]
    assert "up to the available cores" in decode["recommendation"]
    assert storage["message"] != decode["message"]
    assert "storage-bound" in storage["message"] and "preprocessing-bound" in decode["message"]
    # A contended host: half the wait queued for a CPU still reads as busy decoding.
    assert decode["evidence"]["input_split"]["loader_thread"]["cpu_share"] == pytest.approx(1.0)


def _system(children_pct, procs=3, n=6):
    return [{"t_ns": i * 500 * MS, "procs": procs, "cpu_children_pct": children_pct, "proc_read_bytes": i * 10**7}
            for i in range(n)]


def test_split_with_workers_uses_children_cpu():
    busy = input_split.classify(IO, _loader([]), _system(190.0), {}, 2, 0.7, 0.5)
    idle = input_split.classify(IO, _loader([]), _system(10.0), {}, 2, 0.7, 0.5)
    assert busy["evidence"]["input_bound"] == "preprocessing"
    assert idle["evidence"]["input_bound"] == "storage"
    assert idle["evidence"]["input_split"]["workers"]["workers"] == 2
    short = input_split.classify(IO, _loader([]), _system(190.0, n=2), {}, 2, 0.7, 0.5)
    assert short["evidence"]["input_bound"] == "unclear"  # too few samples of the workers to judge


def test_split_idle_without_reads_is_called_latency():
    out = input_split.classify(IO, _loader(_dl_records(0.05)), [], {"vda": {"read_bytes_per_s_mean": 0.0}}, 4, 0.7,
                               0.5)
    assert out["evidence"]["input_bound"] == "storage" and "latency-bound" in out["message"]


def test_reads_are_counted_over_the_steady_steps_not_the_start_up_or_the_traced_ones():
    """A loader that only waits (examples/input_bound.py sleeps 3 ms a sample) on a machine whose page cache was
    cold: torch's import read 30 MB at start-up and the profiler's libraries 9 MB in the traced steps; nothing
    was read while the steady steps ran. Over the whole run that was 4 MiB/s and "storage-bound"; over the steady
    steps it is nothing: latency-bound. A loader that reads in its steady steps is still storage-bound."""
    def system(steady_read_per_sample):
        out, read = [], 0
        for i in range(20):   # a sample every 0.5 s; steady steps from 2 s to 10 s, traced 3-4 s
            t = i * 500 * MS
            read += 30 << 20 if i == 1 else 9 << 20 if i == 7 else steady_read_per_sample if 4 <= i <= 19 else 0
            out.append({"t_ns": t, "proc_read_bytes": read})
        return out

    window = dict(start_ns=2000 * MS, end_ns=10_000 * MS, traced=[(3000 * MS, 3500 * MS), (3500 * MS, 4000 * MS)])
    loader = _loader([[r[0], r[1] + 2000 * MS, r[2] + 2000 * MS, *r[3:]] for r in _dl_records(0.05, n=60)])
    waits = input_split.classify(IO, loader, system(0), {}, 4, 0.7, 0.5, **window)
    assert waits["evidence"]["input_split"]["proc_read_bytes_per_s"] == 0.0 and "latency-bound" in waits["message"]
    whole_run = input_split.classify(IO, loader, system(0), {}, 4, 0.7, 0.5)   # no window: as before
    assert whole_run["evidence"]["input_split"]["proc_read_bytes_per_s"] > 4 << 20
    reads = input_split.classify(IO, loader, system(40 << 20), {}, 4, 0.7, 0.5, **window)
    rate = reads["evidence"]["input_split"]["proc_read_bytes_per_s"]
    assert rate == pytest.approx(80 << 20, rel=0.01) and "storage-bound" in reads["message"], rate


def test_energy_follows_the_device_partition_on_cuda_runs():
    """A DataLoader wait the GPU computed through is no energy spent waiting: the device's spans are its busy
    time and the host's phases only explain the gaps (the time partition's rule, applied to joules)."""
    from haiprof.analyzers import energy
    from haiprof.analyzers.steps import ALL_PHASES
    from step_rows import step_columns

    ms = 1_000_000
    # host: loads the next batch 0-60 ms while the GPU computes the last step 0-80 ms; then dispatches 60-70 ms
    records = [("dataloader", 0, 60 * ms), ("forward", 60 * ms, 70 * ms), ("gpu:forward", 0, 80 * ms),
               ("gpu:forward", 85 * ms, 100 * ms), ("@step", 100 * ms, 100 * ms)]
    ivs = energy.phase_intervals(records)
    assert ivs[1] is not None                                      # a CUDA run: split by the device partition
    steps = step_columns([(0, 0, 100 * ms)])
    per = energy.integrate(steps, ivs, [(0, 100 * ms, 100.0)])   # a flat 100 W
    joules = dict(zip(ALL_PHASES, per["phases"][0].tolist()))
    assert joules["dataloader"] == 0.0
    assert abs(joules["forward"] - 9.5) < 1e-9          # 95 ms of device work at 100 W
    assert abs(joules["other"] - 0.5) < 1e-9             # the 5 ms gap: the host outside any phase
    assert per["covered_ns"][0] == 100 * ms
    # the same host records without device spans: the DataLoader wait is 60 ms of the 100 W
    cpu = energy.integrate(steps, energy.phase_intervals([r for r in records if not r[0].startswith("gpu:")]),
                           [(0, 100 * ms, 100.0)])
    assert abs(dict(zip(ALL_PHASES, cpu["phases"][0].tolist()))["dataloader"] - 6.0) < 1e-9


def _cpu_samples(host_pct, main_pct, cores=2, n=6):
    return [{"t_ns": i * 10**9, "cpu_cores_pct": [host_pct] * cores, "cpu_main_pct": main_pct,
             "cpu_children_pct": 0.0} for i in range(n)]


def test_busy_neighbour_only_when_others_take_the_cpus():
    from haiprof.analyzers import thresholds as T
    from haiprof.analyzers.utilization import neighbour_finding

    f = neighbour_finding(_cpu_samples(100.0, 50.0), T.HOST_SATURATED, T.NEIGHBOUR_CORES)
    assert f and f["kind"] == "busy-neighbour" and abs(f["evidence"]["other_cores_mean"] - 1.5) < 1e-9
    assert neighbour_finding(_cpu_samples(100.0, 200.0), T.HOST_SATURATED, T.NEIGHBOUR_CORES) is None  # it is us
    assert neighbour_finding(_cpu_samples(40.0, 10.0), T.HOST_SATURATED, T.NEIGHBOUR_CORES) is None    # not saturated
    assert neighbour_finding(_cpu_samples(100.0, 50.0, n=2), T.HOST_SATURATED, T.NEIGHBOUR_CORES) is None  # too few


def test_compile_workers_are_the_runs_own_cores_for_both_load_figures():
    """torch.compile's worker pool (sampled apart as cpu_compile_pct) is the run's own load: not a busy neighbour,
    and not the "other processes" a fix comparison checks (analyzers/conditions.other_load): one definition."""
    from haiprof.analyzers import thresholds as T
    from haiprof.analyzers.conditions import other_load
    from haiprof.analyzers.utilization import neighbour_finding, run_cores

    compiling = [{**s, "cpu_compile_pct": 150.0} for s in _cpu_samples(100.0, 50.0)]
    assert run_cores(compiling[0]) == 2.0
    assert neighbour_finding(compiling, T.HOST_SATURATED, T.NEIGHBOUR_CORES) is None
    assert other_load(compiling)["other_cores"] == 0.0
    assert other_load(_cpu_samples(100.0, 50.0))["other_cores"] == 1.5   # without the pool: the same 1.5 as above


def test_other_processes_load_one_definition_two_statistics_two_names():
    """Other processes' cores per sample are defined once (utilization.other_cores); the busy-neighbour finding
    reports their mean as other_cores_mean, a fix comparison's conditions their median as other_cores: a burst
    moves the mean, not the median, and the two figures no longer share a name."""
    from haiprof.analyzers import thresholds as T
    from haiprof.analyzers.conditions import other_load
    from haiprof.analyzers.utilization import load_samples, neighbour_finding, other_cores

    samples = _cpu_samples(100.0, 50.0, n=6)
    samples[3] = {**samples[3], "cpu_main_pct": 0.0}   # one sample where the run was idle: others took 2 cores
    per = [other_cores(s) for s in load_samples(samples)]
    assert per == [1.5, 1.5, 2.0, 1.5, 1.5]
    f = neighbour_finding(samples, T.HOST_SATURATED, T.NEIGHBOUR_CORES)
    assert f["evidence"]["other_cores_mean"] == pytest.approx(sum(per) / len(per)) and "other_cores" not in f["evidence"]
    assert other_load(samples)["other_cores"] == 1.5   # the median: the burst is not the run's load
