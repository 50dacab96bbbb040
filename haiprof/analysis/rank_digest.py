"""A rank's digest: what a rank's analysis leaves for the job's merged report, written on the rank's own node.

At exit every rank analyses its own directory (in parallel with every other rank: the job is the engine) and
writes two files beside its raw data:

  * summary.json, the rank's own summary plus `rank_digest` (per-rank figures the merge needs: median/p90 step,
    phase share, batch sizes, DDP timer samples, host, directory, analysis version);
  * steps.npz, one row per steady step (or per bucket of consecutive steady steps when a run has more than
    MAX_ROWS of them, so the file stays bounded): step time and time per phase in ns, device busy/idle on
    CUDA runs, first step index and steps per row.

Only these (and meta.json/status.jsonl) leave the node when there is no shared filesystem (rank_gather); the
merge reads nothing else (analysis/ranks.py). A digest is stale when a raw file is newer than it or it was
written by another analysis version; `haiprof report` re-analyses only those ranks.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers import thresholds as T
from haiprof.analyzers.step_columns import StepColumns
from haiprof.analyzers.steps import ALL_PHASES

from ..rundir import DIGEST_FILES, REPORT, STEPS_FILE, SUMMARY, RunDir
from ..version import __version__

DIGEST_FORMAT = 1
ANALYSIS_VERSION = f"{__version__}+digest{DIGEST_FORMAT}"
MAX_ROWS = 512                     # per-step rows kept exactly up to this many steady steps, bucketed beyond
MAX_DDP_RECORDS = 256              # DDP's running averages: consecutive distinct values are enough to unroll them
COLUMNS = ("duration_ns", *ALL_PHASES, "device_busy_ns", "device_idle_ns", "first_step", "steps")


def step_table(steady, device_steps=None) -> dict:
    """Column arrays, one row per steady step, or per bucket of ceil(n / MAX_ROWS) steps (their mean)."""
    st = StepColumns.of(steady)   # arrays: a rank of a million steps builds no Step per step
    n = len(st)
    cols = {c: np.zeros(n, dtype=np.float64) for c in COLUMNS}
    cols["duration_ns"] = st.duration_ns.astype(np.float64)
    for p in ALL_PHASES:
        cols[p] = st.phase(p).astype(np.float64)
    cols["first_step"] = st.index.astype(np.float64)
    cols["steps"] = np.ones(n, dtype=np.float64)
    if len(device_steps if device_steps is not None else ()):   # device partition: "idle:*" is the device waiting
        dev = StepColumns.of(device_steps)
        idle_cols = [j for j, k in enumerate(dev.names) if k.startswith("idle:")]
        idle = dev.phases[:, idle_cols].sum(axis=1)
        busy = dev.phases.sum(axis=1) - idle
        at = np.searchsorted(dev.index, st.index)     # both in step order
        ok = at < len(dev)
        ok[ok] &= dev.index[at[ok]] == st.index[ok]
        cols["device_idle_ns"][ok] = idle[at[ok]]
        cols["device_busy_ns"][ok] = busy[at[ok]]
    size = -(-n // MAX_ROWS) if n > MAX_ROWS else 1
    if size > 1:
        edges = np.arange(0, n, size)
        counts = np.diff(np.append(edges, n))
        for c in COLUMNS:
            if c == "first_step":
                cols[c] = cols[c][edges]
            elif c == "steps":
                cols[c] = counts.astype(np.float64)
            else:
                cols[c] = np.add.reduceat(cols[c], edges) / counts
    return cols


def pack(table: dict) -> bytes:
    """steps.npz: one rows x COLUMNS array (one array: a 1,024-rank merge reads 1,024 headers, not 13,000)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, table=np.stack([np.asarray(table[c], dtype=np.float64) for c in COLUMNS], axis=1))
    return buf.getvalue()


def steps_from_table(table) -> StepColumns:
    """Steps (start 0, end = step time) rebuilt from a table: what the merge arithmetic compares across ranks.
    Columns to columns: no Step object per row."""
    n = len(table["duration_ns"])
    return StepColumns(table["first_step"].astype(np.int64), np.zeros(n, dtype=np.int64),
                       table["duration_ns"].astype(np.int64),
                       np.stack([table[p].astype(np.int64) for p in ALL_PHASES], axis=1).reshape(n, len(ALL_PHASES)),
                       np.zeros(n, dtype=bool), ALL_PHASES)


def _rank_records(records) -> tuple[list, list]:
    """Batch sizes ("@batch") and the gradient-sync statistics ("@ddp") of a rank's records, bounded: DDP's
    reducer running averages as their consecutive distinct values (the last MAX_DDP_RECORDS: enough to unroll
    them), per-step statistics (a sharded job's collectives) evenly sampled down to MAX_ROWS."""
    batches, reducer, per_step = [], [], []
    for rec in records:
        if isinstance(rec, list) and len(rec) >= 4:
            if rec[0] == "@batch" and isinstance(rec[3], int):
                batches.append(rec[3])
            elif rec[0] == "@ddp" and isinstance(rec[3], dict):
                if "avg_backward_comm_time" in rec[3]:
                    if not reducer or rec[3] != reducer[-1]:
                        reducer.append(rec[3])
                else:
                    per_step.append(rec[3])
    stride = -(-len(per_step) // MAX_ROWS) if len(per_step) > MAX_ROWS else 1
    return batches, reducer[-MAX_DDP_RECORDS:] + per_step[::stride]


def digest_section(data, steady: list, records) -> dict:
    batches, ddp = _rank_records(records)
    durs = np.sort(StepColumns.of(steady).duration_ns / 1e9).tolist()
    meta = data.meta
    return {"analysis_version": ANALYSIS_VERSION, "columns": list(COLUMNS), "rank": meta.get("rank"), "host": meta.get("host"),
            "dir": meta.get("run_dir"), "steps": len(data.steps), "steady_steps": len(steady),
            "step_time_median_s": float(np.median(durs)) if durs else None,
            "step_time_p90_s": durs[int(0.9 * (len(durs) - 1))] if durs else None,
            "phase_share": {k: round(v, 6) for k, v in step_analysis.phase_share(steady).items()},
            "batch_numel_mean": float(np.mean(batches)) if batches else None, "batches": len(batches),
            "ddp": ddp}


def write(run_dir: RunDir):
    """Analyse one rank's directory; write summary.json (with its digest) and steps.npz. Returns the RunData."""
    from .run_model import Run
    from .summary import analyze
    run = Run.read(run_dir)   # read once: the batch sizes and sync statistics are its rank_records
    data = analyze(run_dir, run=run)
    steady = step_analysis.steady_steps(data.steps, T.WARMUP_STEPS)
    table = step_table(steady, data.device_steps)
    data.summary["rank_digest"] = digest_section(data, steady, run.rank_records())
    data.summary["rank_digest"]["device"] = bool(data.device_steps)
    (run_dir.path / STEPS_FILE).write_bytes(pack(table))
    run_dir.write_summary(data.summary)   # last: its time stamp says the digest is complete
    return data


def refresh(path: str) -> str:
    """Process-pool entry: (re)write one rank's digest; returns the path, raises on failure."""
    write(RunDir(Path(path)))
    return path


def raw_files(rank_dir: Path) -> list:
    """Every file of the rank's own recording (phases, samples, traces, fix results): all but the digest and the
    page; a digest older than any of them is stale."""
    derived = set(DIGEST_FILES) | {REPORT}
    return [p for p in rank_dir.rglob("*") if p.is_file() and not p.name.startswith(".")
            and p.relative_to(rank_dir).as_posix() not in derived]


def load_fresh(rank_dir: Path) -> tuple[dict, dict] | None:
    """(summary, table) when summary.json and steps.npz are there, come from this analysis version and are not
    older than any raw file; None when the rank needs analysing."""
    summary_path, table_path = rank_dir / SUMMARY, rank_dir / STEPS_FILE
    try:
        stamp = min(summary_path.stat().st_mtime, table_path.stat().st_mtime)
        summary = json.loads(summary_path.read_text())
        digest = summary.get("rank_digest") or {}
        raw = raw_files(rank_dir)
        if digest.get("analysis_version") != ANALYSIS_VERSION and raw:
            return None   # another version's digest stays all there is of a rank whose raw data is elsewhere
        if any(p.stat().st_mtime > stamp for p in raw):
            return None
        with np.load(table_path) as z:
            arr = z["table"]
        columns = digest.get("columns") or COLUMNS
        return summary, {c: arr[:, i] for i, c in enumerate(columns)}
    except (OSError, ValueError, KeyError, AttributeError, IndexError):
        return None


def is_fresh(rank_dir: Path) -> bool:
    return load_fresh(rank_dir) is not None
