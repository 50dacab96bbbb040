"""Console output: the verdict sentence and where the report is. Goes to stderr, never the script's stdout."""
from __future__ import annotations


def verdict_lines(summary: dict, report_path) -> list[str]:
    lines = [f"haiprof: {summary['headline']}"]
    first = (summary.get("next_steps") or [{}])[0]
    if (first.get("predicted") or {}).get("text"):   # the page's "do this next" quotes the same prediction
        what = f"--fix {first['fix']}" if first.get("fix") else first.get("title", first.get("kind", ""))
        lines.append(f"haiprof:   {what} {first['predicted']['text']}")
    for f in summary.get("findings", [])[:4]:
        if f["kind"] != summary["bottleneck"] and f["severity"] in ("high", "moderate"):
            fixes = ", ".join(f"--fix {x}" for x in f.get("fixes") or [])   # left-out fixes are dropped already
            lines.append(f"haiprof:   also {f['kind']} ({f['severity']}): {f['message']}"
                         + (f" ({fixes})" if fixes else ""))
    if summary.get("exit_code") not in (0, None):
        lines.append(f"haiprof: the script exited with code {summary['exit_code']}")
    lines.append(f"haiprof: report: {report_path}")
    return lines
