"""--fix on a distributed job haiprof launched (`--nproc-per-node`): each rank compares with the same rank of the
earlier unfixed job in the output directory (JOB/rank-K beside OLDJOB/rank-K), the job's page says what was
applied and quotes that rank's before/after, and a rank never runs a pass of the script on its own (alone it would
wait for, or join, the other ranks' process group): a stale baseline is compared with as it is, and said so."""
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import SCRIPTS, load_summary, run_haiprof
from haiprof.rundir import RunDir
from haiprof.runtime import fixrun

WORKLOAD = SCRIPTS / "ddp_fix_workload.py"


def _opts(**kw):
    base = dict(fix="compress", quiet=True, steps=None, interleave=0, sample_interval_s=0.5, module=None,
                script=str(WORKLOAD), args=[])
    return SimpleNamespace(**{**base, **kw})


def _rank_run(path: Path, rank, age_s: float = 0.0, conditions=None) -> None:
    """A finished run's files as a rank of a job writes them (meta, a summary with steps)."""
    rd = RunDir.create(path)
    now = time.time() - age_s
    meta = {"script": str(WORKLOAD), "cwd": os.getcwd(), "argv": [], "rank": rank, "exit_code": 0,
            "start_time": now - 5, "end_time": now}
    if conditions is not None:
        meta["conditions"] = conditions
    rd.write_meta(meta)
    rd.write_summary({"steps": 10, "step_time_s": {"median": 0.01, "steady": 0.01}})


def _key(rank):
    return fixrun.target_key({"script": str(WORKLOAD), "cwd": os.getcwd(), "argv": [], "rank": rank})


def test_a_rank_finds_its_own_rank_of_the_earlier_job(tmp_path):
    _rank_run(tmp_path / "old" / "rank-0", 0)
    _rank_run(tmp_path / "old" / "rank-1", 1)
    _rank_run(tmp_path / "new" / "rank-1", 1)   # another rank of this job: not a baseline
    mine = tmp_path / "new" / "rank-0"
    p = fixrun.plan(_opts(), mine, "ddp", _key(0), job_rank=True)
    assert p.baseline_run == str((tmp_path / "old" / "rank-0").resolve())
    assert p.baseline_caveat is None and p.remeasured is None


@pytest.mark.parametrize("age_s, theirs, why", [
    (3600, None, "60 min old"),
    (0, {"torch_threads": 2, "env": {}}, "set up under other conditions (torch threads 2 -> 1)"),
])
def test_a_ranks_stale_baseline_is_compared_as_it_is_and_said(tmp_path, age_s, theirs, why):
    _rank_run(tmp_path / "old" / "rank-0", 0, age_s=age_s, conditions=theirs)
    p = fixrun.plan(_opts(), tmp_path / "new" / "rank-0", "ddp", _key(0), {"torch_threads": 1, "env": {}},
                    job_rank=True)
    assert p.baseline_caveat == why and p.remeasured is None
    assert p.baseline_run == str((tmp_path / "old" / "rank-0").resolve())
    assert sorted(x.name for x in tmp_path.iterdir()) == ["old"]   # no pass of the script was started


def test_a_rank_under_torchrun_never_runs_passes_alone(tmp_path):
    """`torchrun ... haiprof run --fix X` (each rank its own --out beside its earlier run): the same rules."""
    _rank_run(tmp_path / "base-rank0", 0, age_s=3600)
    p = fixrun.plan(_opts(), tmp_path / "fixed-rank0", "ddp", _key(0))
    assert p.baseline_caveat == "60 min old" and p.baseline_run == str((tmp_path / "base-rank0").resolve())
    with pytest.raises(fixrun.FixRequestError, match="--interleave .* not in a rank"):
        fixrun.plan(_opts(interleave=2), tmp_path / "i-rank0", "ddp", _key(0))
    with pytest.raises(fixrun.FixRequestError, match="--fix auto in a rank .* needs an earlier run"):
        fixrun.plan(_opts(fix="auto"), tmp_path / "empty" / "a-rank0", "ddp", _key(0))
    assert sorted(x.name for x in tmp_path.iterdir()) == ["base-rank0"]


def test_a_fixed_job_is_compared_rank_by_rank_and_its_page_says_so(tmp_path):
    env = {"OMP_NUM_THREADS": "1"}
    base = run_haiprof("run", "--quiet", "--nproc-per-node", "2", "--out", tmp_path / "base", WORKLOAD, env=env,
                       timeout=300)
    assert base.returncode == 0, base.stderr[-3000:]
    r = run_haiprof("run", "--nproc-per-node", "2", "--fix", "compress", "--out", tmp_path / "fixed", WORKLOAD,
                    env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    for rank in (0, 1):   # each rank against its own rank of the earlier job
        fx = load_summary(tmp_path / "fixed" / f"rank-{rank}")["fixes"]
        assert fx["baseline_run"] == str((tmp_path / "base" / f"rank-{rank}").resolve()), fx
        assert fx["gain"]["speedup"] > 0 and not fx.get("comparison_note"), fx
    s = load_summary(tmp_path / "fixed")
    gain = load_summary(tmp_path / "fixed" / "rank-0")["fixes"]["gain"]
    assert [x["id"] for x in s["fixes"]["results"] if x["status"] == "applied"] == ["compress"]
    note = s["fixes"]["comparison_note"]
    assert note.startswith("before/after is per rank: rank 0's steady step") and f"({gain['speedup']:.2f}x" in note
    assert "comparison" not in s   # the job's own figures pool the ranks: no rank's step is quoted as the job's
    # the fix applied is not advised again
    assert "--fix compress" not in s["headline"] and "compress" in s["advice_left_out"], s["headline"]
    assert not any("compress" in (a.get("fixes") or []) for a in s["next_steps"]), s["next_steps"]
    assert "compress: applied" in r.stderr and note in r.stderr, r.stderr
    assert "before/after is per rank" in (tmp_path / "fixed" / "report.html").read_text()
    assert json.loads((tmp_path / "fixed" / "rank-0" / "fixes.json").read_text())["baseline_caveat"] is None
    # a rank that found its baseline stale says so; the job's console and page quote that rank's sentence
    fixes = tmp_path / "fixed" / "rank-0" / "fixes.json"
    fixes.write_text(json.dumps({**json.loads(fixes.read_text()), "baseline_caveat": "60 min old"}))
    rep = run_haiprof("report", tmp_path / "fixed")
    assert rep.returncode == 0, rep.stderr
    note = load_summary(tmp_path / "fixed")["fixes"]["baseline_note"]
    assert note.startswith("baseline not re-measured: the latest unfixed run of this rank was 60 min old"), note
    assert f"haiprof: {note}" in rep.stderr
    assert f'id="fix-baseline">B{note[1:]}.' in (tmp_path / "fixed" / "report.html").read_text()
