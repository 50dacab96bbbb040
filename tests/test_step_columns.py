"""The step partition over numpy columns (analyzers/step_columns.py) against its definition: every step window
swept on its own with the reference attribute (tests/partition_reference.py) over all the intervals (innermost wins, then priority), the evaluation
blocks of its eval_blocks cut out, over random runs with nesting, intervals across step boundaries, eval
passes, GPU spans, tracing windows and malformed intervals. Also: the columns read from phases.bin equal the
records, and the report path (RunDir.read_phase_columns) keeps the order and the odd records."""
import statistics

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haiprof.analyzers import step_columns as C
import partition_reference as R
from haiprof.analyzers import steps as S
from haiprof.analyzers import timeline_owner as O
from haiprof.phasestore import PhaseColumns, encode_chunk, read_columns
from haiprof.rundir import RunDir
from step_rows import rows

NAMES = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "eval")


def reference(records):
    """build_steps as defined, one window at a time over every interval (quadratic: small runs only)."""
    host, gpu, marks = R.split_records(records)
    bounds, source = R.step_boundaries(marks)
    blocks = R.eval_blocks(records, bounds)
    if gpu:
        on_gpu = {p for p, _, _ in gpu}
        intervals = [iv for iv in host if iv[0] not in on_gpu] + gpu
    else:
        intervals = host
    if not bounds:
        return [], source
    first = min([bounds[0]] + [s for _, s, _ in intervals if s < bounds[0]])
    edges = [first] + bounds
    out = []
    for a, b in zip(edges, edges[1:]):
        a = R.clip_eval(a, b, blocks)
        if b > a:
            out.append((a, b, R.attribute(intervals, a, b)))
    windows = S.trace_windows(marks)
    return [(a, b, ph, any(b > wb and a < we for wb, we in windows)) for a, b, ph in out], source


@st.composite
def runs(draw):
    records, t = [], draw(st.integers(0, 50))
    gpu = draw(st.booleans())
    for _ in range(draw(st.integers(0, 14))):
        for _ in range(draw(st.integers(0, 6))):
            name = draw(st.sampled_from(NAMES))
            s = t + draw(st.integers(-30, 40))          # before the last boundary: across it
            e = s + draw(st.integers(-3, 60))            # negative: a malformed interval, dropped
            records.append((name, s, e))
            if gpu and draw(st.booleans()):
                records.append(("gpu:" + draw(st.sampled_from(NAMES)), s + 2, e + draw(st.integers(0, 30))))
            t += draw(st.integers(0, 25))
        kind = draw(st.sampled_from(["@step", "@step", "@backward", "@trace-begin", "@trace-end", "@loader"]))
        records.append((kind, t, t))
        t += draw(st.integers(0, 10))
    return records


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_columns_equal_the_per_window_sweep(records):
    want, source = reference(records)
    for block in (O.BLOCK, 1, 2, 5):   # the partition in blocks of windows: the same steps
        _check(records, want, source, block)


def _check(records, want, source, block):
    saved, O.BLOCK = O.BLOCK, block
    try:
        steps, info = S.build_steps(records)
    finally:
        O.BLOCK = saved
    assert info["boundary"] == source
    assert len(steps) == len(want)
    for i, (got, (a, b, ph, traced)) in enumerate(zip(rows(steps), want)):
        assert got == (i, a, b, ph, traced)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_eval_blocks_over_arrays(records):
    _, _, marks = R.split_records(records)
    bounds, _ = R.step_boundaries(marks)
    assert C.split_of_records(records).eval_blocks(bounds) == R.eval_blocks(records, bounds)


def test_steady_statistics_over_columns():
    recs, t = [], 0
    for i in range(40):
        d = 100 + (i * 37) % 23 + (900 if i < 3 else 0)     # a slow start, then noise
        recs += [("forward", t, t + d // 2), ("backward", t + d // 2, t + d - 5), ("@step", t + d, t + d)]
        t += d
    recs += [("@trace-begin", 2000, 2000), ("@trace-end", 2600, 2600)]
    steps, _ = S.build_steps(recs)
    for warmup in (0, 2, 5):
        a = S.steady_steps(steps, warmup)
        assert a.index[0] >= max(warmup, 3) and not a.traced.any()    # warm-up, slow start, window: out
        assert S.seconds_per_step(a) == pytest.approx(a.duration_ns.sum() / len(a) / 1e9)
        d = sorted((a.duration_ns / 1e9).tolist())
        stats = S.step_time_stats(a)
        assert (stats["median"], stats["mean"], stats["min"], stats["max"]) == \
            (statistics.median(d), statistics.fmean(d), d[0], d[-1])
        assert stats["p90"] == d[round(0.9 * (len(d) - 1))]


def test_columns_read_back_the_records(tmp_path):
    recs = [["forward", 5, 9], ["@mem", 9, 9, 1, 2, 3, 4], ["ddp", 9, 12, {"bucket": 1}], ["@step", 12, 12],
            ["backward", 12, 2 ** 70], ["dataloader", 13, 20, 3, 1]] * 50
    with open(tmp_path / "phases.bin", "wb") as f:
        for k in range(0, len(recs), 37):
            f.write(encode_chunk(recs[k:k + 37]))
    cols, torn = read_columns(tmp_path / "phases.bin")
    assert torn == 0 and cols.records() == recs
    assert cols.records(cols.rows({"@mem", "dataloader"}), odd=lambda r: False) == \
        [r for r in recs if r[0] in ("@mem", "dataloader")]
    assert PhaseColumns.from_records(recs).records() == recs
    waits = cols.take(cols.rows({"dataloader", "@mem"}))      # a subset as columns, extras along
    assert waits.records() == [r for r in recs if r[0] in ("dataloader", "@mem")]
    # an older run's phases.jsonl and a phases.bin read together, the jsonl's records first
    (tmp_path / "phases.jsonl").write_text('["forward", 1, 2]\n["x"]\n')
    both = RunDir(tmp_path).read_phase_columns()
    assert both.records() == [["forward", 1, 2]] + recs
    # a time beyond int64 (no clock reads that) is no interval of the partition, and no crash
    split = C.split_columns(both.names, both.code, both.start, both.end, [("backward", 12, 2 ** 70)])
    assert len(split.host[0]) == 1 + 50 + 50   # the forwards and loader waits; the backwards were all out of range


def test_times_past_float_precision_stay_exact():
    """CLOCK_MONOTONIC after 104 days of uptime is past 2^53 ns: no float on the way (a window never closed ends
    at inf), so one nanosecond still decides which step a window or an interval touches."""
    t0 = 2 ** 60
    recs = [("forward", t0, t0 + 10), ("@step", t0 + 10, t0 + 10), ("forward", t0 + 10, t0 + 20),
            ("@step", t0 + 20, t0 + 20), ("@trace-begin", t0 + 20, t0 + 20), ("forward", t0 + 20, t0 + 31),
            ("@step", t0 + 30, t0 + 30), ("@step", t0 + 40, t0 + 40)]
    steps, _ = S.build_steps(recs)
    want, _ = reference(recs)
    assert [r[1:] for r in rows(steps)] == want
    assert steps.traced.tolist() == [False, False, True, True]


def test_the_product_keeps_the_columns_only():
    """The list-based partition (one window at a time) is the tests' reference, not a second path in the product."""
    for name in ("split_records", "step_boundaries", "eval_blocks", "clip_eval", "attribute_all", "mark_traced",
                 "attribute"):
        assert not hasattr(S, name) and not hasattr(C, name), name
