"""The merged report of a distributed run: read rank-*/ directories, call the analyzers, write one summary/report.

Wiring only (decisions live in haiprof.analyzers.distributed). The job directory's meta.json says `distributed`;
`haiprof report DIR` on it comes here too. The merged summary keeps the contract keys (bottleneck, phase_share as
the mean over ranks, steps, step_time_s, exit_code, findings) and adds `distributed` with per-rank rows.
"""
from __future__ import annotations

import json
import re

from haiprof.analyzers import actions
from haiprof.analyzers import distributed as D
from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers import thresholds as T
from haiprof.analyzers import verdict

from ..rundir import GATHER_FILE, SCHEMA_VERSION, RunDir
from .summary import RunData, analyze

RANK_DIR = re.compile(r"^rank-(\d+)$")


def is_distributed(run_dir: RunDir) -> bool:
    try:
        return bool(run_dir.read_meta().get("distributed"))
    except Exception:
        return False


def _rank_inputs(run_dir: RunDir, gather: dict) -> tuple[list, dict]:
    inputs, per_rank = [], {}
    for p in sorted(run_dir.path.iterdir()):
        m = RANK_DIR.match(p.name)
        if not m or not (p / "meta.json").is_file():
            continue
        rd = RunDir(p)
        data = analyze(rd)
        batches, ddp = [], []
        cols = rd.read_phase_columns()   # the batch sizes and DDP timers only: no list per phase record
        for rec in cols.records(cols.rows({"@batch", "@ddp"}),
                                odd=lambda r: isinstance(r, list) and r[:1] == ["@ddp"]):
            if isinstance(rec, list) and len(rec) >= 4:
                if rec[0] == "@batch" and isinstance(rec[3], int):
                    batches.append(rec[3])
                elif rec[0] == "@ddp" and isinstance(rec[3], dict):
                    ddp.append(rec[3])
        rank = int(m.group(1))
        source = gather.get(str(rank), "local" if rank == 0 else "fs")
        steady = step_analysis.steady_steps(data.steps, T.WARMUP_STEPS)
        inputs.append(D.RankInput(rank, data.meta, steady, len(data.steps), batches, ddp, source))
        per_rank[rank] = data
    return inputs, per_rank


def analyze_job(run_dir: RunDir) -> RunData:
    meta = run_dir.read_meta()
    gather_path = run_dir.file(GATHER_FILE)
    gather = json.loads(gather_path.read_text()) if gather_path.is_file() else {}
    ranks, per_rank = _rank_inputs(run_dir, gather.get("ranks", {}))
    world = max([int(r.meta.get("world_size") or 0) for r in ranks] + [len(ranks)] +
                [int(k) + 1 for k in (meta.get("failures") or {}) if k.isdigit()])
    # Only rank 0's directory gathers; another node's directory holds its own ranks (the others are elsewhere).
    gathering = gather_path.is_file() or any(r.rank == 0 for r in ranks)
    rows, problems = D.rank_rows(ranks, list(range(world)), meta.get("failures") or {}, gathering)
    share = D.mean_share(ranks)
    pooled = D.pooled_steps(ranks)
    stats = step_analysis.step_time_stats(pooled)
    # the contract's steady figure for a job: the ranks' steady steps, time over count (what a clock around them
    # reads on one rank, the ranks stepping together)
    stats["steady"] = step_analysis.seconds_per_step(pooled)
    ref = per_rank.get(0) or (per_rank[min(per_rank)] if per_rank else None)
    n = len(ref.steps) if ref else 0
    split = D.comm_split(ranks)
    ddp = D.ddp_overlap(ranks)
    slow = D.stragglers(ranks, split)
    steady_n = len(step_analysis.steady_steps(ref.steps, T.WARMUP_STEPS)) if ref else 0
    findings = [f for f in verdict.phase_findings(share, steady_n, stats["median"]) if f["kind"] != "communication"] \
        if n else []
    comm = D.comm_finding(split, share, ddp, stats["median"], n, verdict.FIXES_FOR["communication"]) if n else None
    findings += [comm] if comm else []
    for s in slow:
        fixes = ["prefetch"] if s["cause"] == "dataloader" else []
        findings.append({"kind": "straggler", "severity": "high", "share": split.get("skew_share", 0.0),
                         "message": f"rank {s['rank']} ({s['host']}, local rank {s['local_rank']}) is the "
                                    f"straggler: the other ranks wait {s['others_wait_ms_per_step']:.0f} ms per step "
                                    f"for it; cause: {s['reason']}",
                         "evidence": s, "fixes": fixes})
    for p in problems:
        findings.append({"kind": "rank-failed" if p["status"] != "missing" else "rank-missing", "severity": "high",
                         "share": 0.0, "message": p["message"], "evidence": p, "fixes": []})
    bottleneck, headline = verdict.decide(findings, n)
    if not gathering:
        headline += " (This directory holds this node's ranks only; the merged report is in rank 0's directory.)"
    if slow:
        headline += f" Straggler: rank {slow[0]['rank']} ({slow[0]['cause']})."
    bad = [p for p in problems]
    if bad:
        headline += " " + "; ".join(f"rank {p['rank']} {p['status']} (exit {D.exit_text(p['exit_code'])})"
                                    for p in bad) + "."
    hosts: dict = {}
    for r in rows:
        if r.get("host"):
            hosts.setdefault(r["host"], []).append(r["rank"])
    exit_code = meta.get("exit_code")
    summary = {
        "schema_version": SCHEMA_VERSION, "bottleneck": bottleneck, "headline": headline,
        "phase_share": {k: round(v, 6) for k, v in share.items()}, "steps": n,
        "steps_analyzed": len(pooled), "warmup_steps_excluded": (ref.summary.get("warmup_steps_excluded", 0)
                                                                 if ref else 0),
        "step_time_s": stats, "step_detection": ref.summary.get("step_detection", {}) if ref else {},
        "exit_code": exit_code, "finished": exit_code is not None,
        "findings": verdict.sort_findings(findings), "command": meta.get("command"),
        "utilization": ref.summary.get("utilization", {}) if ref else {},
        "collectors": ref.status if ref else {},
        "distributed": {"world_size": world, "ranks": rows, "hosts": hosts, "problems": problems,
                        "missing_ranks": [p["rank"] for p in problems if p["status"] == "missing"],
                        "failed_ranks": [p["rank"] for p in problems if p["status"] != "missing"],
                        "step_time_spread": D.step_spread(rows), "comm": split, "ddp": ddp, "stragglers": slow,
                        "gather": gather, "reference_rank": ref.meta.get("rank") if ref else None},
    }
    if ref is not None:   # rank 0's (or the first present rank's) own trace window and what its script does
        launch = ref.summary.get("launch")
        if launch and launch.get("trace"):   # the rank's own file, linked from the job's page
            try:
                rel = ref.run_dir.path.relative_to(run_dir.path).as_posix()
                launch = {**launch, "trace": f"{rel}/{launch['trace']}"}
            except ValueError:
                pass   # the rank's directory is elsewhere (another node): its name as it is
        summary["launch"] = launch
        summary["script_uses"] = ref.summary.get("script_uses") or {}
        summary["trace_rank"] = ref.meta.get("rank")
    summary["advice_left_out"] = actions.left_out(summary)
    summary["next_steps"] = actions.rank(summary)   # "do this next" for the job, as for a single process
    if ref is None:
        return RunData(run_dir, meta, summary)
    return RunData(run_dir, meta, summary, ref.steps, ref.samples, ref.status, ref.timelines)
