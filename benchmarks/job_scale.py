"""A distributed job's merged report at 64, 256 and 1,024 ranks, from synthetic job directories built on a real run.

    python -m benchmarks.job_scale [--ranks 64,256,1024] [--template tests/data/ddp_rank200] [--keep DIR]
                                   [--no-slow-rank]

The template is a real 2-rank torchrun/gloo job (examples/ddp_comm_bound.py, 200 steps, recorded once with
`haiprof run --trace-steps 0 --nproc-per-node 2 examples/ddp_comm_bound.py --steps 200 --batch-size 16
--layers 2`). Each synthetic rank gets rank 1's raw files (phases, samples: the real per-rank sizes) and a digest
(summary.json + steps.npz) as the rank would have written at exit: its step table is the template's, with
per-rank noise and lock-step arithmetic (a step ends when the slowest rank arrives at the sync: the others wait in
allreduce). build_job's `slow_node` / `slow_rank` add data-loading time to a node's ranks (40 ms/step) / one rank
(60 ms/step); the command line slows the middle node and rank world-3 (only the node with `--no-slow-rank`).

Printed per world size: bytes a rank puts through the store (its digest tarball, and what the whole-directory
tarball of before would have been), the merge's wall and CPU time and peak RSS (a fresh process pinned to one
core, `haiprof report`'s code path: analysis/ranks.analyze_job + the page), the verdict and the ranks or nodes it
names (analyzers/culprit.py), and the re-analysis of stale digests (serial vs the process pool) at the smallest size.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "tests" / "data" / "ddp_rank200"
PER_NODE = 8


def _template_table(template: Path) -> tuple[dict, dict]:
    """The template rank's own digest (analysed once, in a scratch copy)."""
    from haiprof.analysis import rank_digest
    from haiprof.rundir import RunDir
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(template / "rank-1", Path(tmp) / "rank-1")
        rank_digest.write(RunDir(Path(tmp) / "rank-1"))
        return rank_digest.load_fresh(Path(tmp) / "rank-1")


def build_job(out: Path, world: int, template: Path = TEMPLATE, slow_node: int | None = None,
              slow_rank: int | None = None, slow_ms: float = 40.0, seed: int = 0) -> Path:
    """A job directory of `world` ranks, PER_NODE to a node (host node000, node001, ...)."""
    from haiprof.analysis import rank_digest
    from haiprof.analyzers.steps import ALL_PHASES
    from haiprof.rundir import write_json_atomic
    rng = np.random.default_rng(seed)
    summary, table = _template_table(template)
    n = len(table["duration_ns"])
    work_cols = [p for p in ALL_PHASES if p != "allreduce"]
    base = {p: table[p].astype(np.float64) for p in ALL_PHASES}
    transfer = base["allreduce"] * 0.5                    # the template's exposed sync is transfer and some wait
    noise = 1 + rng.normal(0, 0.02, (world, n))           # each rank's compute a little off, step by step
    extra = np.zeros(world)
    if slow_node is not None:
        extra[slow_node * PER_NODE:(slow_node + 1) * PER_NODE] += slow_ms * 1e6
    if slow_rank is not None:
        extra[slow_rank] += 1.5 * slow_ms * 1e6
    phases = {p: np.broadcast_to(base[p], (world, n)) * (noise if p in ("forward", "backward") else 1)
              for p in work_cols}
    phases["dataloader"] = phases["dataloader"] + extra[:, None]
    work = sum(phases[p] for p in work_cols)
    step = work.max(axis=0) + transfer                   # lock-step: everyone leaves the sync together
    phases["allreduce"] = step[None, :] - work
    # DDP's reducer timers as the lock-step arithmetic has them: each rank's exposed sync plus the template's
    # overlap with backward (a running average that stays put: one record)
    reducer = [x for x in summary["rank_digest"].get("ddp") or [] if "avg_backward_comm_time" in x]
    overlap = float(reducer[-1].get("avg_backward_compute_comm_overlap_time", 0)) if reducer else 0.0
    job_meta = json.loads((template / "meta.json").read_text())
    out.mkdir(parents=True)
    write_json_atomic(out / "meta.json", {**job_meta, "command": f"synthetic job, {world} ranks (job_scale.py)",
                                          "nnodes": str(-(-world // PER_NODE)), "nproc_per_node": str(PER_NODE)})
    raw = [p for p in (template / "rank-1").rglob("*") if p.is_file() and p.name != "meta.json"]
    rank_meta = json.loads((template / "rank-1" / "meta.json").read_text())
    for r in range(world):
        d = out / f"rank-{r}"
        src = template / ("rank-0" if r == 0 else "rank-1")
        for p in raw:   # raw data first: the digest written after it is fresh
            dst = d / p.relative_to(template / "rank-1")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / p.relative_to(template / "rank-1"), dst)
        host = f"node{r // PER_NODE:03d}"
        meta = {**rank_meta, "rank": r, "local_rank": r % PER_NODE, "node_rank": r // PER_NODE,
                "group_rank": r // PER_NODE, "world_size": world, "local_world_size": PER_NODE, "host": host,
                "run_dir": f"/scratch/{host}/job/rank-{r}", "pid": 1000 + r}
        write_json_atomic(d / "meta.json", meta)
        t = {**table, **{p: phases[p][r].astype(np.float32) for p in ALL_PHASES},
             "duration_ns": step.astype(np.float32)}
        (d / rank_digest.STEPS_FILE).write_bytes(rank_digest.pack(t))
        dur = np.sort(step) / 1e9
        total = step.sum()
        dg = {**summary["rank_digest"], "rank": r, "host": host, "dir": meta["run_dir"],
              "step_time_median_s": float(np.median(dur)), "step_time_p90_s": float(dur[int(0.9 * (n - 1))]),
              "phase_share": {p: round(float(phases[p][r].sum() / total), 6) for p in ALL_PHASES}}
        if reducer:
            dg["ddp"] = [{**reducer[-1], "avg_backward_comm_time": float(phases["allreduce"][r].mean()) + overlap,
                          "avg_backward_compute_comm_overlap_time": overlap}]
        write_json_atomic(d / "summary.json", {**summary, "rank_digest": dg})
    return out


def store_bytes(rank_dir: Path) -> tuple[int, int]:
    """(digest tarball as sent now, whole-directory tarball as sent before) for one rank."""
    from haiprof.runtime.rank_gather import _bundle
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(rank_dir.rglob("*")):
            if p.is_file():
                tar.add(p, arcname=str(p.relative_to(rank_dir)))
    return len(_bundle(rank_dir)), len(buf.getvalue())


MERGE = """
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from haiprof.analysis.ranks import analyze_job
from haiprof.render import html
from haiprof.rundir import RunDir
rd = RunDir(sys.argv[1])
data = analyze_job(rd)
rd.write_summary(data.summary)
t1, c1 = time.perf_counter(), time.process_time()
html.write(data, rd.file("report.html"))
t2 = time.perf_counter()
print(json.dumps({"merge_s": t1 - t0, "merge_cpu_s": c1 - c0, "page_s": t2 - t1,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "page_kb": rd.file("report.html").stat().st_size / 1024, "bottleneck": data.summary["bottleneck"],
                  "culprits": [c["subject"] for c in data.summary["distributed"].get("culprits") or []],
                  "headline": data.summary["headline"]}))
"""


def merge(job: Path, cores: str = "0") -> dict:
    cmd = [sys.executable, "-c", MERGE, str(job)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", cores, *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def reanalyse(job: Path, rounds: int = 3) -> dict:
    """Stale digests (older than the raw data): serial vs the process pool, alternated, medians of `rounds`."""
    import statistics
    from haiprof.analysis import rank_digest, ranks
    dirs = sorted(job.glob("rank-*"))
    times = {"serial": [], "pool": []}
    for _ in range(rounds):
        for how in ("serial", "pool"):
            past = time.time() - 60
            for d in dirs:   # digests older than the raw data
                for name in ("summary.json", rank_digest.STEPS_FILE):
                    os.utime(d / name, (past, past))
            t = time.perf_counter()
            if how == "serial":
                for d in dirs:
                    rank_digest.refresh(str(d))
            else:
                ranks.refresh_stale(dirs)
            times[how].append(time.perf_counter() - t)
    return {f"{how}_s": statistics.median(v) for how, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--template", type=Path, default=TEMPLATE)
    ap.add_argument("--keep", type=Path, help="build the jobs here and keep them")
    ap.add_argument("--no-reanalyse", action="store_true")
    ap.add_argument("--no-slow-rank", action="store_true", help="the slow node only (no slower rank elsewhere)")
    a = ap.parse_args()
    root = a.keep or Path(tempfile.mkdtemp(prefix="job_scale."))
    print(f"template: {a.template} ({sum(p.stat().st_size for p in (a.template / 'rank-1').rglob('*') if p.is_file()) // 1024} KiB a rank); cores: {os.cpu_count()}; load average: {os.getloadavg()[0]:.1f}")
    print(f"{'ranks':>6} {'store B/rank':>12} {'before B/rank':>13} {'merge s':>8} {'merge cpu s':>11} "
          f"{'page s':>7} {'peak MB':>8} {'page KB':>8}")
    sizes = [int(x) for x in a.ranks.split(",")]
    verdicts = []
    for world in sizes:
        job = root / f"job{world}"
        if job.exists():
            shutil.rmtree(job)
        build_job(job, world, a.template, slow_node=world // PER_NODE // 2,
                  slow_rank=None if a.no_slow_rank else world - 3)
        now, before = store_bytes(job / "rank-1")
        m = merge(job)
        print(f"{world:>6} {now:>12} {before:>13} {m['merge_s']:>8.2f} {m['merge_cpu_s']:>11.2f} {m['page_s']:>7.2f} "
              f"{m['peak_rss_mb']:>8.0f} {m['page_kb']:>8.0f}", flush=True)
        verdicts.append(f"{world:>6} ranks: {m['bottleneck']}; the ranks and nodes the others wait for, slowest "
                        f"first: {', '.join(m['culprits']) or 'none'}")
    print("verdicts (slow node: +40 ms/step of input on its 8 ranks" +
          ("" if a.no_slow_rank else "; slow rank: +60 ms/step") + "):")
    print("\n".join(verdicts))
    if not a.no_reanalyse:
        job = root / f"job{sizes[0]}"
        r = reanalyse(job)
        print(f"re-analysis of {sizes[0]} stale ranks (median of 3, alternated): serial {r['serial_s']:.1f} s, "
              f"pool over {os.cpu_count()} cores {r['pool_s']:.1f} s ({r['serial_s'] / r['pool_s']:.2f}x)")
    if not a.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
