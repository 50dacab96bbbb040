"""summary.json, report.html and the console verdict from a run directory: the end of `haiprof run` and all of
`haiprof report`. Imports are deferred so that `haiprof run` does not pay for them before the script starts."""
from __future__ import annotations


from ..errors import say
from ..rundir import RunDir


def _say(line: str) -> None:
    say(line)   # the process's own stderr, not the script's replacement (errors.keep_stderr)


def finish(run_dir: RunDir, quiet: bool = False) -> dict | None:
    """Analyse and render; a failure here is one line on stderr, never the user's exit code."""
    from ..render import console, html
    from . import ranks
    from .fix_results import console_lines, regression_lines
    from .summary import analyze

    # A distributed job's directory holds one sub-directory per rank and gets the merged report.
    analyze_dir = ranks.analyze_job if ranks.is_distributed(run_dir) else analyze
    try:
        data = analyze_dir(run_dir)
        run_dir.write_summary(data.summary)
        report = html.write(data, run_dir.file("report.html"))
    except Exception as e:
        # the data on disk is intact: say how to get the report once the cause (often a full disk) is gone
        _say(f"haiprof: could not write the report in {run_dir.path}: {type(e).__name__}: {e}; "
             f"rebuild it with: haiprof report {run_dir.path}")
        return None
    if not quiet:
        for line in regression_lines(data.summary) + console.verdict_lines(data.summary, report) + \
                console_lines(data.summary):
            _say(line)
    return data.summary
