"""Predicted vs measured gain of every recorded fix pair: each fix's what-if (analyzers/whatif.py) computed from the
base run alone, beside what the fixed run of the same script measured on the script's own clock (truth.json).

    python benchmarks/prediction_error.py [--runs DIR] [--write docs/predictions.md]

For each fixed run in the recordings (its fixes.json names the base run and the fixes that acted), the base run is
copied and re-analysed with this haiprof (`haiprof report`), the applied fixes' combined prediction is applied to
the base's own-clock step, and the error is |predicted - measured| step after, in points of the base step. The
median error is printed last. Fixes the base recommends that no recorded run could apply are listed with their
prediction and the bound it must respect (what the fix touches).
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from haiprof.analyzers import whatif  # noqa: E402

DEFAULT_RUNS = REPO.parent / "shared" / "gpu-runs"
LIMIT_POINTS = 15.0   # the error the predictions are held to (issue: within 15 points of the base step)


def own_ms(truth: dict, name: str) -> float | None:
    """The script's own clock on its steady steps: step_ms_steady where the clock started inside the tracing
    window, else step_ms."""
    t = truth.get(name) or {}
    return t.get("step_ms_steady") or t.get("step_ms")


def reanalysed(run: Path, tmp: Path) -> dict:
    d = tmp / run.name
    if not d.exists():
        shutil.copytree(run, d)
        for p in [d, *d.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        r = subprocess.run([sys.executable, "-m", "haiprof", "report", "--quiet", str(d)], capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"prediction_error: haiprof report {run.name} failed: {r.stderr[-500:]}")
    return json.loads((d / "summary.json").read_text())


def pairs(root: Path) -> list[dict]:
    """[{base, fixed, applied}] from each recorded fixed run's fixes.json."""
    out = []
    for rec in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("h100")):
        for run in sorted(p for p in rec.iterdir() if (p / "fixes.json").is_file()):
            fx = json.loads((run / "fixes.json").read_text())
            applied = [r["id"] for r in fx.get("results") or [] if r.get("status") == "applied"]
            base = Path(fx.get("baseline_run") or "").name
            if applied and (rec / base).is_dir():
                out.append({"base": rec / base, "fixed": run, "applied": applied})
    return out


def rows(root: Path, tmp: Path, report=None) -> tuple[list[dict], list[dict]]:
    """report(run) -> the summary of `haiprof report` on a copy of that run (default: made here, in tmp)."""
    report = report or (lambda run: reanalysed(run, tmp))
    truth = json.loads((root / "truth.json").read_text())
    measured, unmeasured, bases = [], [], {}
    for p in pairs(root):
        if p["base"].name not in bases:
            bases[p["base"].name] = report(p["base"])
        s = bases[p["base"].name]
        before, after = own_ms(truth, p["base"].name), own_ms(truth, p["fixed"].name)
        comb = whatif.combined(whatif.predict_all(s, p["applied"]), p["applied"])
        if not comb or not before or not after:
            continue
        pred = before * (1 - comb["gain_share"])
        lo, hi = before * (1 - comb["high_share"]), before * (1 - comb["low_share"])
        measured.append({"base": p["base"].name, "fixed": p["fixed"].name, "fixes": ",".join(p["applied"]),
                         "before": before, "pred": pred, "lo": lo, "hi": hi, "after": after,
                         "error": 100 * abs(pred - after) / before, "in_range": lo - 1e-9 <= after <= hi + 1e-9,
                         "assumed": comb["assumed"]})
    tried = {(r["base"], f) for r in measured for f in r["fixes"].split(",")}
    for name, s in bases.items():
        for fix, p in (s.get("predictions") or {}).items():
            if (name, fix) not in tried and p["gain_share"] > 0 and fix in (s["next_steps"] or [{}])[0].get("fix", ""):
                unmeasured.append({"base": name, "fix": fix, "gain": p["gain_share"], "bound": p["touches_share"],
                                   "touches": p["touches"]})
    return measured, unmeasured


def markdown(measured: list[dict], unmeasured: list[dict]) -> str:
    lines = ["| base | fixed run | fixes | base step (own clock) | predicted step after (range) | measured step after "
             "| error, points of the base step | measured inside the range |", "|---|---|---|---|---|---|---|---|"]
    for r in measured:
        lines.append(f"| {r['base']} | {r['fixed']} | {r['fixes']} | {r['before']:.1f} ms | {r['pred']:.1f} ms "
                     f"({r['lo']:.1f}-{r['hi']:.1f}) | {r['after']:.2f} ms | {r['error']:.1f}"
                     f"{' (over ' + str(int(LIMIT_POINTS)) + ')' if r['error'] > LIMIT_POINTS else ''} | "
                     f"{'yes' if r['in_range'] else 'no'} |")
    med = statistics.median(r["error"] for r in measured) if measured else None
    out = "\n".join(lines) + (f"\n\nMedian error: {med:.1f} points of the base step over {len(measured)} pairs.\n"
                              if med is not None else "\n")
    if unmeasured:
        out += ("\nRecommended first, with no recorded run that applied it (the prediction stays within what the fix "
                "touches):\n\n| base | fix | predicted gain | what it touches |\n|---|---|---|---|\n")
        out += "".join(f"| {u['base']} | {u['fix']} | {100 * u['gain']:.0f}% of the step | {u['touches']}: "
                       f"{100 * u['bound']:.0f}% of the step |\n" for u in unmeasured)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="the recordings (truth.json and h100-*/ runs)")
    ap.add_argument("--write", type=Path, help="replace the table between the markers in this markdown file")
    args = ap.parse_args()
    if not (args.runs / "truth.json").is_file():
        print(f"prediction_error: no recordings at {args.runs} (truth.json missing)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        measured, unmeasured = rows(args.runs, Path(tmp))
    table = markdown(measured, unmeasured)
    for r in measured:
        print(f"{r['base']} -> {r['fixed']} ({r['fixes']}): predicted {r['pred']:.1f} ms, measured {r['after']:.2f} ms,"
              f" error {r['error']:.1f} points")
    print("\n" + table)
    if args.write:
        text = args.write.read_text()
        start, end = "<!-- predictions table: start -->\n", "<!-- predictions table: end -->"
        a, b = text.index(start) + len(start), text.index(end)
        args.write.write_text(text[:a] + table + text[b:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
