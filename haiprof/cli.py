"""Command line: `haiprof run|report …`. Parses arguments and wires the stages; no analysis happens here.

Errors in what the user gave us are one line on stderr and a non-zero exit code, never a haiprof traceback.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

from . import __version__
from .doctor import cmd_doctor
from .compare import cmd_compare   # haiprof compare (its own module)

USAGE_ERROR = 2
SIGPIPE_EXIT = 141   # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code USAGE_ERROR."""


def _fail(msg: str, code: int = USAGE_ERROR) -> int:
    print(f"haiprof: error: {msg}", file=sys.stderr)
    return code


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
        if name not in takes:
            raise UserError(f"unknown option {tok!r} for 'haiprof run' (see haiprof run --help)")
        i += 2 if takes[name] and "=" not in tok else 1
    return argv, []


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="haiprof run", usage="haiprof run [options] (SCRIPT | -m MODULE) [ARGS ...]",
        description="Run a PyTorch training script as python would, profile it, write a report.")
    p.add_argument("--out", metavar="DIR", help="run directory (default haiprof-runs/<name>-<timestamp>/)")
    p.add_argument("--steps", type=int, metavar="N", help="stop the script cleanly after N optimizer steps")
    p.add_argument("--quiet", action="store_true", help="print nothing but the script's own output")
    p.add_argument("--sample-interval", type=float, default=0.5, metavar="S",
                   help="system sampling interval in seconds, jittered ±20%% (default 0.5)")
    from . import distributed  # --nproc-per-node & co. (issue 5)
    distributed.add_options(p)
    p.add_argument("--trace-steps", type=int, default=3, metavar="N",
                   help="trace N steps op by op with torch.profiler after warm-up, saved as trace.json.gz and "
                        "left out of the step statistics (default 3; 0 disables)")
    p.add_argument("--fix", metavar="ID[,ID...]|auto",
                   help="apply fixes inside the run: prefetch, fused-optim, amp, compile, cuda-graphs, compress, "
                        "bucket; 'auto' applies what the diagnosis recommends")
    return p


def _check_run_values(ns: argparse.Namespace) -> None:
    # nan passes `<= 0` and inf would make the sampler sleep forever: only finite positive intervals.
    if not math.isfinite(ns.sample_interval) or ns.sample_interval <= 0:
        raise UserError(f"--sample-interval must be a positive number of seconds, not {ns.sample_interval}")
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
    from . import distributed  # torch.distributed jobs: every rank under the profiler (issue 5)
    if distributed.requested(ns, target):
        if ns.steps is not None and ns.steps < 1:
            raise UserError("--steps must be at least 1")
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
    from .session import RunOptions, run
    opts = RunOptions(script=script, module=module, args=args, out=ns.out, steps=ns.steps, quiet=ns.quiet,
                      sample_interval_s=ns.sample_interval, haiprof_argv=list(argv),
                      trace_steps=ns.trace_steps, fix=ns.fix)
    return run(opts)


def cmd_analyze(argv: list[str]) -> int:
    from .trace_analyze import cmd_analyze as analyze  # pandas/numpy: imported only for this command
    return analyze(argv)


def cmd_export(argv: list[str]) -> int:
    from .export import cmd_export as export
    return export(argv)


def cmd_report(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="haiprof report", description="(Re)build summary.json and report.html "
                                "from a run directory, e.g. after the run was killed.")
    p.add_argument("run_dir")
    p.add_argument("--quiet", action="store_true")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    from .rundir import RunDir
    from .session import finish
    run_dir = RunDir.open(ns.run_dir)
    run_dir.read_meta()
    return 0 if finish(run_dir, quiet=ns.quiet) is not None else 1


COMMANDS = {
    "run": (cmd_run, "run a script or module under the profiler"),
    "report": (cmd_report, "rebuild summary.json and report.html from a run directory"),
    "doctor": (cmd_doctor, "list the collectors available on this host, why not, and how to enable them"),
    "compare": (cmd_compare, "before/after of two runs: step time, throughput, phases, verdict"),
    "analyze": (cmd_analyze, "analyse PyTorch profiler traces (a file or a directory of per-rank traces)"),
    "export": (cmd_export, "write a run as a Chrome trace for Perfetto (--format chrome)"),
}


def _usage() -> str:
    lines = ["usage: haiprof COMMAND [options] ...", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `haiprof` and `python -m haiprof`. A reader that went away (`haiprof ... | head -1`) ends
    the command quietly: no traceback, no 'Exception ignored' at the interpreter's final flush."""
    code = None
    try:
        code = _main(argv)
        sys.stdout.flush()   # inside the try: a broken pipe surfaces here, not at interpreter exit
        return code
    except BrokenPipeError:
        # Python docs' recipe: point stdout at devnull so the final flush has nowhere to fail.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return code if code else SIGPIPE_EXIT   # a script's own non-zero exit code wins


def _main(argv: list[str] | None = None) -> int:
    from .launcher import LaunchError
    from .rundir import NotARunDir, OutDirError

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else USAGE_ERROR
    if argv[0] == "--version":
        print(f"haiprof {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        return _fail(f"unknown command {name!r}\n{_usage()}")
    try:
        return COMMANDS[name][0](rest)
    except (UserError, LaunchError, NotARunDir, OutDirError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130
