"""The rank behind the barrier on hand-built ranks: who the job waits for, the cause from that rank's own record
(input, run-queue, pauses, compute, imbalance, in that order), the verdict and the first action that follow, and
what fixing it alone gives back. The same on synthetic 64-rank jobs built like benchmarks/job_scale.py's."""
import numpy as np
import pytest

from haiprof.analyzers import actions, culprit as C
from haiprof.analyzers import distributed as D
from step_rows import step_columns

MS = 1_000_000


def _rank(rank, phases_per_step, numel=1000, cpu_wait=None, host="h"):
    """phases_per_step: one {phase: ms} per step; each rank's allreduce is set by _lockstep."""
    steps, t = [], 0
    for i, ph in enumerate(phases_per_step):
        p = {k: int(v * MS) for k, v in ph.items()}
        p.setdefault("other", 0)
        dur = sum(p.values())
        steps.append((i, t, t + dur, p))
        t += dur
    steps = step_columns(steps)
    meta = {"host": host, "local_rank": rank, "exit_code": 0, "end_time": 1.0, "cpu_wait_share": cpu_wait}
    return D.RankInput(rank, meta, steps, len(steps), [numel] * len(steps))


def _lockstep(work: list, transfer=10.0) -> list:
    """work[r][i]: {phase: ms} before the sync of rank r in step i -> the same with each rank's exposed allreduce
    (the slowest rank's work less its own, plus the transfer): every rank leaves the sync together."""
    n = len(work[0])
    out = [[dict(w[i]) for i in range(n)] for w in work]
    for i in range(n):
        total = [sum(w[i].values()) for w in work]
        for r, w in enumerate(out):
            w[i]["allreduce"] = max(total) - total[r] + transfer
    return out


def _job(work, opts=None):
    """opts: rank -> _rank's keyword arguments."""
    per_rank = _lockstep(work)
    return [_rank(r, ph, **(opts or {}).get(r, {})) for r, ph in enumerate(per_rank)]


def _found(ranks, steady_ms):
    split = D.comm_split(ranks)
    return C.culprits(ranks, D.stragglers(ranks, split), {"nodes": [], "ranks": []}, steady_ms / 1e3)


def test_slow_loader_is_the_input_cause_with_the_others_wait_as_gain():
    ranks = _job([[{"dataloader": 2, "forward": 40, "backward": 40}] * 6,
                  [{"dataloader": 102, "forward": 40, "backward": 40}] * 6])
    [c] = _found(ranks, 194)
    assert c["subject"] == "rank 1" and c["cause"] == "input"
    assert c["late_ms"] == pytest.approx(100) and c["gain_ms"] == pytest.approx(100)
    assert c["action"]["fix"] == "prefetch" and "DataLoader workers on rank 1" in c["action"]["title"]
    assert C.job_bottleneck(c) == "io"


def test_run_queue_wait_comes_before_compute():
    # rank 1 computes 60 ms/step longer; its training thread waited for a CPU 50% of its runnable time, rank 0's 0%
    ranks = _job([[{"forward": 30, "backward": 30}] * 6, [{"forward": 60, "backward": 60}] * 6],
                 {0: {"cpu_wait": 0.0}, 1: {"cpu_wait": 0.5}})
    [c] = _found(ranks, 130)
    assert c["cause"] == "run-queue", c
    assert c["excess_ms"]["run-queue"] == pytest.approx(60)
    assert "another process shares its CPU cores" in C.because(c) and c["action"]["fix"] is None
    # the same stretch with no run-queue wait is the rank's own compute: its host's
    ranks = _job([[{"forward": 30, "backward": 30}] * 6, [{"forward": 60, "backward": 60}] * 6],
                 {0: {"cpu_wait": 0.2}, 1: {"cpu_wait": 0.2}})
    [c] = _found(ranks, 130)
    assert c["cause"] == "compute" and "Check h" in c["action"]["title"]
    # its host's own signs (evidence 5) are quoted: a throttled GPU, a NUMA finding only it has
    signs = C.host_signs({0: {"findings": [{"kind": "busy-neighbour", "message": "other load"}]},
                          1: {"findings": [{"kind": "numa", "message": "40% of its memory on the other node"},
                                           {"kind": "busy-neighbour", "message": "other load"}],
                              "hardware": {"gpu": {"0": {"throttle_reasons_seen": ["hw_slowdown"]}}}}})
    split = D.comm_split(ranks)
    [c] = C.culprits(ranks, D.stragglers(ranks, split), {"nodes": [], "ranks": []}, 0.130, signs)
    assert c["host_signs"] == {"numa": "40% of its memory on the other node", "throttle": "GPU 0: hw_slowdown"}
    assert "numa: 40% of its memory" in C.because(c) and "busy-neighbour" not in C.because(c)
    ranks = _job([[{"forward": 30, "backward": 30}] * 6, [{"forward": 60, "backward": 60}] * 6],
                 {1: {"numel": 2000}})
    [c] = _found(ranks, 130)
    assert c["cause"] == "data imbalance" and "2.00x" in C.because(c)


def test_a_pause_every_third_step_is_named_by_its_mean_not_its_median():
    base = {"forward": 20, "backward": 20}
    pausing = [dict(base, other=300.0 if i % 3 == 2 else 0.0) for i in range(9)]
    ranks = _job([[base] * 9, pausing])
    split = D.comm_split(ranks)
    assert D.stragglers(ranks, split) == []          # at the median step nobody is late
    [c] = _found(ranks, 150)
    assert c["subject"] == "rank 1" and c["cause"] == "pause"
    assert c["late_ms"] == pytest.approx(100) and (c["pause_steps"], c["steps_compared"]) == (3, 9)
    assert "in 3 of 9 steps" in C.because(c)


def test_a_small_wait_is_named_but_does_not_take_the_verdict():
    # rank 1 is 17 ms late on a 105 ms step (16%): a moderate finding, below what a class verdict needs (high)
    ranks = _job([[{"forward": 40, "backward": 38}] * 6, [{"forward": 49, "backward": 46}] * 6])
    [c] = _found(ranks, 105)
    assert c["late_ms"] == pytest.approx(17) and c["severity"] == "moderate"
    assert C.finding(c, 0, 0.105)["severity"] == "moderate"
    assert C.leads([c], 0.0) is None
    c = dict(c, severity="high", late_share=0.3)
    assert C.leads([c], 0.25) is c and C.leads([c], 0.35) is None   # the class verdict's removable share wins


def test_even_ranks_have_no_culprit():
    ranks = _job([[{"forward": 40, "backward": 40}] * 6, [{"forward": 41, "backward": 40}] * 6])
    assert _found(ranks, 91) == []


def test_first_action_is_the_culprits_own_and_claims_its_fix():
    ranks = _job([[{"dataloader": 2, "forward": 40, "backward": 40}] * 6,
                  [{"dataloader": 102, "forward": 40, "backward": 40}] * 6])
    [c] = _found(ranks, 194)
    io = {"kind": "io", "severity": "high", "share": 0.3, "message": "30% waits for the DataLoader",
          "evidence": {"dataloader_share": 0.3}, "fixes": ["prefetch"]}
    comm = {"kind": "communication", "severity": "moderate", "share": 0.05, "message": "transfer",
            "evidence": {}, "fixes": ["compress", "bucket"]}
    summary = {"steps": 6, "step_time_s": {"steady": 0.194}, "bottleneck": "io", "culprit": {"subject": "rank 1"},
               "findings": [io, comm, C.finding(c, 0, 0.194)]}
    first, *rest = actions.rank(summary)
    assert first["kind"] == "straggler" and first["fix"] == "prefetch" and "rank 1" in first["title"]
    assert first["gain_s"] == pytest.approx(0.100, rel=1e-3)
    assert [a["fix"] for a in rest] == ["compress"]   # the job-wide loader advice is rank 1's, not repeated


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Synthetic 64-rank jobs (benchmarks/job_scale.py): a slow node; a slow node and a slower rank."""
    from benchmarks import job_scale
    from haiprof.analysis.ranks import analyze_job
    from haiprof.rundir import RunDir
    root = tmp_path_factory.mktemp("jobs")
    node = analyze_job(RunDir(job_scale.build_job(root / "node", 64, slow_node=3)))
    both = analyze_job(RunDir(job_scale.build_job(root / "both", 64, slow_node=3, slow_rank=61))).summary
    return node, both


def test_slow_node_is_the_verdicts_subject_and_first_action(jobs):
    s = jobs[0].summary
    # input-bound: the job is held up by one node's input pipeline (the ranks' mean input wait is small)
    assert s["bottleneck"] == "io" and s["phase_share"]["dataloader"] < 0.1
    assert s["culprit"]["subject"] == "node node003" and s["culprit"]["cause"] == "input"
    assert s["headline"].startswith("Input-bound (high): the other ranks waited for node node003's 8 slow "
                                    "ranks (24-31)"), s["headline"]
    first = s["next_steps"][0]
    assert "node003" in first["title"] and first["fix"] == "prefetch"
    assert first["gain_s"] == pytest.approx(0.040, rel=0.1)           # the 40 ms the others stop waiting
    comm = next(a for a in s["next_steps"] if a["fix"] == "compress")   # compression: the transfer share only
    assert comm["gain_share"] < first["gain_share"] / 2


def test_a_slower_rank_leads_and_the_node_follows(jobs):
    _, s = jobs
    c = s["distributed"]["culprits"]
    assert [x["subject"] for x in c] == ["rank 61", "node node003"]
    assert "rank 61 (node007, local rank 5)" in s["headline"] and "node node003" in s["headline"]
    # fixing rank 61 alone takes the job down to the node's lateness: 60 - 40 ms
    assert s["next_steps"][0]["gain_s"] == pytest.approx(0.020, rel=0.15)
    assert "node003" in s["next_steps"][1]["title"]


def test_job_page_names_its_populations_and_agrees_with_itself(jobs):
    import re

    import numpy as np

    from haiprof.analyzers.page_invariants import page_text
    from haiprof.render import html
    data = jobs[0]
    text = page_text(html.render(data))
    s = data.summary
    # the spread names two ranks, even when every rank's median step is the same (lock-step)
    m = re.search(r"Step-time spread: rank (\d+) [\d.]+ ms to rank (\d+)", text)
    assert m and m.group(1) != m.group(2), m
    # DDP's own timers (exposed part) agree with the exposed communication the page quotes, both means over ranks
    ddp = re.search(r"DDP reducer: [\d.]+ ms communication per step \(its own timers, mean over ranks\).*? "
                    r"exposed, ([\d.]+) ms", text)
    exposed_ms = s["distributed"]["comm"]["exposed_share"] * s["step_time_s"]["steady"] * 1e3
    assert ddp and float(ddp.group(1)) == pytest.approx(exposed_ms, rel=0.05)
    assert "The other ranks wait for node node003: 40 ms per step" in text   # the Ranks panel names it too
    # each chart says whose figures it draws
    titles = {k: f["layout"]["title"]["text"] for k, f in _figs(data).items()}
    assert titles["share"].endswith("(mean over 64 ranks)") and titles["steps"].endswith("(rank 0)")
    # arrival at the sync: the slow node's ranks get there 40 ms after the first rank; the others with it
    late = data.ranks_grid["late"]
    order = [r["rank"] for r in data.ranks_grid["ranks"]]
    slow = np.array([k in range(24, 32) for k in order])
    assert late[slow].mean() == pytest.approx(40, abs=3) and late[~slow].mean() < 3
    assert "rank-heat-late" in _figs(data)


def _figs(data) -> dict:
    from haiprof.render import html
    figs: dict = {}
    for section in html.SECTIONS:
        section(data, figs)
    html.label_populations(data, figs)
    return figs


def test_spread_of_equal_medians_names_two_ranks():
    rows = [{"rank": k, "step_time_median_s": 0.078} for k in range(4)]
    sp = D.step_spread(rows)
    assert (sp["fastest_rank"], sp["slowest_rank"]) == (0, 3) and sp["spread"] == 0


def test_a_few_steps_of_lock_step_noise_do_not_lead_the_verdict():
    """A rank named by its last arrivals leads the verdict only when its lateness is more than noise: 4 steps can
    never show it (a sign-flip test: 1/16 at best, x2 ranks), 7 steps 250 ms late each do (2/128 x 2), and
    lateness that flips sign from step to step does not; a culprit without that test (a node) is not held back."""
    assert C.chance_late([80.0, 60.0, 40.0, 120.0], 2) == pytest.approx(2 / 16)
    assert C.chance_late([250.0] * 6 + [-10.0], 2) == pytest.approx(2 * 2 / 128)
    assert C.chance_late([90.0, -70.0, 60.0, -40.0, 80.0, -50.0, 70.0, -60.0], 2) > 0.05
    assert C.chance_late(np.full(40, 5.0), 64) < 1e-6            # many steps: the normal approximation
    base = {"severity": "high", "late_share": 0.24}
    assert C.leads([{**base, "chance": 0.125}], 0.1) is None
    assert C.leads([{**base, "chance": 0.03}], 0.1) is not None
    node = {**base, "kind": "node"}
    assert C.leads([node], 0.1) is node
