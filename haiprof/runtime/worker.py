"""Per-rank entry point: what torchrun starts instead of the user's script, one per rank.

    python -m haiprof.runtime.worker --run-dir DIR [--steps N] [--sample-interval S] -- (SCRIPT | -m MODULE) [ARGS...]

torchrun starts it through rank_entry/haiprof_rank.py, a file alone in its folder, so that haiprof and torch import
with no folder of the user's on sys.path (`-m` would put the current directory first); the module form above still
works. It runs the target exactly as `haiprof run` runs a single process (same sys.argv, __main__, exit code) under the
phase collector, the DDP gradient-sync observer and the side sampler, into DIR/rank-<RANK>/ (meta.json carries
host, node rank, local rank, world size). At the end the rank analyses its own directory here, on its own node
(analysis/rank_digest.py), and its digest goes to rank 0 (rank_gather). DataLoader
workers forked from a rank are not ranks: the collectors switch themselves off in forked children.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

from . import run_setup, session
from .rank_gather import RankGather, rank_dir_name
from ..errors import keep_stderr, say
from ..rundir import RunDir

RANK_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    """Our options up to `--`; `--local-rank=N` (torchrun without --use-env) belongs to the user's script."""
    opts = {"run_dir": None, "steps": None, "sample_interval": run_setup.SAMPLE_INTERVAL_S, "trace_steps": "3",
            "fix": None, "trace_at": None, "trace_every": None}
    passthrough = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            i += 1
            break
        if tok.startswith("--local-rank") or tok.startswith("--local_rank"):
            passthrough.append(tok)
        elif tok in ("--run-dir", "--steps", "--sample-interval", "--trace-steps", "--fix", "--trace-at",
                     "--trace-every") and i + 1 < len(argv):
            key = tok[2:].replace("-", "_")
            opts[key] = argv[i + 1]
            i += 1
        else:
            raise SystemExit(f"haiprof worker: unexpected argument {tok!r}")
        i += 1
    target = argv[i:]
    if opts["run_dir"] is None or not target:
        raise SystemExit("haiprof worker: usage: python -m haiprof.runtime.worker --run-dir DIR -- SCRIPT [ARGS...]")
    if target[0] == "-m":
        target = ["-m", target[1], *passthrough, *target[2:]]
    else:
        target = [target[0], *passthrough, *target[1:]]
    return opts, target


def rank_meta(env=None) -> dict:
    env = os.environ if env is None else env
    out = {"host": socket.gethostname()}
    for key in RANK_ENV:
        if key in env:
            out[key.lower()] = env[key]
    for key in ("rank", "local_rank", "world_size", "local_world_size", "group_rank", "group_world_size"):
        if key in out:
            try:
                out[key] = int(out[key])
            except ValueError:
                pass
    out["node_rank"] = out.get("group_rank")
    return out


def main(argv: list[str]) -> int:
    opts, target = parse(argv)
    module = target[1] if target[0] == "-m" else None
    script = None if module else target[0]
    args = target[2:] if module else target[1:]
    steps = int(opts["steps"]) if opts["steps"] else None
    info = rank_meta()
    rank, world = int(info.get("rank", 0)), int(info.get("world_size", 1))
    run_root = Path(opts["run_dir"])
    keep_stderr()   # before the script runs: our messages go to fd 2 as it is now (errors.keep_stderr)
    run_dir = RunDir.create(run_root / rank_dir_name(rank))
    target_name = Path(script.rstrip("/")).stem if script else module.split(".")[-1]
    ropts = run_setup.RunOptions(script=script, module=module, args=args, steps=steps,
                                 sample_interval_s=float(opts["sample_interval"]),
                                 trace_steps=int(opts["trace_steps"]), fix=opts["fix"],
                                 trace_at=tuple(int(x) for x in opts["trace_at"].split(","))
                                 if opts["trace_at"] else (),
                                 trace_every_min=float(opts["trace_every"]) if opts["trace_every"] else None,
                                 **run_setup.anomaly_options())
    gather = RankGather(run_root, rank, world)
    if world > 1:   # the flight recorder's windows: one rank's stall traced on every rank (collectors/job_share.py)
        ropts.job_store = lambda: (_store_client(gather), gather.prefix, rank)
    # torch is the script's to load (runtime/torch_import.py): its version and the set-up conditions are added
    # at the script's `import torch`, rank 0's token published on the job's store then (its client loads torch)
    meta = run_setup.collect_meta(ropts, target_name, run_dir, measure_torch=False)
    meta.update(info, distributed_rank=True, gather_token=gather.token)
    run_dir.write_meta(meta)
    gathering = []

    def start_gather() -> None:
        if not gathering:
            gathering.append(True)
            gather.start()
            if gather.reason:
                run_dir.record_status("gather", False, gather.reason)

    def on_exit(run_dir: RunDir, outcome) -> None:
        start_gather()   # where the script never loaded torch
        # reraise_signal, not how: a SIGTERM noted while the data was being written counts as well
        _finish_rank(run_dir, gather, rank, world,
                     terminating=outcome.reraise_signal in (signal.SIGTERM, signal.SIGHUP))

    fix_plan = None
    if ropts.fix:   # named fixes only: `auto` is refused before launch (distributed.rewrite)
        from . import fixrun
        # the same rank of the earlier jobs in the output directory is the baseline; its set-up conditions too
        fix_plan = fixrun.plan(ropts, run_dir.path, target_name, fixrun.target_key(meta),
                               meta["launch_conditions"], job_rank=True)
        run_dir.update_meta(fixes_requested=fixrun.format_requested(fix_plan), fix_source=fix_plan.source)
    return session.profile_target(run_dir, ropts, on_exit, fix_plan, at_torch=(start_gather,))


def _store_client(gather: RankGather):
    """A client of the job's store of its own (the flush thread's), as the gather connects."""
    from datetime import timedelta

    from torch.distributed import TCPStore
    if not gather.addr or not gather.port:
        raise RuntimeError("no MASTER_ADDR/MASTER_PORT in the environment")
    return TCPStore(gather.addr, int(gather.port), is_master=False, timeout=timedelta(seconds=10))


def _finish_rank(run_dir: RunDir, gather: RankGather, rank: int, world: int, terminating: bool) -> None:
    """The rank's digest, analysed here on its own node (summary.json + steps.npz; no HTML: the merged report is
    the one to read), then the gather."""
    from ..analysis import rank_digest
    try:
        rank_digest.write(run_dir)
    except Exception as e:
        say(f"haiprof: rank {rank}: could not summarize {run_dir.path}: {type(e).__name__}: {e}")
    if world <= 1:
        return
    if rank == 0:
        gather.collect(terminating=terminating)
    else:
        how = gather.send(run_dir.path)
        run_dir.update_meta(gathered=how)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
