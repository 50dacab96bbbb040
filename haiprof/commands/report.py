"""`haiprof report RUN_DIR`: (re)build summary.json and report.html from a run directory, e.g. after a kill."""
from __future__ import annotations


from ..errors import OneLineParser

from ..analysis.report import finish
from ..rundir import RunDir


def cmd_report(argv: list[str]) -> int:
    p = OneLineParser(prog="haiprof report", description="(Re)build summary.json and report.html "
                                "from a run directory, e.g. after the run was killed.")
    p.add_argument("run_dir")
    p.add_argument("--quiet", action="store_true")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    run_dir = RunDir.open(ns.run_dir)
    run_dir.read_meta()
    return 0 if finish(run_dir, quiet=ns.quiet) is not None else 1
