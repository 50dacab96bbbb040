"""`haiprof analyze PATH`: analyse existing PyTorch profiler (Kineto) traces into a run directory.

PATH is one trace (.json / .json.gz) or a directory of per-rank traces. The run directory gets what `haiprof run`
writes (meta.json, phases.jsonl from the trace's annotations, summary.json, report.html) plus trace.json with the
per-rank device analysis; summary.json carries it under "trace". Wiring only: the numbers come from the analyzers.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

from ..errors import OneLineParser, UserError
from ..rundir import PHASES_BIN, PHASES_FILE, SAMPLES_DIR, STATUS_FILE, TRACE_FILE, RunDir, write_json_atomic
from ..rundir.vocabulary import KINETO_TRACES
from ..version import __version__


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="haiprof analyze", description="Analyse PyTorch profiler traces (a .json or "
                                ".json.gz file, or a directory of per-rank traces) and write a report.")
    p.add_argument("path", help="trace file or directory of per-rank trace files")
    p.add_argument("--out", metavar="DIR", help="run directory (default haiprof-runs/analyze-<name>-<timestamp>/)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--trace-only", action="store_true",
                   help="for a trace inside a `haiprof run` directory: judge the traced steps alone, without the "
                        "run's recorded steps")
    return p


def enclosing_run(path: Path) -> tuple[RunDir, dict] | None:
    """The `haiprof run` directory a trace file was written into (RUN/trace.json.gz), and its meta, when it
    recorded steps.

    Its tracing window is a few steps chosen early in the run; the run directory beside it holds every step's
    CUDA-event spans. Analysing both through the one engine `haiprof report` uses gives the run's verdict, with
    the window judged against the steady steps instead of standing in for them (a window that caught batches
    prefetched before it opened ran 10x faster than the rest of the run)."""
    if not path.is_file():
        return None
    run = RunDir(path.parent)
    try:
        meta = run.read_meta()
    except Exception:   # not a run directory (or an unreadable one): the trace stands alone
        return None
    if meta.get("source") == "trace" or not meta.get("haiprof_version") or not run.has_phases():
        return None
    return (run, meta) if any(r[0] == "@step" for r in run.read_phase_records()) else None


MACHINE_KEYS = ("host", "cpu_model", "cpu_count", "cpu_affinity", "gpus", "python", "torch", "start_monotonic_ns",
                "end_monotonic_ns")


def _machine_of(meta: dict) -> dict:
    """The run's machine facts its samples are read against (cores for the loader's CPU share, the time origin)."""
    return {k: meta[k] for k in MACHINE_KEYS if k in meta}


def _take_run_records(run: RunDir, trace: Path, out: RunDir) -> None:
    """The run's raw records (phases, samples, collector status) and its trace, as `haiprof report` reads them."""
    import shutil

    for name in (PHASES_FILE, PHASES_BIN, STATUS_FILE):
        if run.file(name).is_file():
            shutil.copyfile(run.file(name), out.file(name))
    if run.file(SAMPLES_DIR).is_dir():
        shutil.copytree(run.file(SAMPLES_DIR), out.file(SAMPLES_DIR), dirs_exist_ok=True)
    shutil.copyfile(trace, out.file(KINETO_TRACES[0] if trace.name.endswith(".gz") else KINETO_TRACES[1]))


def _name(path: Path) -> str:
    n = path.name
    for suffix in (".gz", ".json", ".pt.trace", ".trace"):
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    return n or "trace"


def load_traces(path: Path) -> tuple[dict, list[str]]:
    """{rank: TraceData} and notes about skipped files / assumed ranks. Raises UserError when nothing is usable."""
    from haiprof.analyzers.kineto_reader import TraceError, find_traces, read_trace

    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if path.is_dir():
        files = find_traces(path)
        if not files:
            raise UserError(f"{path}: no PyTorch profiler traces (*.json, *.json.gz) in this directory")
    else:
        files = [path]
    loaded, notes, errors = [], [], []
    for f in files:
        try:
            loaded.append(read_trace(f))
        except TraceError as e:
            if len(files) == 1:
                raise UserError(str(e)) from None
            errors.append(str(e))
    if not loaded:
        raise UserError(f"{path}: none of {len(files)} file(s) is a usable trace (first: {errors[0]})")
    notes += [f"skipped {e}" for e in errors]
    traces: dict = {}
    for td in sorted(loaded, key=lambda t: (t.rank is None, t.rank if t.rank is not None else 0, t.path)):
        rank = td.rank
        if rank is None or rank in traces:
            free = next(i for i in range(len(loaded) + len(traces) + 1) if i not in traces)
            notes.append(f"{td.path}: {'no rank in distributedInfo' if rank is None else f'duplicate rank {rank}'}"
                         f"; analysed as rank {free}")
            rank = free
        traces[rank] = td
    return traces, notes


def analyse(traces: dict) -> tuple[dict, list, dict]:
    """Per-rank analyses and the findings they support."""
    from haiprof.analyzers import thresholds as T
    from haiprof.analyzers import trace_breakdown as B
    from haiprof.analyzers import trace_ops, trace_phases
    from haiprof.analyzers.findings import Finding, edited

    devs = B.analyse_ranks(traces)
    ranks, findings = {}, []
    for rank, td in traces.items():
        dev = devs[rank]
        temporal = B.temporal_breakdown(dev)
        idle = B.device_idle_breakdown(dev, T.TRACE_KERNEL_WAIT_US)
        launch = trace_ops.launch_stats(td, dev, T.TRACE_SHORT_KERNEL_US)
        host = trace_ops.host_op_stats(td)
        ranks[rank] = {"file": td.path, "device_type": td.device_type, "truncated": td.truncated,
                       "truncation_reason": td.truncation_reason, "events": int(len(td.events)),
                       "device_events": int(len(dev)), "temporal_breakdown": temporal, "idle_breakdown_us": idle,
                       "idle_breakdown_per_stream_us": B.idle_breakdown(dev, T.TRACE_KERNEL_WAIT_US),
                       "comm_comp_overlap_pct": B.comm_comp_overlap_pct(dev), "launch_stats": launch,
                       "host_ops": host, "kernel_types": B.kernel_type_breakdown([dev])}
        if temporal is None:
            findings.append(trace_phases.no_device_finding(rank, host))
            # No device: the host's own launch analysis, the one `haiprof run` applies to its tracing window.
            from haiprof.analyzers import launch as launch_analysis
            cpu = launch_analysis.analyze_events(launch_analysis.complete_events(td.events))
            findings += [edited(f, message=f"rank {rank}: {f['message']}") for f in cpu.get("findings", [])]
        else:
            f = trace_phases.launch_finding(rank, temporal, idle, launch)
            if f:
                findings.append(f)
        if td.truncated:
            findings.append(Finding(kind="truncated", severity="info",
                                    message=f"rank {rank}: trace truncated ({td.truncation_reason}); the "
                                            f"readable part ({len(td.events)} events) was analysed",
                                    evidence={"file": td.path, "reason": td.truncation_reason}).as_dict())
    # one launch finding (the worst rank) is enough for the verdict; the others stay visible per rank
    launch = sorted((f for f in findings if f["kind"] == "launch"), key=lambda f: -f["share"])
    findings = [f for f in findings if f["kind"] != "launch"] + launch[:1]
    result = {"ranks": {str(r): v for r, v in ranks.items()},
              "kernel_type_breakdown": B.kernel_type_breakdown(list(devs.values())),
              "device_present": any(len(d) for d in devs.values())}
    return result, findings, devs


def cmd_analyze(argv: list[str]) -> int:
    parser = _parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    from ..analysis.summary import analyze
    from ..render import console, html

    path = Path(ns.path)
    t0 = time.perf_counter()
    gc_was = gc.isenabled()
    gc.disable()   # millions of short-lived dicts while parsing: the cyclic GC only costs time here
    try:
        traces, notes = load_traces(path)
        result, findings, devs = analyse(traces)
    finally:
        if gc_was:
            gc.enable()
    from haiprof.analyzers import trace_phases
    first = min(traces)
    records, phase_info = trace_phases.phase_records(traces[first], devs[first])
    out = Path(ns.out) if ns.out else _default_out(_name(path))
    run_dir = RunDir.create(out)
    cmd = " ".join(["haiprof", "analyze", *argv])
    run, run_meta = (None if ns.trace_only else enclosing_run(path)) or (None, {})
    if run is not None:
        notes.append(f"the trace was recorded by `haiprof run` in {run.path}: its steps (CUDA-event spans, samples) "
                     f"are analysed with the trace, as `haiprof report` does; --trace-only judges the traced steps "
                     f"alone")
    run_dir.write_meta({
        "haiprof_version": __version__, "haiprof_argv": list(argv), "command": cmd, "source": "trace",
        "target_name": f"analyze {path.name}", "how": "analyzed existing profiler trace(s)",
        "traces": [{"rank": r, "file": td.path, "bytes": td.raw_bytes, "truncated": td.truncated,
                    "device_type": td.device_type, "distributed_info": td.metadata.get("distributedInfo")}
                   for r, td in traces.items()],
        "phases_from_rank": first, "notes": notes, "start_time": time.time(), "exit_code": 0,
        "steps_from_run": str(run.path) if run is not None else None,
        **_machine_of(run_meta),
    })
    if run is not None:
        _take_run_records(run, path, run_dir)
    else:
        with open(run_dir.file(PHASES_FILE), "w", encoding="utf-8") as f:
            for rec in records:
                f.write(f'["{rec[0]}",{rec[1]},{rec[2]}]\n')
    result.update(phases_from_rank=first, phase_detection=phase_info, notes=notes,
                  analysis_seconds=round(time.perf_counter() - t0, 3))
    result["findings"] = findings
    write_json_atomic(run_dir.file(TRACE_FILE), result)
    data = analyze(run_dir)   # picks trace.json up: `haiprof report` on this directory gives the same result
    run_dir.write_summary(data.summary)
    report = html.write(data, run_dir.file("report.html"))
    if not ns.quiet:
        for line in console.verdict_lines(data.summary, report):
            print(line, file=sys.stderr)
        for note in notes:
            print(f"haiprof: note: {note}", file=sys.stderr)
    return 0


def _default_out(name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("haiprof-runs") / f"analyze-{name}-{stamp}"
    p, n = base, 1
    while p.exists():
        n += 1
        p = base.with_name(f"{base.name}-{n}")
    return p
