"""Real 2-rank torchrun/gloo jobs with a fault injected on rank 1 (examples/ddp_comm_bound.py's knobs): busy
processes on its CPU core, a pause every third step. Each job's verdict names rank 1 and the cause read from its own
record, and its first action is aimed at that cause. (A slow dataset on one rank: test_distributed.py; on rank 2 of
four: test_four_ranks.py.) A job without DDP, whose script calls dist.all_reduce itself, is compared the same way.

The faults are large next to the step (three busy processes on the rank's core: a quarter of it left to the rank,
whatever else the machine runs; 300 ms pauses in 50 ms steps), so a loaded machine does not erase them. The jobs
run one after the other: the busy-process case pins each rank to a core of its own, which a second job would crowd."""
import pytest

from conftest import EXAMPLES, SCRIPTS, load_summary, run_haiprof
from haiprof.analyzers import page_invariants

EXAMPLE = EXAMPLES / "ddp_comm_bound.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("culprit-jobs")
    out = {}
    for name, argv in (("hog", ["--steps", "10", "--batch-size", "64", "--layers", "4", "--hog-rank", "1",
                               "--hogs", "3"]),
                       ("pause", ["--steps", "12", "--batch-size", "16", "--layers", "2", "--pause-rank", "1",
                                  "--pause-ms", "300", "--pause-every", "3"])):
        r = run_haiprof("run", "--trace-steps", "0", "--out", root / name, "--nproc-per-node", "2", EXAMPLE, *argv,
                        timeout=240)
        assert r.returncode == 0, r.stderr[-3000:]
        out[name] = load_summary(root / name)
        # the page keeps its rules: every step time quoted is the steady step's, amounts are not step times
        html = (root / name / "report.html").read_text()
        assert page_invariants.check(out[name], None, html) == [], name
    return out


def test_busy_process_on_rank1s_core_is_its_run_queue_wait(jobs):
    s = jobs["hog"]
    assert s["culprit"]["subject"] == "rank 1" and s["culprit"]["cause"] == "run-queue", s["headline"]
    assert s["bottleneck"] == "communication"
    assert "waited for rank 1" in s["headline"] and "another process shares its CPU cores" in s["headline"]
    first = s["next_steps"][0]
    assert first["kind"] == "straggler" and "rank 1's CPU cores" in first["title"] and first["fix"] is None
    assert first["gain_s"] == pytest.approx(s["culprit"]["gain_ms"] / 1e3)
    # compression is offered for the transfer share only, below the wait
    comm = [a for a in s["next_steps"] if a["fix"] == "compress"]
    assert all(a["gain_share"] < first["gain_share"] for a in comm)


def test_pause_every_third_step_on_rank1_is_named_as_a_pause(jobs):
    s = jobs["pause"]
    assert s["culprit"]["subject"] == "rank 1" and s["culprit"]["cause"] == "pause", s["headline"]
    assert "waited for rank 1" in s["headline"] and "pauses outside the training phases" in s["headline"]
    assert "in 4 of " in s["headline"]                  # steps 3, 6, 9, 12, after the warm-up
    first = s["next_steps"][0]
    assert "rank 1 does between steps" in first["title"]
    assert first["gain_s"] > 0.05                        # 300 ms every third step: ~100 ms/step the others wait


# -- explicit collectives: no DDP, the script averages its gradients itself ---------------------------------------
EXPLICIT = SCRIPTS / "explicit_allreduce.py"


@pytest.fixture(scope="module", params=["blocking", "async"])
def explicit(request, tmp_path_factory):
    """A 2-rank job that calls dist.all_reduce once per parameter after backward; rank 1 sleeps 150 ms before its
    calls, every step. The phase collector times each call on the training thread from its start (the rank's
    arrival) to its return (the collective's completion), and an async call's Work.wait() too
    (collectors/sharded_comm.py), so rank 0's calls hold the wait for rank 1 and rank 1's the transfer alone."""
    out = tmp_path_factory.mktemp(f"explicit-{request.param}") / "run"
    mode = ["--async-op"] if request.param == "async" else []
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, "--nproc-per-node", "2", EXPLICIT, "--steps", "12",
                    "--late-rank", "1", "--late-ms", "150", *mode, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return load_summary(out), (out / "report.html").read_text()


def test_explicit_all_reduce_separates_the_wait_for_rank1_from_the_transfer(explicit):
    s, _ = explicit
    d = s["distributed"]
    assert d["ddp"] is None                                  # no DDP reducer, no sharded collective: the calls alone
    for row in d["ranks"]:
        assert row["phase_share"]["allreduce"] > 0, row       # every rank's explicit calls were timed
    comm = d["comm"]
    assert comm["last_to_arrive"]["1"] >= comm["steps_compared"] - 1, comm
    assert comm["wait_ms_per_step"]["0"] > 100 and comm["wait_ms_per_step"]["1"] < 10, comm
    assert comm["transfer_ms_per_step"] < 0.5 * comm["wait_ms_per_step"]["0"], comm


def test_explicit_all_reduce_job_names_rank1_and_aims_the_first_action_at_it(explicit):
    s, html = explicit
    assert s["culprit"]["subject"] == "rank 1" and s["culprit"]["cause"] == "pause", s["headline"]
    assert s["bottleneck"] == "communication"
    assert "waited for rank 1" in s["headline"] and "pauses outside the training phases" in s["headline"]
    first = s["next_steps"][0]
    assert first["kind"] == "straggler" and "rank 1 does between steps" in first["title"], first
    assert first["gain_s"] > 0.1                             # the others stop waiting ~150 ms per step
    assert page_invariants.check(s, None, html) == []
