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
    meta = run_dir.read_meta()
    if not run_dir.in_progress(meta)[0]:
        run_dir.release_leftover_reservation()   # a killed run's spare disk; a live one still writes into it
    summary = finish(run_dir, quiet=ns.quiet)
    if summary is not None and summary.get("snapshot") and not ns.quiet:
        from ..errors import say
        say(f"haiprof: a snapshot of a run in progress ({summary.get('steps', 0)} steps so far; pid "
            f"{meta.get('pid')}): the run replaces it with its own report when it ends")
    return 0 if summary is not None else 1
