"""Print every page-invariant violation (analyzers/page_invariants.py) of run directories: the shared recordings
(re-reported on a copy), the peer traces (analysed), and any run directories named.

    python benchmarks/page_audit.py                      # the shared H100 recordings and the peer traces
    python benchmarks/page_audit.py RUN_DIR [RUN_DIR...]  # run directories as they are (report re-written)

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-audit-"))
    runs = args.runs or shared_runs(tmp)
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
