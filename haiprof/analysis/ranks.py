"""The merged report of a distributed run: one summary/report from the rank-*/ directories' digests.

Each rank wrote its digest (summary.json + steps.npz, analysis/rank_digest.py) on its own node at exit; the merge
reads only those, so a 1,024-rank job merges in seconds. A rank whose digest is missing or stale (older than its
raw files, another analysis version) is re-analysed first, in a process pool over all cores. Rank 0's raw data,
always here, feeds the page's step and utilization charts (one rank, whatever the world size; from its digest
when its run is long).

Wiring only (decisions live in haiprof.analyzers.distributed and rank_spread). The job directory's meta.json says `distributed`;
`haiprof report DIR` on it comes here too. The merged summary keeps the contract keys (bottleneck, phase_share as
the mean over ranks, steps, step_time_s, exit_code, findings) and adds `distributed` with per-rank rows.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
import statistics
import threading
from concurrent.futures import ProcessPoolExecutor

from haiprof.analyzers import actions
from haiprof.analyzers import culprit as C
from haiprof.analyzers.findings import Finding, checked
from haiprof.analyzers import distributed as D
from haiprof.analyzers import rank_spread
from haiprof.analyzers import slow_link
from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers import thresholds as T
from haiprof.analyzers import verdict
from haiprof.analyzers import whatif

from ..rundir import GATHER_FILE, SCHEMA_VERSION, RunDir
from . import rank_digest
from .summary import RunData, analyze, drop_left_out_fixes

RANK_DIR = re.compile(r"^rank-(\d+)$")
# The reference rank's raw data is read for its charts up to this many steps (well under a second); a longer run's
# page draws its step chart from the digest (bucketed), so the merge stays seconds whatever the run's length.
REFERENCE_RAW_STEPS = 20_000
GRID_BUCKETS = 64          # heatmap columns: a few hundred KB of page at 1,024 ranks
LINK_FIELDS = ("rate_gbps", "speed_mbps", "tx_bytes_per_s_mean", "rx_bytes_per_s_mean", "peak_share_of_capacity")


def is_distributed(run_dir: RunDir) -> bool:
    try:
        return bool(run_dir.read_meta().get("distributed"))
    except Exception:
        return False


def rank_dirs(run_dir: RunDir) -> dict:
    """rank -> its directory, for every rank-<k>/ holding a meta.json."""
    out = {}
    for p in run_dir.path.iterdir():
        m = RANK_DIR.match(p.name)
        if m and (p / "meta.json").is_file():
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def refresh_stale(dirs: list) -> dict:
    """Re-analyse the ranks whose digest is missing or stale, in a process pool over all cores (serial when the
    pool cannot start or breaks). Returns path -> error for ranks that could not be analysed."""
    stale = [str(p) for p in dirs if not rank_digest.is_fresh(p)]
    if not stale:
        return {}
    errors, done = {}, set()
    workers = min(len(stale), os.cpu_count() or 1)
    if workers > 1:
        try:
            # fork is the cheap start (the analysis modules are already imported); a process with threads (the
            # launcher after a job) forks only a clean server
            ctx = multiprocessing.get_context("fork" if threading.active_count() == 1 else "forkserver")
            with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                for p, err in zip(stale, pool.map(_refresh_quiet, stale, chunksize=max(1, len(stale) // (4 * workers)))):
                    done.add(p)
                    if err:
                        errors[p] = err
        except Exception:   # no pool here (no /dev/shm, a worker killed): the rest one after another
            pass
    for p in stale:
        if p not in done:
            try:
                rank_digest.refresh(p)
            except Exception as e:
                errors[p] = f"{type(e).__name__}: {e}"
    return errors


def _refresh_quiet(path: str) -> str:
    """Pool entry: '' or this rank's error (one rank's bad data does not stop the others)."""
    try:
        rank_digest.refresh(path)
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _rank_inputs(run_dir: RunDir, gather: dict) -> tuple[list, dict, dict]:
    """RankInputs built from the ranks' digests alone (raw data is read only to refresh a stale digest)."""
    dirs = rank_dirs(run_dir)
    loaded = {rank: rank_digest.load_fresh(p) for rank, p in dirs.items()}
    # the reference rank's stale digest is rewritten here: its analysis serves the page's charts too (its raw
    # files read once), the other stale ranks go to the pool
    errors, ref = {}, None
    first = min(dirs) if dirs else None
    if first is not None and loaded[first] is None:
        try:
            ref = rank_digest.write(RunDir(dirs[first]))
        except Exception as e:
            errors[str(dirs[first])] = f"{type(e).__name__}: {e}"
    errors.update(refresh_stale([dirs[k] for k, v in loaded.items() if v is None and k != first]))
    inputs, digests = [], {}
    for rank, p in dirs.items():
        if str(p) in errors:
            continue
        try:
            summary, table = loaded[rank] or rank_digest.load_fresh(p)
            meta = json.loads((p / "meta.json").read_text())
        except (OSError, ValueError, KeyError, TypeError) as e:
            errors[str(p)] = f"{type(e).__name__}: {e}"
            continue
        dg = summary.get("rank_digest") or {}
        source = gather.get(str(rank), "local" if rank == 0 else "fs")
        stats = {k: dg.get(k) for k in ("step_time_median_s", "step_time_p90_s", "phase_share")}
        batches = [dg["batch_numel_mean"]] if dg.get("batch_numel_mean") else []
        inputs.append(D.RankInput(rank, meta, [], int(dg.get("steps") or 0), batches, dg.get("ddp") or [],
                                  source, stats, table))
        digests[rank] = {"summary": summary, "table": table, "meta": meta}
    return inputs, digests, errors, ref


def _reference(run_dir: RunDir, digests: dict, analysed: RunData | None = None):
    """Rank 0 (or the lowest rank present): its own steps and samples for the page's step and utilization charts,
    from its raw data when it is here and not long (one rank, whatever the world size), else from its digest.
    `analysed`: that rank's analysis when its digest was just rewritten (not read a second time)."""
    if not digests:
        return None
    rank = min(digests)
    path = run_dir.path / f"rank-{rank}"
    steps = (digests[rank]["summary"].get("rank_digest") or {}).get("steps") or 0
    mine = analysed is not None and analysed.run_dir.path == path
    if steps <= REFERENCE_RAW_STEPS and mine:
        return analysed
    if steps <= REFERENCE_RAW_STEPS and not mine and rank_digest.raw_files(path):
        try:
            return analyze(RunDir(path))
        except Exception:
            pass   # its digest was readable: the charts fall back to it
    d = digests[rank]
    return RunData(RunDir(path), d["meta"], d["summary"], rank_digest.steps_from_table(d["table"]))


def _scale(ranks: list, digests: dict, rows: list) -> tuple[dict, dict, list]:
    """Outliers, slow nodes, node-level hardware and the heatmap grid (analyzers/rank_spread)."""
    row_of = {r["rank"]: r for r in rows}
    per_rank = []
    for r in ranks:
        med = rank_spread.rank_medians(digests[r.rank]["table"])
        if med:
            m = r.meta
            per_rank.append({"rank": r.rank, "host": m.get("host"), "local_rank": m.get("local_rank"),
                             "node_rank": m.get("node_rank"), **med})
            row_of[r.rank]["medians_ms"] = {k: round(v, 3) for k, v in med.items()}
    spread = rank_spread.outliers(per_rank)
    order = sorted(digests, key=lambda k: (str(digests[k]["meta"].get("host")),
                                           digests[k]["meta"].get("local_rank") or 0, k))
    stepped = [k for k in order if len(digests[k]["table"]["duration_ns"])]   # a rank without steps has no row
    grid = rank_spread.grid([digests[k]["table"] for k in stepped], GRID_BUCKETS)
    grid["ranks"] = [{"rank": k, "host": digests[k]["meta"].get("host"),
                      "local_rank": digests[k]["meta"].get("local_rank")} for k in stepped]
    grid["per_rank"] = per_rank
    nodes = {}
    for k in order:
        m = digests[k]["meta"]
        node = nodes.setdefault(m.get("host"), {"host": m.get("host"), "node_rank": m.get("node_rank"), "ranks": []})
        node["ranks"].append(k)
        links = ((digests[k]["summary"].get("hardware") or {}).get("links")) or {}
        if not any((node.get("links") or {}).values()):   # a node's ports, as its first rank that sampled them saw
            node["links"] = {g: {port: {x: v.get(x) for x in LINK_FIELDS} for port, v in (links.get(g) or {}).items()}
                             for g in ("infiniband", "nic")}
    for node in nodes.values():
        meds = [row_of[k]["step_time_median_s"] for k in node["ranks"] if row_of[k].get("step_time_median_s")]
        node["step_time_median_s"] = statistics.median(meds) if meds else None
    return spread, grid, list(nodes.values())


def analyze_job(run_dir: RunDir) -> RunData:
    meta = run_dir.read_meta()
    gather_path = run_dir.file(GATHER_FILE)
    gather = json.loads(gather_path.read_text()) if gather_path.is_file() else {}
    ranks, digests, errors, analysed = _rank_inputs(run_dir, gather.get("ranks", {}))
    world = max([int(r.meta.get("world_size") or 0) for r in ranks] + [len(ranks)] +
                [int(k) + 1 for k in (meta.get("failures") or {}) if k.isdigit()])
    # Only rank 0's directory gathers; another node's directory holds its own ranks (the others are elsewhere).
    gathering = gather_path.is_file() or any(r.rank == 0 for r in ranks)
    rows, problems = D.rank_rows(ranks, list(range(world)), meta.get("failures") or {}, gathering)
    for path, err in errors.items():   # a rank whose data is here but could not be analysed
        rank = int(RANK_DIR.match(os.path.basename(path)).group(1))
        for p in problems + rows:
            if p["rank"] == rank and p["status"] == "missing":
                p["status"] = "unreadable"
                if "message" in p:
                    p["message"] = f"rank {rank}: its data is here but could not be analysed: {err}"
    share = D.mean_share(ranks)
    # the contract's steady figure for a job ("steady"): the ranks' steady steps, time over count (what a clock
    # around them reads on one rank, the ranks stepping together)
    stats = D.pooled_stats(ranks)
    ref = _reference(run_dir, digests, analysed)
    n = len(ref.steps) if ref else 0
    split = D.comm_split(ranks)
    ddp = D.ddp_overlap(ranks)
    slow = D.stragglers(ranks, split)
    spread, grid, nodes = _scale(ranks, digests, rows) if ranks else ({}, {}, [])
    on_slow_node = {k for nd in spread.get("nodes", []) for k in nd["slow_ranks"]}
    slow = [s for s in slow if s["rank"] not in on_slow_node]   # the node is named instead
    steady_n = len(step_analysis.steady_steps(ref.steps, T.WARMUP_STEPS)) if ref else 0
    # every figure of the job's page on its steady step (the headline's ms included), never the median's
    findings = [f for f in verdict.phase_findings(share, steady_n, stats["median"], stats["steady"])
                if f["kind"] != "communication"] if n else []
    comm = D.comm_finding(split, share, ddp, stats["median"], n, verdict.FIXES_FOR["communication"],
                          stats["steady"]) if n else None
    findings += [comm] if comm else []
    signs = C.host_signs({k: d["summary"] for k, d in digests.items()})
    found = C.culprits(ranks, slow, spread, stats["steady"], signs) if n else []
    named = {k for c in found for k in c["ranks"]}
    findings += [C.finding(c, i, stats["steady"]) for i, c in enumerate(found)]
    for s in slow:
        if s["rank"] in named:
            continue
        fixes = ["prefetch"] if s["cause"] == "dataloader" else []
        findings.append(_straggler("high", f"rank {s['rank']} ({s['host']}, local rank {s['local_rank']}) is the "
                                           f"straggler: the other ranks wait {s['others_wait_ms_per_step']:.0f} ms "
                                           f"per step for it; cause: {s['reason']}",
                                   s, fixes, share=split.get("skew_share", 0.0)))
    findings += _spread_findings(spread, {s["rank"] for s in slow} | named)
    bottleneck, headline = verdict.decide(findings, n)
    chosen = next((f.get("removable_share") or 0.0 for f in findings if f.get("removable_share") is not None), 0.0)
    # the verdict follows the time: waiting for the culprits, when that is the most a fix can take off the step
    lead = C.leads(found, chosen) if n >= T.MIN_STEPS else None
    if lead:
        bottleneck = C.job_bottleneck(lead)
        headline = C.headline(found, bottleneck, stats["steady"])
    # a late rank leaves its peers' data waiting in their send queues, at most the share of the step they wait
    waited = max((c["late_share"] for c in found), default=0.0)
    link = _slow_link(ranks, digests, split, comm, stats["steady"], waited) if comm else None
    if link:   # the transfer waits on one node's link: its finding, and the verdict's subject when no rank leads
        link["leads"] = not lead and bottleneck == "communication"
        findings.append(_link_finding(link, findings, len(found), stats["steady"]))
        if link["leads"]:
            lead = link
            headline = slow_link.headline(link, verdict.LABEL["communication"], split.get("exposed_share", 0.0),
                                          stats["steady"])
    suffix = ""   # after the verdict's sentence, which the fixes' predictions may re-word below
    if not gathering:
        suffix += " (This directory holds this node's ranks only; the merged report is in rank 0's directory.)"
    for nd in ([] if lead else spread.get("nodes", [])[:3]):
        suffix += f" Slow node: {nd['host']} ({len(nd['slow_ranks'])} of its {nd['ranks_on_node']} ranks)."
    if slow and not lead:
        suffix += f" Straggler: rank {slow[0]['rank']} ({slow[0]['cause']})."
    bad = [p for p in problems]
    if bad:
        suffix += " " + "; ".join(f"rank {p['rank']} {p['status']} (exit {D.exit_text(p['exit_code'])})"
                                  for p in bad) + "."
    headline += suffix
    hosts: dict = {}
    for r in rows:
        if r.get("host"):
            hosts.setdefault(r["host"], []).append(r["rank"])
    exit_code = meta.get("exit_code")
    summary = {
        "schema_version": SCHEMA_VERSION, "bottleneck": bottleneck, "headline": headline,
        "phase_share": {k: round(v, 6) for k, v in share.items()}, "steps": n,
        "steps_analyzed": sum(D.step_rows(r) for r in ranks), "warmup_steps_excluded": (ref.summary.get("warmup_steps_excluded", 0)
                                                                 if ref else 0),
        "step_time_s": stats, "step_detection": ref.summary.get("step_detection", {}) if ref else {},
        "exit_code": exit_code, "finished": exit_code is not None,
        "findings": checked(verdict.sort_findings(findings)), "command": meta.get("command"),
        "utilization": ref.summary.get("utilization", {}) if ref else {},
        "collectors": ref.status if ref else {},
        "distributed": {"world_size": world, "ranks": rows, "hosts": hosts, "problems": problems,
                        "missing_ranks": [p["rank"] for p in problems if p["status"] == "missing"],
                        "failed_ranks": [p["rank"] for p in problems if p["status"] != "missing"],
                        "step_time_spread": D.step_spread(rows), "comm": split, "ddp": ddp, "stragglers": slow,
                        "gather": gather, "reference_rank": ref.meta.get("rank") if ref else None,
                        "outliers": spread, "nodes": nodes, "culprits": found},
    }
    if lead:   # the rank or node the job's verdict names, with its cause and what fixing it gives back
        summary["culprit"] = {k: lead.get(k) for k in ("kind", "subject", "host", "ranks", "cause", "late_ms",
                                                        "gain_ms", "late_share", "gain_share")}
    if link:
        summary["distributed"]["slow_link"] = link
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
    if ref is not None and isinstance(ref.summary.get("fixes"), dict):
        summary["fixes"] = _job_fixes(ref)
    # each fix's what-if on the job's step, as for a run; a late rank's own fix is the culprit analysis's to weigh
    # (what the others wait for that rank), not a what-if of the job's averaged phases
    own = {x for f in summary["findings"] if f["kind"] == "straggler" for x in f.get("fixes") or []}
    summary["predictions"] = {x: p for x, p in whatif.predict_all(summary).items() if x not in own}
    left_out = summary["advice_left_out"] = actions.left_out(summary)
    drop_left_out_fixes(summary["findings"], left_out)   # no fix offered anywhere that the advice leaves out
    summary["findings"] = checked(summary["findings"])
    top = next((f for f in summary["findings"] if f["kind"] == bottleneck), None)
    if top is not None and not lead and n >= T.MIN_STEPS:   # the verdict quotes its first fix's prediction
        summary["headline"] = verdict.headline(top, stats["steady"], left_out, summary["predictions"]) + suffix
    summary["next_steps"] = actions.rank(summary)   # "do this next" for the job, as for a single process
    if ref is None:
        return RunData(run_dir, meta, summary, ranks_grid=grid)
    return RunData(run_dir, meta, summary, ref.steps, ref.samples, ref.status, ref.timelines, ranks_grid=grid)


def _job_fixes(ref: RunData) -> dict:
    """The fixes every rank applied (one command), as the reference rank recorded them. Each rank compares with its
    own rank of the earlier job: the before/after is a rank's (its page), quoted here as that rank's, never as the
    job's step (the job's figures pool the ranks)."""
    fx = {k: v for k, v in ref.summary["fixes"].items() if k != "gain"}
    fx["rank"] = rank = ref.meta.get("rank")
    gain = ref.summary["fixes"].get("gain") or {}
    if gain.get("speedup") and gain.get("step_time_before_s") and gain.get("step_time_after_s"):
        fx["comparison_note"] = (
            f"before/after is per rank: rank {rank}'s steady step {gain['step_time_before_s'] * 1e3:.1f} -> "
            f"{gain['step_time_after_s'] * 1e3:.1f} ms ({gain['speedup']:.2f}x"
            + (", slower" if gain.get("regression") else "") + f") against {fx.get('baseline_run')}; "
            f"that rank's page: haiprof report {ref.run_dir.path}")
    return fx


def _slow_link(ranks: list, digests: dict, split: dict, comm: dict, steady_s, waited: float) -> dict | None:
    """The node whose link the exposed transfer waits on (analyzers/slow_link.py), from each rank's digest;
    `waited`: the share of the step the ranks wait for the slowest culprit (the backlog waiting explains)."""
    per_rank = [{"rank": r.rank, "host": r.meta.get("host"),
                 "tcp": (digests[r.rank]["summary"].get("hardware") or {}).get("tcp")} for r in ranks]
    transfer = comm["evidence"]["transfer_share"] * (steady_s or 0.0) * 1e3
    link = slow_link.find(per_rank, transfer, waited)
    if link and steady_s:
        link.update(late_ms=link["gain_ms"], gain_share=link["gain_ms"] / (steady_s * 1e3),
                    late_share=link["gain_ms"] / (steady_s * 1e3))
    return link


def _link_finding(link: dict, findings: list, order: int, steady_s: float) -> dict:
    """The slow link in the communication finding's message (the verdict's copy of it, in `findings`) and as the
    job's own culprit finding (its action: that node's link; first when it leads, culprit_order -1). Compression
    stays on the communication finding."""
    comm = next(f for f in findings if f["kind"] == "communication")
    comm["message"] += f"; the transfer waits on node {link['host']}'s link: {slow_link.evidence_text(link)}"
    comm["evidence"] = {**comm["evidence"], "slow_link": {k: v for k, v in link.items() if k != "leads"}}
    link["action"] = slow_link.action(link)
    return _straggler(comm["severity"], f"the exposed transfer ({link['transfer_ms']:.0f} ms per step) waits on node "
                                        f"{link['host']}'s network link: {slow_link.evidence_text(link)}",
                      {**link, "culprit_order": -1 if link["leads"] else order, "steady_step_s": steady_s},
                      share=link["gain_share"])


CAUSE_TEXT = {"dataloader": "waiting for its DataLoader", "compute": "its forward/backward/optimizer",
              "other": "time outside the measured phases"}


def _straggler(severity: str, message: str, evidence: dict, fixes=(), share: float = 0.0) -> dict:
    """The straggler finding, one builder for its four cases: the job's straggler, a slow node or rank, the rest."""
    return Finding(kind="straggler", severity=severity, share=share, message=message, evidence=evidence,
                   fixes=list(fixes)).as_dict()


def _spread_findings(spread: dict, named: set) -> list:
    """One finding per slow node and one per outlier rank not already named as the straggler (at most 5)."""
    out = []
    for nd in spread.get("nodes", []):
        if set(nd["slow_ranks"]) <= named:
            continue   # a culprit: its own finding
        out.append(_straggler("high", f"node {nd['host']} is slow: {len(nd['slow_ranks'])} of its "
                                      f"{nd['ranks_on_node']} ranks (ranks {C.rank_span(nd['slow_ranks'])}) each spend "
                                      f"{nd['excess_ms']:.0f} ms per step more than the job's median before the "
                                      f"gradient sync, mostly {CAUSE_TEXT[nd['cause']]}; every other rank waits for "
                                      f"them", nd, ["prefetch"] if nd["cause"] == "dataloader" else []))
    lone = [r for r in spread.get("ranks", []) if r["rank"] not in named]
    for r in lone[:5]:
        out.append(_straggler("high", f"rank {r['rank']} ({r['host']}, local rank {r['local_rank']}) is slow: "
                                      f"{r['excess_ms']:.0f} ms per step more than the job's median before the "
                                      f"gradient sync, mostly {CAUSE_TEXT[r['cause']]}",
                              r, ["prefetch"] if r["cause"] == "dataloader" else []))
    if len(lone) > 5:
        out.append(_straggler("moderate", f"{len(lone) - 5} more slow rank(s): see the ranks table",
                              {"ranks": [r["rank"] for r in lone[5:]]}))
    return out

