"""haiprof's trace analysis against Holistic Trace Analysis itself: load + temporal breakdown, time and peak RSS.

Both tools run as separate processes on the same file, one after the other, `--repeat` times; medians are
printed. HTA lives in its own virtual environment used only here (created on first use, torch pinned through
constraints.txt if HTA asks for it). HTA runs under an address-space cap (--hta-mem-gib) so that a trace it cannot
hold fails with MemoryError instead of pushing the machine into the OOM killer.

    python benchmarks/trace_analysis.py [--synthetic PATH ...] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEER = REPO / "tests" / "data" / "hta"
LARGEST_PEER = ["df_index_resolver/df_index_resolver.json.gz", "trace_diff/control/control.json.gz",
                "negative_queue_length_values_check/rank0.json.gz",
                "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                "nccl_parser_config/nccl_data.json.gz"]

HTA_CODE = """
import json, sys, time, logging
logging.disable(logging.WARNING)
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.get_temporal_breakdown(visualize=False)
r = df.iloc[0]
print(json.dumps({"seconds": time.perf_counter() - t, "idle_pct": float(r["idle_time_pctg"]),
                  "compute_pct": float(r["compute_time_pctg"]), "non_compute_pct": float(r["non_compute_time_pctg"])}))
"""
# Same shape as HTA_CODE: the timer starts before the imports and stops after the breakdown; the interpreter's
# own start-up is outside it for both (and inside `wall_s`, the parent's clock around the child, for both).
OURS_CODE = """
import json, sys, time
t = time.perf_counter()
from haiprof.analyzers.kineto_reader import read_trace
from haiprof.analyzers import trace_breakdown as B
td = read_trace(sys.argv[1])
r = B.temporal_breakdown(B.analyse_ranks({0: td})[0])
print(json.dumps({"seconds": time.perf_counter() - t, "idle_pct": r["idle_time_pct"],
                  "compute_pct": r["compute_time_pct"], "non_compute_pct": r["non_compute_time_pct"]}))
"""


def hta_python(venv: Path) -> Path:
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"),
                        "HolisticTraceAnalysis"], check=True)
    return py


def measure(cmd: list, mem_cap_gib: float | None) -> dict:
    """Run cmd; wall-clock of the tool's own timer, peak RSS of the child from wait4."""
    def cap():
        if mem_cap_gib:
            lim = int(mem_cap_gib * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=cap, text=True)
    out, err = p.communicate()
    wall = time.perf_counter() - t
    _, _, ru = os.wait4(p.pid, 0) if p.returncode is None else (0, 0, None)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 if ru is None else ru.ru_maxrss * 1024
    if p.returncode != 0:
        last = (err.strip().splitlines() or ["?"])[-1]
        return {"error": last[:160], "wall_s": wall}
    res = json.loads(out.strip().splitlines()[-1])
    res.update(wall_s=wall, peak_rss=rss)
    return res


def peak_rss_of(cmd: list, mem_cap_gib=None) -> dict:
    # RUSAGE_CHILDREN keeps the maximum over all children so far: run each measurement through /usr/bin/time
    # instead when available, so every number is this child's own.
    if Path("/usr/bin/time").exists():
        with tempfile.NamedTemporaryFile("r", suffix=".txt") as tf:
            res = measure(["/usr/bin/time", "-f", "%M", "-o", tf.name, *cmd], mem_cap_gib)
            try:
                res["peak_rss"] = int(Path(tf.name).read_text().strip().splitlines()[-1]) * 1024
            except (ValueError, IndexError):
                pass
            return res
    return measure(cmd, mem_cap_gib)


def bench(path: Path, hta_py: Path, repeat: int, cap: float) -> dict:
    raw = path.stat().st_size
    if path.suffix == ".gz":
        import gzip
        with gzip.open(path, "rb") as f:
            raw = sum(len(b) for b in iter(lambda: f.read(1 << 24), b""))
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / path.name).symlink_to(path.resolve())
        hta = [peak_rss_of([str(hta_py), "-c", HTA_CODE, d], cap) for _ in range(repeat)]
        ours = [peak_rss_of([sys.executable, "-c", OURS_CODE, str(path)]) for _ in range(repeat)]
    return {"trace": str(path.relative_to(REPO) if path.is_relative_to(REPO) else path.name),
            "raw_bytes": raw, "hta": hta, "ours": ours}


def summarize(r: dict) -> str:
    def med(runs, key):
        vals = [x[key] for x in runs if key in x]
        return statistics.median(vals) if vals else None
    hs, os_ = med(r["hta"], "seconds"), med(r["ours"], "seconds")
    hm, om = med(r["hta"], "peak_rss"), med(r["ours"], "peak_rss")
    raw = r["raw_bytes"]
    herr = next((x["error"] for x in r["hta"] if "error" in x), "")
    line = f"{r['trace']}: raw {raw / 2**20:.0f} MiB | ours {os_:.2f} s, peak RSS {om / 2**20:.0f} MiB " \
           f"({om / raw:.2f}x raw)"
    if hs:
        hw, ow = med(r["hta"], "wall_s"), med(r["ours"], "wall_s")
        line += f" | HTA {hs:.2f} s, peak RSS {hm / 2**20:.0f} MiB | time ratio ours/HTA {os_ / hs:.2f}" \
                f" (whole process incl. interpreter start: {ow:.2f} s / {hw:.2f} s = {ow / hw:.2f})"
        ho, oo = r["hta"][0], r["ours"][0]
        line += f" | idle/compute/non-compute HTA {ho['idle_pct']}/{ho['compute_pct']}/{ho['non_compute_pct']}" \
                f" ours {oo['idle_pct']}/{oo['compute_pct']}/{oo['non_compute_pct']}"
    else:
        line += f" | HTA failed: {herr}"
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", nargs="*", default=[], help="extra traces (make_synthetic_trace.py output)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-venv", default=str(REPO / ".hta-venv"))
    ap.add_argument("--hta-mem-gib", type=float, default=12.0)
    ap.add_argument("--json", help="write all measurements here")
    a = ap.parse_args()
    print(f"load average at start: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    hta_py = hta_python(Path(a.hta_venv))
    results = []
    for p in [PEER / x for x in LARGEST_PEER] + [Path(x) for x in a.synthetic]:
        r = bench(p, hta_py, a.repeat if p.is_relative_to(PEER) else 1, a.hta_mem_gib)
        results.append(r)
        print(summarize(r), flush=True)
    print(f"load average at end: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
