"""A long run's files are read back in bounded memory: samples of days are thinned to every k-th (first and last
kept), fewer are read whole."""
import json

from haiprof import rundir
from haiprof.rundir import RunDir


def _write_samples(run: RunDir, n: int) -> None:
    run.samples_file("system").write_text("".join(json.dumps({"t_ns": i, "rss_bytes": 1000 + i}) + "\n"
                                                  for i in range(n)))


def test_samples_of_a_long_run_are_thinned(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "MAX_SAMPLES", 1000)
    run = RunDir.create(tmp_path)
    _write_samples(run, 4500)
    got = run.read_samples("system")
    assert 900 <= len(got) <= 1001
    ts = [s["t_ns"] for s in got]
    assert ts[0] == 0 and ts[-1] == 4499 and ts == sorted(ts)
    assert len({b - a for a, b in zip(ts, ts[1:-1])}) == 1     # evenly spaced: the trend and averages hold


def test_samples_under_the_limit_are_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "MAX_SAMPLES", 1000)
    run = RunDir.create(tmp_path)
    _write_samples(run, 1000)
    with open(run.samples_file("system"), "a") as f:
        f.write('{"t_ns": 10')      # a torn last line: skipped
    assert [s["t_ns"] for s in run.read_samples("system")] == list(range(1000))
