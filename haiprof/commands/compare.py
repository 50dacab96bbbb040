"""`haiprof compare RUN_A RUN_B`: before (A) / after (B) of two run directories, as console text, JSON (--json)
or a self-contained page (--html OUT).

Step time, throughput, per-phase time per step, the step-time distributions, the verdict of each, and the loss
guard when both runs recorded their losses. A fixed run's own report shows the same comparison against its
baseline (render/fixes_panel.py). Runs of different commands (script or module, and its arguments) are refused
unless --force: their step times and losses are not a before/after of anything.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from haiprof.analyzers.compare import describe_target, text_lines
from haiprof.analyzers.fix_gain import text_lines as fix_gain_lines

from ..errors import OneLineParser, UserError
from ..rundir import RunDir


def load_summary(run_dir: RunDir) -> dict:
    """summary.json, or a fresh analysis when the run was killed before writing it."""
    try:
        return run_dir.read_summary()
    except (OSError, ValueError):
        from ..analysis.summary import analyze
        return analyze(run_dir).summary


def command_mismatch(meta_a: dict, meta_b: dict) -> str | None:
    """Why A and B are not runs of the same command (ranks aside), or None when they are."""
    from ..runtime.fixrun import target_key
    ka, kb = target_key(meta_a)[:3], target_key(meta_b)[:3]
    if ka == kb:
        return None
    return f"the runs are of different commands (A: {describe_target(ka)}; B: {describe_target(kb)})"


def _write_html(path: Path, html: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name("." + path.name + ".tmp")
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None


def cmd_compare(argv: list[str]) -> int:
    p = OneLineParser(prog="haiprof compare",
                                description="Compare two runs: RUN_A (before) and RUN_B (after).")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--html", metavar="OUT", type=Path,
                   help="also write the before/after as a self-contained page (no network) to OUT")
    p.add_argument("--force", action="store_true", help="compare runs of different commands")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --html file")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if ns.html is not None and ns.html.exists() and not ns.overwrite:   # never a user's file, or a run's own
        raise UserError(f"--html {ns.html}: exists; choose a new file or pass --overwrite")
    a, b = RunDir.open(ns.run_a), RunDir.open(ns.run_b)
    ma, mb = a.read_meta(), b.read_meta()
    mismatch = command_mismatch(ma, mb)
    if mismatch and not ns.force:
        raise UserError(f"{mismatch}: pass --force to compare them anyway")
    sa, sb = load_summary(a), load_summary(b)
    from ..analysis.fix_results import before_after
    result = before_after(a, sa, b, sb)
    cmp, gain, guard = result["comparison"], result["gain"], result["loss_guard"]
    if ns.html is not None:
        from ..render.before_after import page
        notes = [f"compared with --force: {mismatch}"] if mismatch else []
        _write_html(ns.html, page(result, str(a.path), str(b.path), notes))
    if ns.json:
        print(json.dumps({**result, "different_commands": mismatch}, indent=1, default=str))
        return 0
    if mismatch:
        print(f"WARNING: {mismatch}")
    if gain.get("message"):
        print(f"WARNING: {gain['message']}")
    if gain.get("conditions"):   # the two runs' set-up or the load beside them differed
        print(f"WARNING: {gain['conditions']}")
    print(f"A (before): {a.path}  [{sa.get('bottleneck')}] {sa.get('headline')}")
    print(f"B (after):  {b.path}  [{sb.get('bottleneck')}] {sb.get('headline')}")
    fx = sb.get("fixes")
    if fx:
        print("fixes in B: " + ", ".join(f"{r['id']} {r['status']}" for r in fx.get("results") or []))
    for line in fix_gain_lines(gain):
        if not line.startswith("WARNING"):
            print(line)
    for line in text_lines(cmp):
        print(line)
    if guard is not None:
        print(f"loss guard: {guard['status']}: {guard['message']}")
    if ns.html is not None:
        print(f"page: {ns.html}")
    sys.stdout.flush()
    return 0
