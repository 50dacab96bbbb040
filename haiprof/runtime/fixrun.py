"""Wiring for `haiprof run --fix`: choose the fixes, find the baseline, install them, record what they did.

  --fix ID[,ID...]  the named fixes (ID=VARIANT picks a variant, e.g. compress=powersgd);
  --fix auto        the fixes the diagnosis recommends: the findings of the latest run of the same command in
                    the output directory, or, when there is none, of a short diagnosis pass run first; ranked by
                    expected gain, each with its reason, leaving out fixes that earlier fixed runs of the same
                    command showed to slow the step (analyzers/fix_choice.py).
The baseline (for the before/after comparison and the loss guard) is the latest unfixed, finished run of the same
command in the output directory; a diagnosis pass becomes that baseline. It is re-measured right before (a short
baseline pass) when it is older than BASELINE_MAX_AGE_S or was launched under other conditions (CPU affinity,
thread/device environment variables, torch version, host: analyzers/conditions.py). With --interleave N, N baseline
and N fixed short passes alternate (A B A B ...) before the run: each pair ran in the same conditions, and the
spread of the per-pair ratios is the noise of the comparison (analysis/fix_results.py).
Files: fixes.json (plan, then results; the runs it names stored absolute and relative: rundir/links.py) and
losses.json (every run, fixed or not) in the run directory.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import UserError, say
from ..rundir import RunDir, links, write_json_atomic

FIXES_FILE = "fixes.json"
LOSSES_FILE = "losses.json"
LOSSES_STREAM = "losses.txt"   # written as the run goes (collectors/loss.py): what a killed run keeps
DIAGNOSIS_STEPS = 20
# --interleave's passes when a fix starts DataLoader workers and no --steps is given: a pool delivers batches in
# rounds of up to its size (at most 16 workers), and a 20-step pass holds one to three rounds, its steady step off
# by up to one of them; 60 steps hold four or more for pools of up to 15 (a 16-worker pool gets 3.75)
WORKER_PASS_STEPS = 60
DIAGNOSIS_ENV = "HAIPROF_DIAGNOSIS_PASS"   # set for the diagnosis run: it stops at its last step (session.py)


class FixRequestError(UserError):
    """Bad --fix value (unknown id), or a diagnosis pass that failed: one line for the user."""


@dataclass
class FixPlan:
    spec: str
    requested: dict = field(default_factory=dict)
    source: str = "explicit"
    diagnosis_run: str | None = None
    baseline_run: str | None = None
    note: str | None = None
    ranked: list = field(default_factory=list)     # --fix auto: chosen fixes, best expected gain first, with why
    remeasured: str | None = None                  # why the baseline was re-measured right before, if it was
    baseline_caveat: str | None = None             # why it should have been, where a rank cannot do it alone
    interleaved: list = field(default_factory=list)   # --interleave: [{"baseline_run", "fixed_run"}] in run order
    excluded: list = field(default_factory=list)   # --fix auto: recommended fixes left out, with why


def target_key(meta: dict) -> tuple:
    """What makes two runs 'the same command': the script (resolved) or module, its arguments, and the rank
    (under torchrun each rank compares with its own earlier run)."""
    if meta.get("module"):
        what = ("module", meta["module"])
    else:
        what = ("script", os.path.realpath(os.path.join(meta.get("cwd") or ".", meta.get("script") or "")))
    return what + (tuple(meta.get("argv") or ()), meta.get("rank"))


def earlier_runs(out_dir: Path, job_rank: bool = False) -> tuple[Path, str]:
    """(where, glob) of the earlier runs a run in out_dir compares with: its siblings; for a rank directory of a
    job haiprof launched (JOB/rank-K), the same rank's directory of the earlier jobs beside JOB."""
    if job_rank:
        return out_dir.parent.parent, f"*/{out_dir.name}/meta.json"
    return out_dir.parent, "*/meta.json"


def runs_of(parent: Path, key: tuple, exclude: Path | None = None,
            pattern: str = "*/meta.json") -> list[tuple[dict, RunDir]]:
    """Earlier runs of the same command under parent (each a `pattern`'s meta.json), newest first."""
    found = []
    if not parent.is_dir():
        return found
    for meta_path in parent.glob(pattern):
        d = meta_path.parent
        if exclude is not None and d.resolve() == exclude.resolve():
            continue
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if target_key(meta) == key:
            found.append((meta, RunDir(d)))
    found.sort(key=lambda m: m[0].get("start_time") or 0, reverse=True)
    return found


def _usable(meta: dict, rd: RunDir) -> dict | None:
    if meta.get("exit_code") != 0 or not rd.file("summary.json").is_file():
        return None
    try:
        s = rd.read_summary()
    except (OSError, ValueError):
        return None
    return s if s.get("steps") else None


def find_baseline(parent: Path, key: tuple, exclude: Path | None = None,
                  pattern: str = "*/meta.json") -> tuple[RunDir, dict] | None:
    for meta, rd in runs_of(parent, key, exclude, pattern):
        if meta.get("fixes_requested"):
            continue
        s = _usable(meta, rd)
        if s is not None:
            return rd, s
    return None


def fix_history(parent: Path, key: tuple, exclude: Path | None = None, pattern: str = "*/meta.json") -> list[dict]:
    """Earlier fixed runs of the same command, newest first: which fixes acted and what they bought."""
    out = []
    for meta, rd in runs_of(parent, key, exclude, pattern):
        if not meta.get("fixes_requested"):
            continue
        if meta.get("exit_code") not in (0, None):   # the script failed with these fixes in it
            try:
                fx = (rd.read_summary().get("fixes") or {})
            except (OSError, ValueError):
                fx = {}
            from ..analysis.fix_results import applied_ids
            applied = applied_ids(fx)
            if applied:
                out.append({"run": str(rd.path.resolve()), "applied": applied, "gain": {},
                            "crashed": meta["exit_code"]})
            continue
        s = _usable(meta, rd)
        fx = (s or {}).get("fixes") or {}
        if fx.get("gain"):
            out.append({"run": str(rd.path.resolve()), "applied": list(fx["gain"].get("applied") or []),
                        "gain": fx["gain"]})
    return out


def recommended(summary: dict) -> dict:
    """Fix ids the diagnosis recommends: those of the finding that names the bottleneck."""
    from haiprof.fixes import FIX_IDS
    kind = summary.get("bottleneck")
    out: dict = {}
    for f in summary.get("findings") or []:
        if f.get("kind") == kind:   # and those its prediction left out (fix_choice says why)
            gone = [x for x, why in ((f.get("evidence") or {}).get("fixes_left_out") or {}).items()
                    if str(why).startswith("not worth it here")]
            for fix in (f.get("fixes") or []) + gone:
                if fix in FIX_IDS:
                    out[fix] = None
    return {k: None for k in FIX_IDS if k in out}


class ScriptFailedInDiagnosis(Exception):
    """The script itself failed during the diagnosis pass (its traceback was shown): the run ends with its exit
    code, as python's would have, and nothing is applied."""

    def __init__(self, code: int, run: Path, label: str = "diagnosis"):
        super().__init__(code)
        self.code, self.run, self.label = code, run, label


def diagnosis_pass(opts, parent: Path, target_name: str, steps: int, label: str = "diagnosis",
                   fix: str | None = None) -> Path:
    """Run the script for `steps` steps under haiprof (with `fix` applied, for an interleaved fixed pass) to find
    what to fix or to measure a baseline. What it prints is shown on stderr, marked, and kept in the pass's
    stdout.txt (the user's stdout carries only the real run). At its last step the pass ends without unwinding
    the script (DIAGNOSIS_ENV): its finally blocks and atexit handlers, which may save a model or write a log, do
    not run for it."""
    out = RunDir.claim_new(parent, f"{target_name}-{label.replace(' ', '-')}").path
    (out / "samples").rmdir()   # the run below claims its --out only while it is empty
    target = ["-m", opts.module] if opts.module else [opts.script]
    cmd = [sys.executable, "-m", "haiprof", "run", "--quiet", "--steps", str(steps), "--out", str(out),
           "--sample-interval", str(opts.sample_interval_s), *(["--fix", fix] if fix else []), *target, *opts.args]
    log = out.parent / f".{out.name}.stdout.txt"   # beside the run while it runs, then moved in
    env = {**os.environ, DIAGNOSIS_ENV: "1"}
    with open(log, "wb") as keep:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
        for line in proc.stdout:   # the terminal sees the pass's output, marked, on stderr
            keep.write(line)
            if not opts.quiet:
                say(f"haiprof: [{label}] " + line.decode("utf-8", "backslashreplace").rstrip("\n"))
        code = proc.wait()
    try:
        os.replace(log, out / "stdout.txt")
    except OSError:
        pass
    meta = {}
    try:
        meta = RunDir(out).read_meta()
    except Exception:
        pass
    if code != 0 and meta.get("exit_code") not in (None, 0):
        raise ScriptFailedInDiagnosis(meta["exit_code"], out, label)
    return out


def plan(opts, out_dir: Path, target_name: str, meta_key: tuple, conditions=None, job_rank: bool = False) -> FixPlan:
    """conditions: the conditions this run is launched under (meta.json `launch_conditions`, seen without
    torch: runtime/conditions.py), checked against the baseline's.
    job_rank: out_dir is a rank's directory of a job haiprof launched (JOB/rank-K). A rank (meta_key's rank set)
    never runs a pass of the script on its own: alone it would wait for, or join, the other ranks' process group."""
    from haiprof.fixes import AUTO, FixSpecError, parse_spec
    spec = opts.fix.strip()
    parent, pattern = earlier_runs(out_dir, job_rank)
    alone = meta_key[-1] is None
    p = FixPlan(spec=spec)
    if getattr(opts, "interleave", 0) and not alone:
        raise FixRequestError("--interleave runs passes of the script on their own: not in a rank of a "
                              "distributed job")
    if spec.lower() == AUTO:
        prior = None
        for meta, rd in runs_of(parent, meta_key, out_dir, pattern):
            s = _usable(meta, rd)
            if s is not None and not meta.get("fixes_requested"):
                prior = (rd, s)
                break
        if prior is not None:
            p.source = "auto: findings of the latest run of this command"
        elif not alone:
            raise FixRequestError("--fix auto in a rank of a distributed job needs an earlier run of the job "
                                  "without --fix: a rank cannot run a diagnosis pass on its own")
        else:
            steps = opts.steps or DIAGNOSIS_STEPS
            if not opts.quiet:
                print(f"haiprof: --fix auto: no earlier run of this command in {parent}; "
                      f"diagnosing with a {steps}-step run first", file=sys.stderr)
            d = diagnosis_pass(opts, parent, target_name, steps)
            rd = RunDir(d)
            s = _usable(rd.read_meta() if rd.file("meta.json").is_file() else {}, rd)
            if s is None:
                raise FixRequestError(f"--fix auto: the diagnosis run in {d} did not finish cleanly")
            prior = (rd, s)
            p.source = "auto: findings of a diagnosis run"
        p.diagnosis_run = str(prior[0].path.resolve())
        from haiprof.analyzers.fix_choice import rank
        from haiprof.fixes import FIX_IDS
        candidates = list(recommended(prior[1]))
        p.ranked, p.excluded = rank(prior[1], candidates, fix_history(parent, meta_key, out_dir, pattern))
        chosen = {c["id"] for c in p.ranked}
        p.requested = {k: None for k in FIX_IDS if k in chosen}
        if not candidates:
            p.note = f"the diagnosis found no bottleneck with a fix ({prior[1].get('bottleneck')}): nothing applied"
        elif not p.requested:
            p.note = "every fix the diagnosis recommends was left out (see why below): nothing applied"
        if not opts.quiet:
            for c in p.ranked:
                print(f"haiprof: --fix auto: {c['id']} (expected {c['expected_speedup']:.2f}x): {c['reason']}",
                      file=sys.stderr)
            for c in p.excluded:
                print(f"haiprof: --fix auto: left out {c['id']}: {c['reason']}", file=sys.stderr)
    else:
        try:
            p.requested = parse_spec(spec)
        except FixSpecError as e:
            raise FixRequestError(str(e)) from None
    if os.environ.get(DIAGNOSIS_ENV) == "1":   # an interleaved fixed pass: the run that started it compares
        return p
    base = find_baseline(parent, meta_key, out_dir, pattern)
    if p.requested and getattr(opts, "interleave", 0):
        base = _interleave(opts, parent, target_name, p) or base
    elif base is not None:
        why = _why_remeasure(base, conditions)
        if why and not alone:   # compared with as it is, and said so
            p.baseline_caveat = why
        elif why:
            p.remeasured = why
            base = _remeasured_baseline(opts, parent, target_name, base, why) or base
    if base is not None:
        p.baseline_run = str(base[0].path.resolve())
    return p


# A baseline older than this was recorded under other conditions (load, caches, data, the code around the
# script): the speedup is measured against a short baseline pass re-measured right before, on the machine as
# it is now.
BASELINE_MAX_AGE_S = 30 * 60


def _age_s(rd: RunDir) -> float:
    try:
        end = rd.read_meta().get("end_time")
    except (OSError, ValueError):
        return float("inf")
    return time.time() - end if isinstance(end, (int, float)) else float("inf")


def _why_remeasure(base: tuple, conditions: dict | None) -> str | None:
    """Why the baseline cannot stand for the machine as it is now: too old, or set up otherwise."""
    if _age_s(base[0]) > BASELINE_MAX_AGE_S:
        return f"{_age_s(base[0]) / 60:.0f} min old"
    try:   # as launched (the environment and CPUs the user gave it); a run of an older haiprof has only the rest
        meta = base[0].read_meta()
        before = meta.get("launch_conditions") or meta.get("conditions")
    except (OSError, ValueError):
        before = None
    from haiprof.analyzers.conditions import setup_differences
    diffs = setup_differences(before or {}, conditions or {}) if isinstance(before, dict) else []
    return f"set up under other conditions ({'; '.join(diffs)})" if diffs else None


def _remeasured_baseline(opts, parent: Path, target_name: str, stale, why: str) -> tuple | None:
    steps = opts.steps or DIAGNOSIS_STEPS
    if not opts.quiet:
        say(f"haiprof: --fix: the latest unfixed run of this command ({stale[0].path}) is {why}: re-measuring a "
            f"{steps}-step baseline first, on the machine as it is now")
    return _pass(opts, parent, target_name, steps, "baseline")


def _pass(opts, parent: Path, target_name: str, steps: int, label: str, fix: str | None = None) -> tuple | None:
    d = RunDir(diagnosis_pass(opts, parent, target_name, steps, label=label, fix=fix))
    s = _usable(d.read_meta() if d.file("meta.json").is_file() else {}, d)
    return (d, s) if s is not None else None


def pass_steps(steps: int | None, requested) -> int:
    """The steps of each --interleave pass: the user's --steps, else longer passes for a fix that starts workers."""
    return steps or (WORKER_PASS_STEPS if "prefetch" in (requested or {}) else DIAGNOSIS_STEPS)


def _interleave(opts, parent: Path, target_name: str, p: FixPlan) -> tuple | None:
    """--interleave N: N pairs of short passes, baseline then fixed, right before the run; the last baseline pass
    is the run's own baseline (loss guard, per-phase before/after). Pairs where either pass failed are dropped."""
    from haiprof.fixes import format_spec
    steps, n, spec = pass_steps(opts.steps, p.requested), opts.interleave, format_spec(p.requested)
    if not opts.quiet:
        say(f"haiprof: --fix {spec}: {n} baseline and {n} fixed passes of {steps} steps, alternated, before the "
            f"run: each pair measured in the same conditions")
    last = None
    for _ in range(n):
        a = _pass(opts, parent, target_name, steps, "baseline")
        b = _pass(opts, parent, target_name, steps, "fixed pass", fix=spec)
        if a is not None and b is not None:
            p.interleaved.append({"baseline_run": str(a[0].path.resolve()), "fixed_run": str(b[0].path.resolve())})
        last = a or last
    return last


class FixSession:
    """Installed around the script by session.Session: fixes first (innermost), the loss recorder after them."""

    def __init__(self, run_dir: RunDir, fix_plan: FixPlan | None):
        self.run_dir, self.plan = run_dir, fix_plan
        self.installed = None
        self.losses = None

    def start(self) -> None:
        diagnosis = None
        if self.plan is not None:
            write_json_atomic(self.run_dir.file(FIXES_FILE), {**self._on_disk(), "results": None})
            source = self.plan.diagnosis_run or self.plan.baseline_run   # explicit --fix: the baseline's numbers
            if source:
                try:
                    diagnosis = RunDir(source).read_summary()
                except (OSError, ValueError):
                    diagnosis = None
            if self.plan.requested:
                from haiprof.fixes import install_fixes
                self.installed = install_fixes(self.plan.requested, diagnosis)
        from haiprof.collectors.loss import LossRecorder
        try:
            self.losses = LossRecorder(stream_path=self.run_dir.file(LOSSES_STREAM)).install()
        except Exception as e:
            self.run_dir.record_status("loss", False, f"loss hook could not be installed: {type(e).__name__}: {e}")

    def finish(self) -> None:
        if self.losses is not None:
            self.losses.uninstall()
            write_json_atomic(self.run_dir.file(LOSSES_FILE),
                              {"losses": self.losses.values(), "dropped": self.losses.dropped})
        if self.plan is not None:
            results = self.installed.finish() if self.installed is not None else []
            write_json_atomic(self.run_dir.file(FIXES_FILE), {**self._on_disk(), "results": results})

    def _on_disk(self) -> dict:
        """The plan with each run it names also relative to this run (rundir/links.py): moved together with its
        baseline, the run keeps its before/after."""
        d = links.with_relative(self.run_dir.path, asdict(self.plan), ("diagnosis_run", "baseline_run"))
        d["interleaved"] = [links.with_relative(self.run_dir.path, p, ("baseline_run", "fixed_run"))
                            for p in d["interleaved"]]
        return d


def format_requested(fix_plan: FixPlan) -> str | None:
    from haiprof.fixes import format_spec
    return format_spec(fix_plan.requested) if fix_plan.requested else None
