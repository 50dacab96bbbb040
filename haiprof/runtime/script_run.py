"""`haiprof run SCRIPT`: check the target, claim the run directory, choose the --fix plan, run the script in its
own python under the collectors (child_run.py), then analyse and render. A distributed job's ranks start at
worker.py instead.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..analysis.report import finish
from ..errors import UserError, keep_stderr, say
from ..rundir import RunDir
from . import launcher
from .run_setup import RunOptions, claim_out_dir, collect_meta


def run(opts: RunOptions) -> int:
    """Run the target under the collectors; return the exit code python would have returned."""
    t_setup = time.perf_counter()
    target = opts.module or opts.script
    target_name = Path(target.rstrip("/")).stem if opts.script else opts.module.split(".")[-1]
    try:
        launcher._check_target(opts.script, opts.module, run_parents=False)   # bad target: fail before creating anything
    except launcher.ScriptSyntaxError as e:   # the user's own error: python's caret display, exit 1
        sys.stderr.write(e.text)
        return 1
    keep_stderr()   # before the script can replace or close sys.stderr: our messages go to fd 2 as it is now
    run_dir = claim_out_dir(opts.out, target_name)   # a bad --out fails here, before the script starts
    out_dir = run_dir.path
    # This process does not import torch: the script's python measures torch's set-up conditions (child_boot).
    # A --fix plan compares the launch's with its baseline's (conditions.py).
    meta = collect_meta(opts, target_name, run_dir, measure_torch=False)
    if os.environ.get("RANK", "").isdigit():   # a rank's baseline is the same rank's earlier run
        meta.setdefault("rank", int(os.environ["RANK"]))
    # --- fixes (haiprof run --fix): choose them (may run a diagnosis pass) before our run dir exists ---
    from . import fixrun
    try:
        fix_plan = fixrun.plan(opts, out_dir, target_name, fixrun.target_key(meta),
                               meta["launch_conditions"]) if opts.fix else None
    except fixrun.ScriptFailedInDiagnosis as e:   # the script's own failure, shown above: its exit code, as python
        _remove_if_empty(run_dir)
        if e.label == "diagnosis":
            say(f"haiprof: --fix auto: the script failed during the diagnosis pass (exit {e.code}; its output is "
                 f"above and in {e.run}): nothing to diagnose, nothing applied")
        else:   # a baseline or an interleaved pass: the real run would fail alike
            say(f"haiprof: --fix: the script failed during a {e.label} pass (exit {e.code}; its output is above "
                 f"and in {e.run}): the run is not started")
        return e.code
    except BaseException:
        _remove_if_empty(run_dir)
        raise
    if fix_plan is not None:
        # the run starts now: a baseline or interleaved passes run above are not its wall time
        meta.update(start_time=time.time(), start_monotonic_ns=time.monotonic_ns())
        meta.update(fixes_requested=fixrun.format_requested(fix_plan), fix_source=fix_plan.source,
                    baseline_run=fix_plan.baseline_run, diagnosis_run=fix_plan.diagnosis_run)
    # --- end fixes ---
    try:
        run_dir.write_meta(meta)
    except OSError as e:   # a full (or read-only) disk at start: one line, nothing left behind, no script run
        _remove_new_run_dir(run_dir)
        raise UserError(f"cannot write the run directory {run_dir.path}: {e.strerror or e}") from None
    setup_s = time.perf_counter() - t_setup

    def on_exit(run_dir: RunDir, outcome) -> None:
        t_teardown = time.perf_counter()
        if getattr(run_dir, "unwritten", None):   # the disk is full: said once, with the command for later
            return
        finish(run_dir, quiet=opts.quiet)
        # haiprof's own cost, for the overhead benchmark: set-up and teardown.
        try:
            run_dir.update_meta(overhead_s={"setup": round(setup_s, 4),
                                            "teardown": round(time.perf_counter() - t_teardown, 4)})
        except OSError:
            pass   # a full disk: said once already (the script's python); the exit code stays the script's

    # The script's python draws the live status line (child_boot): the terminal's row is given back there before
    # its traceback, and it steps aside for the script's own tqdm bar.
    from . import child_run
    return child_run.run(run_dir, opts, fix_plan, on_exit)


def _remove_new_run_dir(run_dir: RunDir) -> None:
    """Take back the directory claim_out_dir just made (new or empty, so nothing of the user's is in it)."""
    import shutil
    shutil.rmtree(run_dir.path, ignore_errors=True)


def _remove_if_empty(run_dir: RunDir) -> None:
    try:
        (run_dir.path / "samples").rmdir()
        run_dir.path.rmdir()
    except OSError:
        pass
