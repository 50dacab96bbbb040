"""Print every page-invariant violation (analyzers/page_invariants.py) of run directories: the shared recordings
(re-reported on a copy), the peer traces (analysed), and any run directories named.

    python benchmarks/page_audit.py                      # the shared H100 recordings and the peer traces
    python benchmarks/page_audit.py RUN_DIR [RUN_DIR...]  # run directories as they are (report re-written)
    python benchmarks/page_audit.py --examples --job 256 --long 100000   # add runs made here (see below)

--examples runs every bundled example (examples/*.py, short arguments; the distributed ones as 2-rank jobs, each
rank's own page audited too) plain and with `--fix auto` (a job: `--fix compress,bucket`); --job N builds an
N-rank job from the recorded 2-rank one (benchmarks/job_scale.py); --long N runs a tiny training loop for N steps.

Exit 1 when anything is violated.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HAIPROF_SHARED", REPO.parent / "shared"))
HAIPROF = [sys.executable, "-m", "haiprof"]


def audit(run: Path) -> list[str]:
    from haiprof.analyzers.page_invariants import check
    r = subprocess.run([*HAIPROF, "report", "--quiet", str(run)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not (run / "summary.json").is_file():
        return [f"report failed: {r.stderr.strip()[-300:]}"]
    summary = json.loads((run / "summary.json").read_text())
    meta = json.loads((run / "meta.json").read_text()) if (run / "meta.json").is_file() else {}
    html = (run / "report.html").read_text() if (run / "report.html").is_file() else None
    return check(summary, meta, html)


def shared_runs(tmp: Path) -> list[Path]:
    out = []
    for base in sorted((SHARED / "gpu-runs").glob("*-20*")):
        for d in sorted(p for p in base.iterdir() if (p / "meta.json").is_file()):
            dst = tmp / d.name
            shutil.copytree(d, dst)
            for p in [dst, *dst.rglob("*")]:
                p.chmod(0o755 if p.is_dir() else 0o644)
            out.append(dst)
    for trace in sorted((SHARED / "peer-traces").rglob("*.json*")):
        dst = tmp / f"peer-{trace.parent.name}-{trace.name.split('.')[0]}"
        r = subprocess.run([*HAIPROF, "analyze", "--quiet", "--out", str(dst), str(trace)], capture_output=True,
                           text=True, timeout=600)
        if r.returncode == 0 and (dst / "summary.json").is_file():
            out.append(dst)
        else:   # reference numbers, execution traces: not profiler traces, and haiprof says so in one line
            print(f"{trace.name}: skipped: {r.stderr.strip()[-160:]}")
    return out


# example -> its short arguments, and haiprof's options (the distributed ones run as 2-rank jobs)
EXAMPLES = {
    "compute_bound.py": (["--steps", "12"], []),
    "launch_bound.py": (["--steps", "30"], []),
    "input_bound.py": (["--batches", "40"], []),
    "input_bound_decode.py": (["--batches", "16"], []),
    "input_bound_storage.py": (["--batches", "20"], []),
    "long_run_shapes.py": ([], []),
    "rl_tiny_matmuls.py": (["--episodes", "16"], []),
    "ddp_comm_bound.py": (["--steps", "12", "--layers", "2"], ["--nproc-per-node", "2"]),
    "fsdp_comm_bound.py": (["--steps", "12", "--layers", "2"], ["--nproc-per-node", "2"]),
}
LONG_LOOP = """import torch
model, opt = torch.nn.Linear(2, 1), None
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.ones(4, 2)
for _ in range({steps}):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


def made_runs(tmp: Path, examples: bool, job: int, long: int) -> list[Path]:
    """Runs made here: what a user's page looks like on the bundled examples (plain and fixed), a job, a long run."""
    out = []

    def run(name: str, argv: list[str]) -> None:
        dst = tmp / name
        r = subprocess.run([*HAIPROF, "run", "--quiet", "--out", str(dst), *argv], capture_output=True, text=True,
                           timeout=1800, cwd=tmp)
        if (dst / "meta.json").is_file():
            out.append(dst)
            # a job's rank pages too (`haiprof report JOB/rank-K`): what a user opens to look at one rank
            out.extend(d for d in sorted(dst.glob("rank-*")) if (d / "meta.json").is_file())
        else:
            print(f"{name}: no run: {r.stderr.strip()[-200:]}")
    if examples:
        for script, (script_args, opts) in EXAMPLES.items():
            # a job's fixes are named (--fix auto is refused for jobs): the fixed job's page, its ranks' before/after
            fixed = ["--fix", "compress,bucket" if "--nproc-per-node" in opts else "auto"]
            for fix in ([], fixed):
                run(f"example-{script[:-3]}{'-fixed' if fix else ''}",
                    [*opts, *fix, str(REPO / "examples" / script), *script_args])
    if long:
        loop = tmp / "long_loop.py"
        loop.write_text(LONG_LOOP.format(steps=long))
        run(f"long-{long}", ["--trace-steps", "0", str(loop)])
    if job:
        r = subprocess.run([sys.executable, "-m", "benchmarks.job_scale", "--ranks", str(job), "--keep",
                            str(tmp / "jobs"), "--no-reanalyse"], capture_output=True, text=True, cwd=REPO,
                           timeout=3600)
        found = [p.parent for p in (tmp / "jobs").rglob("meta.json") if p.parent.parent == tmp / "jobs"]
        out += found or []
        if not found:
            print(f"job of {job} ranks: not built: {r.stderr.strip()[-200:]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--examples", action="store_true", help="the bundled examples, plain and with --fix auto")
    ap.add_argument("--job", type=int, default=0, help="an N-rank job built from the recorded 2-rank one")
    ap.add_argument("--long", type=int, default=0, help="a tiny loop of N steps")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-audit-"))
    made = made_runs(tmp, args.examples, args.job, args.long)
    runs = [*args.runs, *made] if (args.runs or made) else shared_runs(tmp)
    total = 0
    for run in runs:
        found = audit(run)
        total += len(found)
        print(f"{run.name}: {'ok' if not found else f'{len(found)} violation(s)'}")
        for line in found:
            print(f"  - {line}")
    print(f"\n{len(runs)} run(s), {total} violation(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
