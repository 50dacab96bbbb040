"""`haiprof run` for torch.distributed jobs: start every rank under the profiler through torch's own launcher.

Two forms, neither needs a code change:

    haiprof run --nproc-per-node N [--nnodes … --node-rank … --rdzv-endpoint …] SCRIPT [ARGS…]
    haiprof run [--out DIR] -- torchrun [TORCHRUN OPTIONS] SCRIPT [ARGS…]     (or python -m torch.distributed.run)

Both become one torchrun argument list, parsed by torchrun's own parser (so every torchrun option means what it
means there). The training target is replaced by the per-rank entry point `WORKER_FILE … -- SCRIPT ARGS` (a file
that runs haiprof.runtime.worker; rank_entry/haiprof_rank.py says why a file) and the job is started with
torch.distributed.run's elastic launch in this process, which also tells us each failed rank's exit code.
Afterwards the ranks' directories are merged into one report (analysis/ranks.py).
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from ..version import __version__
from . import launcher

# haiprof's launch options: (flag, torchrun flag, help)
LAUNCH_OPTIONS = (
    ("--nproc-per-node", "processes (ranks) per node; starts the job through torch's elastic launcher"),
    ("--nnodes", "number of nodes, or MIN:MAX (torchrun's meaning)"),
    ("--node-rank", "rank of this node (static rendezvous)"),
    ("--rdzv-endpoint", "rendezvous endpoint HOST:PORT"),
    ("--rdzv-backend", "rendezvous backend (static, c10d)"),
    ("--rdzv-id", "job id shared by all nodes"),
    ("--master-addr", "master address (static rendezvous)"),
    ("--master-port", "master port (static rendezvous)"),
    ("--max-restarts", "worker group restarts before failing"),
)
LAUNCHER_NAMES = ("torchrun",)
LAUNCHER_MODULES = ("torch.distributed.run",)
WORKER_MODULE = "haiprof.runtime.worker"
# Started as a script, alone in its folder: haiprof and torch import with no folder of the user's on sys.path
WORKER_FILE = Path(__file__).resolve().parent / "rank_entry" / "haiprof_rank.py"


def add_options(parser) -> None:
    group = parser.add_argument_group("distributed (torch.distributed jobs)")
    for flag, help_ in LAUNCH_OPTIONS:
        group.add_argument(flag, metavar="V", help=help_)


def launcher_prefix_len(target: list[str]) -> int:
    """How many leading tokens of `target` name a torch launcher (0: it is not one)."""
    if target and os.path.basename(target[0]) in LAUNCHER_NAMES:
        return 1
    if len(target) >= 3 and os.path.basename(target[0]).startswith("python") and target[1] == "-m" \
            and target[2] in LAUNCHER_MODULES:
        return 3
    return 0


def requested(ns, target: list[str]) -> bool:
    return ns.nproc_per_node is not None or launcher_prefix_len(target) > 0


def torchrun_argv(ns, target: list[str]) -> list[str]:
    """The torchrun argument list (without the `torchrun` itself) for either form."""
    k = launcher_prefix_len(target)
    if k:
        if any(getattr(ns, flag[2:].replace("-", "_")) is not None for flag, _ in LAUNCH_OPTIONS):
            raise _user_error("give launch options either to haiprof or to the wrapped launcher, not both")
        return list(target[k:])
    argv = []
    for flag, _ in LAUNCH_OPTIONS:
        value = getattr(ns, flag[2:].replace("-", "_"))
        if value is not None:
            argv += [flag, str(value)]
    return argv + list(target)


def _user_error(msg: str):
    from ..errors import UserError
    return UserError(msg)


def rewrite(argv: list[str], run_dir: Path, steps, sample_interval: float, trace_steps: int = 3,
            fix: str | None = None, trace_at: str | None = None, trace_every: float | None = None):
    """Parse with torchrun's parser; swap the training target for the per-rank entry point."""
    from torch.distributed import run as tdr
    try:
        args = tdr.parse_args(argv)
    except SystemExit as e:   # argparse printed its message
        raise _user_error(f"invalid launcher arguments (torchrun exited with {e.code})") from None
    if args.no_python:
        raise _user_error("--no-python starts a program that is not Python: haiprof can only profile Python ranks")
    user = (["-m", args.training_script] if args.module else [args.training_script]) + list(args.training_script_args)
    script, module = (None, user[1]) if args.module else (user[0], None)
    launcher._check_target(script, module, run_parents=False)   # a bad target fails here, once, not once per rank
    ours = ["--run-dir", str(run_dir.resolve()), "--sample-interval", str(sample_interval),
            "--trace-steps", str(trace_steps)]
    if steps:
        ours += ["--steps", str(steps)]
    if trace_at:
        ours += ["--trace-at", trace_at]
    if trace_every:
        ours += ["--trace-every", str(trace_every)]
    if fix:
        if fix.strip().lower() == "auto":
            raise _user_error("--fix auto is not supported for distributed jobs yet: name the fixes "
                              "(e.g. --fix compress,bucket)")
        ours += ["--fix", fix]
    args.run_path = False
    if WORKER_FILE.is_file():
        args.module, args.training_script = False, str(WORKER_FILE)
    else:   # haiprof imported from an archive: no file to start, the module form still runs
        args.module, args.training_script = True, WORKER_MODULE
    args.training_script_args = [*ours, "--", *user]
    return args, user


def job_meta(ns, haiprof_argv, launch_argv, user, target_name) -> dict:
    return {"haiprof_version": __version__, "distributed": True, "haiprof_argv": list(haiprof_argv),
            "command": " ".join(["haiprof", "run", *haiprof_argv]), "launcher_argv": launch_argv,
            "target_argv": user, "target_name": target_name, "host": socket.gethostname(), "pid": os.getpid(),
            "cwd": os.getcwd(), "start_time": time.time(), "end_time": None, "exit_code": None}


def run_job(ns, target: list[str], haiprof_argv: list[str]) -> int:
    """Start the job, wait for it, write the merged report; returns torchrun's exit code (1 if a rank failed)."""
    from ..analysis.report import finish
    from . import run_setup

    launch_argv = torchrun_argv(ns, target)
    probe_dir = Path(ns.out) if ns.out else None
    trace = dict(trace_at=getattr(ns, "trace_at", None), trace_every=getattr(ns, "trace_every", None))
    args, user = rewrite(launch_argv, probe_dir or Path("."), ns.steps, ns.sample_interval, ns.trace_steps,
                         getattr(ns, "fix", None), **trace)
    target_name = Path(user[0]).stem if user[0] != "-m" else user[1].split(".")[-1]
    run_dir = run_setup.claim_out_dir(ns.out, target_name)
    args, user = rewrite(launch_argv, run_dir.path, ns.steps, ns.sample_interval, ns.trace_steps,
                         getattr(ns, "fix", None), **trace)
    run_dir.write_meta(job_meta(ns, haiprof_argv, launch_argv, user, target_name))
    failures, code, how = _launch(args)
    run_dir.update_meta(end_time=time.time(), exit_code=code, how=how, failures=failures,
                        nproc_per_node=args.nproc_per_node, nnodes=args.nnodes)
    finish(run_dir, quiet=ns.quiet)
    return code


def _launch(args) -> tuple[dict, int, str]:
    from torch.distributed import run as tdr
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    try:
        tdr.run(args)
        return {}, 0, "exit"
    except ChildFailedError as e:
        failures = {str(rank): {"exitcode": f.exitcode, "pid": f.pid, "local_rank": f.local_rank,
                                "host": socket.gethostname()} for rank, f in e.failures.items()}
        return failures, 1, "rank-failed"
    except SignalException as e:   # haiprof itself got SIGTERM/SIGINT: the agent stopped the workers
        print(f"haiprof: launcher stopped by {e.sigval.name}", file=sys.stderr)
        return {}, 128 + int(e.sigval), "signal"
    except Exception as e:         # rendezvous failure, timeouts: torchrun would exit 1 as well
        print(f"haiprof: launcher failed: {type(e).__name__}: {e}", file=sys.stderr)
        return {"launcher": {"error": f"{type(e).__name__}: {e}"}}, 1, "launcher-error"
