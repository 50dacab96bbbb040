"""The verdict table of docs/verdicts.md: for every recorded run and trace (the shared H100 recordings, the public
peer traces) and, with --examples, every bundled CPU example, the verdict, its severity, the first action of "Do
this next" and the time each bound class could give back (removable ms/step: its share x what its own fix can
remove, thresholds.REMOVABLE). The verdict is the class with the most; its fix is the first action.

    python benchmarks/verdict_table.py                  # recorded rows: the same on every machine
    python benchmarks/verdict_table.py --examples       # plus the CPU examples, run here (numbers vary)
    python benchmarks/verdict_table.py --write docs/verdicts.md --examples

tests/test_verdict_table.py regenerates the recorded rows and compares them with docs/verdicts.md.
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
GPU_RUNS = SHARED / "gpu-runs" / "h100-2026-11-22"
PEER = SHARED / "peer-traces" / "hta"
# Kineto traces of real training recorded by another project (HTA's test data): DDP ResNet on A100s.
PEER_TRACES = ["nccl_parser_config/nccl_data.json.gz"]
# every bundled example, with the haiprof options it needs (ddp_comm_bound.py, fsdp_comm_bound.py: 2 gloo ranks on
# this machine's plain loopback; on a shaped 1 Gbit/s link both are communication-bound)
EXAMPLES = [("input_bound.py", []), ("input_bound_storage.py", []), ("input_bound_decode.py", []),
            ("compute_bound.py", []), ("launch_bound.py", []), ("ddp_comm_bound.py", ["--nproc-per-node", "2"]),
            ("fsdp_comm_bound.py", ["--nproc-per-node", "2"]), ("long_run_shapes.py", [])]
KINDS = ("io", "compute", "launch", "communication")
HAIPROF = [sys.executable, "-m", "haiprof"]


def _removable_ms(summary: dict) -> dict:
    from haiprof.analyzers import thresholds as T
    step = (summary.get("step_time_s") or {}).get("steady") or (summary.get("step_time_s") or {}).get("median")
    dev = summary.get("device") or {}
    bound = dev.get("bound")
    if not bound:
        ps = summary.get("phase_share") or {}
        launch = next((f.get("share", 0.0) for f in summary.get("findings", []) if f["kind"] == "launch"), 0.0)
        bound = {"io": ps.get("dataloader", 0) + ps.get("h2d", 0), "communication": ps.get("allreduce", 0),
                 "compute": ps.get("forward", 0) + ps.get("backward", 0) + ps.get("optimizer", 0),
                 "launch": launch}
    factor = dict(T.REMOVABLE)
    if not dev.get("bound"):   # a CPU run: compute on the host timeline
        factor["compute"] = T.REMOVABLE_CPU_COMPUTE
    return {k: (bound.get(k, 0.0) * factor[k] * step * 1e3 if step else None) for k in KINDS}


def row(name: str, source: str, summary: dict) -> dict:
    first = (summary.get("next_steps") or [{}])[0]
    verdict = next((f for f in summary.get("findings", []) if f["kind"] == summary["bottleneck"]), {})
    step = (summary.get("step_time_s") or {}).get("steady")
    return {"name": name, "source": source, "verdict": summary["bottleneck"],
            "severity": verdict.get("severity", "-") if summary["bottleneck"] != "none" else "-",
            "first_action": first.get("fix") or "-", "first_action_kind": first.get("kind") or "-",
            # the finding no longer offers them: they sit in its evidence, with the reason
            "left_out": ", ".join((verdict.get("evidence") or {}).get("fixes_left_out") or {}) or "-",
            "step_ms": round(step * 1e3, 2) if step else None,
            "removable_ms": {k: (round(v, 1) if v is not None else None) for k, v in _removable_ms(summary).items()}}


def _report(run: Path, tmp: Path) -> dict:
    d = tmp / run.name
    shutil.copytree(run, d)
    subprocess.run([*HAIPROF, "report", "--quiet", str(d)], check=True, timeout=600)
    return json.loads((d / "summary.json").read_text())


def _analyze(trace: Path, tmp: Path) -> dict:
    out = tmp / (trace.parent.name + "-analysis")
    subprocess.run([*HAIPROF, "analyze", "--quiet", "--out", str(out), str(trace)], check=True, timeout=600)
    return json.loads((out / "summary.json").read_text())


def _run_example(name: str, options: list, tmp: Path) -> dict:
    out = tmp / ("ex-" + name)
    subprocess.run([*HAIPROF, "run", "--quiet", *options, "--out", str(out), str(REPO / "examples" / name)],
                   check=True, timeout=600, stdout=subprocess.DEVNULL)
    return json.loads((out / "summary.json").read_text())


def recorded_rows(tmp: Path, report=None) -> list[dict]:
    """report(run) -> the summary of `haiprof report` on a copy of that recording (default: made here, in tmp)."""
    report = report or (lambda run: _report(run, tmp))
    rows = []
    if GPU_RUNS.is_dir():
        for run in sorted(p for p in GPU_RUNS.iterdir() if p.is_dir()):
            rows.append(row(run.name, "H100 recording", report(run)))
    for rel in PEER_TRACES:
        if (PEER / rel).is_file():
            rows.append(row(rel, "peer trace (HTA tests, DDP ResNet, A100)", _analyze(PEER / rel, tmp)))
    return rows


def example_rows(tmp: Path) -> list[dict]:
    return [row(name + (" " + " ".join(options) if options else ""), "CPU example, this machine",
                _run_example(name, options, tmp)) for name, options in EXAMPLES if (REPO / "examples" / name).is_file()]


def markdown(rows: list[dict]) -> str:
    head = ("| run | source | verdict | severity | first action | step ms | removable ms/step: io | compute | "
            "launch | communication | verdict's fixes left out |\n|---|---|---|---|---|---|---|---|---|---|---|\n")

    def cell(v):
        return "-" if v is None else f"{v}"
    return head + "".join(
        f"| {r['name']} | {r['source']} | {r['verdict']} | {r['severity']} | {r['first_action']} "
        f"({r['first_action_kind']}) | {cell(r['step_ms'])} | "
        + " | ".join(cell(r["removable_ms"][k]) for k in KINDS) + f" | {r['left_out']} |\n" for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", action="store_true", help="also run the bundled CPU examples (minutes)")
    ap.add_argument("--write", help="replace the table between the markers in this markdown file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = recorded_rows(Path(tmp))
        table = markdown(rows)
        ex = markdown(example_rows(Path(tmp))) if args.examples else None
    if not args.write:
        print(table + ("\n" + ex if ex else ""))
        return 0
    doc = Path(args.write)
    text = doc.read_text()
    text = replace_between(text, "recorded", table)
    if ex:
        text = replace_between(text, "examples", ex)
    doc.write_text(text)
    return 0


def replace_between(text: str, name: str, table: str) -> str:
    start, end = f"<!-- {name} table: start -->\n", f"<!-- {name} table: end -->"
    a, b = text.index(start) + len(start), text.index(end)
    return text[:a] + table + text[b:]


if __name__ == "__main__":
    sys.exit(main())
