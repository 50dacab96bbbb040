"""Command line: `haiprof COMMAND …`. The command table and the dispatch; each command is a module in commands/.

Errors in what the user gave us are one line on stderr and a non-zero exit code, never a haiprof traceback.
"""
from __future__ import annotations

import importlib
import os
import sys

from .errors import USAGE_ERROR, UserError
from .version import __version__

SIGPIPE_EXIT = 141   # 128 + SIGPIPE: what a shell reports for a writer whose reader went away

# name -> help; the command is `cmd_<name>` in commands/<name>.py, imported on use so that `haiprof run` does
# not pay for the other commands' imports.
COMMANDS = {
    "run": "run a script or module under the profiler",
    "report": "rebuild summary.json and report.html from a run directory",
    "doctor": "list the collectors available on this host, why not, and how to enable them",
    "compare": "before/after of two runs: step time, throughput, phases, verdict",
    "analyze": "analyse PyTorch profiler traces (a file or a directory of per-rank traces)",
    "export": "write a run as a Chrome trace for Perfetto (--format chrome)",
    "trace": "ask a running run (every rank of a job) for an op-level tracing window now or at a step",
}


def _fail(msg: str, code: int = USAGE_ERROR) -> int:
    print(f"haiprof: error: {msg}", file=sys.stderr)
    return code


def command(name: str):
    """The `cmd_<name>(argv) -> int` function of a command."""
    return getattr(importlib.import_module(f"{__package__}.commands.{name}"), f"cmd_{name}")


def _usage() -> str:
    lines = ["usage: haiprof COMMAND [options] ...", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, help_ in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `haiprof` and `python -m haiprof`. A reader that went away (`haiprof ... | head -1`) ends
    the command quietly: no traceback, no 'Exception ignored' at the interpreter's final flush."""
    code = None
    try:
        code = _main(argv)
        try:
            sys.stdout.flush()   # inside the try: a broken pipe surfaces here, not at interpreter exit
        except (ValueError, AttributeError):   # the script closed stdout, or set it to None: python says nothing
            pass
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
    from .runtime.target_check import LaunchError
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
        return command(name)(rest)
    except LaunchError as e:   # a target python could not start either: its own line and exit status
        print(e.line, file=sys.stderr)
        return e.exit_code
    except (UserError, NotARunDir, OutDirError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130
