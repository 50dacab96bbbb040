"""`haiprof run [options] (SCRIPT | -m MODULE) [ARGS...]`: parse our options, leave the script's to it, start it.

One process goes to runtime/script_run.py; torch.distributed jobs (--nproc-per-node, or a torchrun line after `--`)
go to runtime/distributed.py.
"""
from __future__ import annotations

import argparse
import math
import os

from ..errors import OneLineParser, UserError


def _takes_value(parser: argparse.ArgumentParser) -> dict:
    out = {}
    for action in parser._actions:
        for opt in action.option_strings:
            out[opt] = action.nargs != 0
    return out


def split_target(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """Split `[options] SCRIPT ARGS…` at the script: nothing after it is ours (python's own rule)."""
    takes = _takes_value(parser)
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return argv[:i], argv[i + 1:]
        if tok in ("-m",):
            return argv[:i], argv[i:]
        if not tok.startswith("-") or tok == "-":
            return argv[:i], argv[i:]
        name = tok.split("=", 1)[0]
        if name not in takes and _python_option(tok):
            raise UserError(f"unknown option {tok!r} for 'haiprof run': python's own options go to the python "
                            f"that runs haiprof, and the script's python gets them too: python {tok} -m haiprof run "
                            f"[options] SCRIPT")
        if name not in takes:
            raise UserError(f"unknown option {tok!r} for 'haiprof run' (see haiprof run --help)")
        i += 2 if takes[name] and "=" not in tok else 1
    return argv, []


def _python_option(tok: str) -> bool:
    """python's own interpreter options (`python -u train.py`), given to `haiprof run` by habit."""
    return tok in ("-u", "-O", "-OO", "-B", "-b", "-bb", "-d", "-s", "-v", "-q", "-R", "-P") or \
        tok[:2] in ("-W", "-X")


def _run_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="haiprof run",
        usage="haiprof run [options] (SCRIPT | -m MODULE) [ARGS ...]\n"
              "       haiprof run [options] -- torchrun [TORCHRUN_OPTIONS] SCRIPT [ARGS ...]",
        description="Run a PyTorch training script as python would, profile it, write a report.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  haiprof run train.py --epochs 1                   everything after SCRIPT is the script's\n"
               "  haiprof run -m mypackage.train                    modules, as with python -m\n"
               "  haiprof run --nproc-per-node 2 train.py           haiprof starts torch's elastic launcher\n"
               "  haiprof run --out runs/job -- torchrun --nproc-per-node 8 train.py\n"
               "                                                    wrap an existing torchrun (or python -m\n"
               "                                                    torch.distributed.run) command line\n"
               "  haiprof run --fix auto train.py                   apply what the diagnosis recommends")
    p.add_argument("--out", metavar="DIR", help="run directory (default haiprof-runs/<name>-<timestamp>/)")
    p.add_argument("--steps", type=int, metavar="N", help="stop the script cleanly after N steps (where step N+1 begins)")
    p.add_argument("--quiet", action="store_true", help="print nothing but the script's own output")
    p.add_argument("--sample-interval", type=float, default=0.5, metavar="S",
                   help="system sampling interval in seconds, jittered ±20%% (default 0.5)")
    from ..runtime import distributed  # --nproc-per-node & co. (issue 5)
    distributed.add_options(p)
    p.add_argument("--trace-steps", type=int, default=3, metavar="N",
                   help="trace N steps op by op with torch.profiler after warm-up, saved as trace.json.gz and "
                        "left out of the step statistics (default 3; 0 disables)")
    p.add_argument("--trace-at", metavar="STEP[,STEP...]",
                   help="also trace a window (of --trace-steps steps, 3 if 0) at each of these steps: its own "
                        "trace-step<STEP>.json.gz")
    p.add_argument("--trace-every", type=float, metavar="MINUTES",
                   help="also trace a window every MINUTES minutes of the run")
    p.add_argument("--trace-on-anomaly", action=argparse.BooleanOptionalAction, default=True,
                   help="the flight recorder: when steps run over K x the rolling median, trace a window where "
                        "the next one is due (a periodic stall's next occurrence; a slow stretch at once), with "
                        "Python functions (default on; --no-trace-on-anomaly turns it off)")
    p.add_argument("--anomaly-factor", type=float, default=3.0, metavar="K",
                   help="a step over K x the rolling median step is a slow moment (default 3)")
    p.add_argument("--anomaly-windows", type=int, default=2, metavar="N",
                   help="the flight recorder traces at most N windows a run (default 2; 0: none; of two or "
                        "more, the last is kept for a recurring stall until one is traced)")
    p.add_argument("--anomaly-mb", type=float, default=64.0, metavar="MB",
                   help="... and stops once its traces take MB megabytes (default 64)")
    p.add_argument("--snapshot-every", type=float, default=None, metavar="MINUTES",
                   help="write a snapshot report of the run so far every MINUTES minutes, at the lowest CPU "
                        "priority, so a killed run keeps a recent report (default 5; 0 turns it off)")
    p.add_argument("--fix", metavar="ID[,ID...]|auto", action="append",
                   help="apply fixes inside the run: prefetch, fused-optim, amp, compile, cuda-graphs, compress, "
                        "bucket; 'auto' applies what the diagnosis recommends")
    p.add_argument("--interleave", type=int, default=0, metavar="N",
                   help="with --fix: first alternate N baseline and N fixed short passes (--steps, default 20 "
                        "steps each) and report the speedup as the median of the N pair ratios with their spread "
                        "(the same conditions for both sides, on a loaded machine too)")
    return p


def trace_at_steps(text: str | None) -> tuple:
    """--trace-at 500,2000 -> (500, 2000): positive step numbers."""
    if not text:
        return ()
    try:
        steps = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--trace-at takes step numbers separated by commas, not {text!r}") from None
    if any(s < 1 for s in steps):
        raise UserError(f"--trace-at steps start at 1, not {text!r}")
    return steps


MAX_INTERLEAVE = 20
MIN_SAMPLE_INTERVAL_S = 0.02   # below this the sampler itself would take a core (psutil reads /proc per sample)


def _check_run_values(ns: argparse.Namespace) -> None:
    if ns.out == "":
        raise UserError("--out needs a directory (leave --out out for the default haiprof-runs/<name>-<time>/)")
    if isinstance(ns.fix, list):
        if len(ns.fix) > 1:
            raise UserError(f"--fix given {len(ns.fix)} times: name every fix in one --fix (e.g. --fix "
                            f"{','.join(x for x in ns.fix if x.strip().lower() != 'auto') or 'prefetch,amp'}), "
                            "or --fix auto alone")
        ns.fix = ns.fix[0]
    if ns.fix is not None and "auto" in [x.strip().lower() for x in ns.fix.split(",")] and \
            ns.fix.strip().lower() != "auto":
        raise UserError("--fix auto chooses the fixes from the diagnosis: give it alone, or name the fixes "
                        "(e.g. --fix prefetch,amp)")
    if ns.interleave and (ns.fix is None or ns.interleave < 0 or ns.interleave > MAX_INTERLEAVE):
        raise UserError(f"--interleave takes a number of baseline/fixed pass pairs from 1 to {MAX_INTERLEAVE}, with "
                        f"--fix" + ("" if ns.fix is None else f", not {ns.interleave}"))
    trace_at_steps(ns.trace_at)
    if ns.snapshot_every is not None:
        if not math.isfinite(ns.snapshot_every) or ns.snapshot_every < 0:
            raise UserError(f"--snapshot-every must be 0 (off) or a positive number of minutes, not "
                            f"{ns.snapshot_every}")
    if not math.isfinite(ns.anomaly_factor) or ns.anomaly_factor <= 1:
        raise UserError(f"--anomaly-factor must be a number above 1, not {ns.anomaly_factor}")
    if ns.anomaly_windows < 0:
        raise UserError(f"--anomaly-windows must be 0 (none) or more, not {ns.anomaly_windows}")
    if not math.isfinite(ns.anomaly_mb) or ns.anomaly_mb <= 0:
        raise UserError(f"--anomaly-mb must be a positive number of megabytes, not {ns.anomaly_mb}")
    if ns.trace_every is not None and (not math.isfinite(ns.trace_every) or ns.trace_every <= 0):
        raise UserError(f"--trace-every must be a positive number of minutes, not {ns.trace_every}")
    # nan passes `<= 0` and inf would make the sampler sleep forever: only finite positive intervals.
    if not math.isfinite(ns.sample_interval) or ns.sample_interval <= 0:
        raise UserError(f"--sample-interval must be a positive number of seconds, not {ns.sample_interval}")
    if ns.sample_interval < MIN_SAMPLE_INTERVAL_S and not ns.quiet:
        from ..errors import say
        say(f"haiprof: --sample-interval {ns.sample_interval:g} s is below {MIN_SAMPLE_INTERVAL_S} s: sampling "
            f"every {MIN_SAMPLE_INTERVAL_S} s (faster would take a core from the training)")
    ns.sample_interval = max(ns.sample_interval, MIN_SAMPLE_INTERVAL_S)
    if ns.fix is not None and ns.fix.strip().lower() != "auto":
        from haiprof.fixes import FixSpecError, parse_spec
        try:
            parse_spec(ns.fix)
        except FixSpecError as e:
            raise UserError(str(e)) from None


def cmd_run(argv: list[str]) -> int:
    parser = _run_parser()
    if argv and argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    ours, target = split_target(parser, argv)
    try:
        ns = parser.parse_args(ours)
    except SystemExit as e:  # argparse already printed its one-line message
        return int(e.code or 0)
    _check_run_values(ns)   # before anything runs: a bad value must not cost a whole job first
    from ..runtime import distributed  # torch.distributed jobs: every rank under the profiler (issue 5)
    if distributed.requested(ns, target):
        if ns.interleave:
            raise UserError("--interleave runs one process's passes: not with a distributed job")
        if ns.steps is not None and ns.steps < 1:
            raise UserError("--steps must be at least 1")
        if ns.snapshot_every is not None:   # the ranks' sessions read it from their environment
            from ..runtime.run_setup import SNAPSHOT_ENV
            os.environ[SNAPSHOT_ENV] = repr(ns.snapshot_every)
        from ..runtime.run_setup import ANOMALY_ENV   # the flight recorder's settings, for every rank
        os.environ[ANOMALY_ENV] = ",".join(map(str, (int(ns.trace_on_anomaly and ns.anomaly_windows > 0),
                                                     ns.anomaly_factor, ns.anomaly_windows, ns.anomaly_mb)))
        return distributed.run_job(ns, target, list(argv))
    module = script = None
    if target and target[0] == "-m":
        if len(target) < 2:
            raise UserError("-m needs a module name")
        module, args = target[1], target[2:]
    elif target:
        script, args = target[0], target[1:]
    else:
        raise UserError("no script given: haiprof run [options] SCRIPT [ARGS ...]")
    if ns.steps is not None and ns.steps < 1:
        raise UserError("--steps must be at least 1")
    if ns.trace_steps < 0:
        raise UserError("--trace-steps must be 0 (off) or more")
    from ..runtime.run_setup import RunOptions
    from ..runtime.script_run import run
    opts = RunOptions(script=script, module=module, args=args, out=ns.out, steps=ns.steps, quiet=ns.quiet,
                      sample_interval_s=ns.sample_interval, haiprof_argv=list(argv),
                      trace_steps=ns.trace_steps, fix=ns.fix, trace_at=trace_at_steps(ns.trace_at),
                      trace_every_min=ns.trace_every, interleave=ns.interleave,
                      trace_on_anomaly=ns.trace_on_anomaly and ns.anomaly_windows > 0,
                      anomaly_factor=ns.anomaly_factor, anomaly_windows=ns.anomaly_windows, anomaly_mb=ns.anomaly_mb,
                      **({"snapshot_every_min": ns.snapshot_every} if ns.snapshot_every is not None else {}))
    return run(opts)
