"""Read a PyTorch profiler (Kineto) trace into columns: `read_trace(path) -> TraceData`.

`TraceData.columns` holds numpy columns (no pandas needed); `TraceData.events` is the same as a pandas DataFrame,
built on first use. One row per duration ("X") or instant ("i") event:
    name, cat, ph         categorical strings (category names normalised: "Kernel" -> "kernel", see CAT_ALIASES)
    ts_us, dur_us         float64 microseconds (Chrome trace time is always µs; `displayTimeUnit` only tells a
                          viewer how to label it, `baseTimeNanoseconds` is the epoch offset, kept in metadata)
    pid, tid              int64 (a string id such as "Spans" becomes a negative id; `metadata["string_ids"]`)
    stream, correlation,  int64 from args; -1 when absent (what HTA uses to tell device events from host events)
    external_id, device, bytes
Flow, counter and metadata ("M") events are not rows: process/thread names go to `metadata["process_names"]` /
`["thread_names"]`, the counts of what was skipped to `metadata["skipped_events"]`.
"""
from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from pathlib import Path

from .json_stream import Stream, TraceFormatError
from .trace_columns import COLUMNS, ColumnBuilder, EventColumns, decode_batch, read_whole  # noqa: F401 (COLUMNS re-exported)

# Legacy (PyTorch <= 1.12) and vendor category names -> the names current Kineto writes.
CAT_ALIASES = {
    "Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
    "Operator": "cpu_op", "Driver": "cuda_driver", "gpu_user_annotation": "gpu_user_annotation",
    "User annotation": "user_annotation",
}


class TraceError(Exception):
    """Unusable input: the message is one line for the user."""


class NotAProfilerTrace(TraceError):
    """Valid data, but not a PyTorch profiler trace (memory timeline, execution trace, other JSON)."""


@dataclass
class TraceData:
    path: str
    columns: EventColumns            # numpy columns; `events` is the same as a pandas DataFrame (built on use)
    rank: int | None                 # distributedInfo.rank; None when the trace does not say
    truncated: bool = False
    truncation_reason: str = ""
    metadata: dict = field(default_factory=dict)   # every top-level key but traceEvents, plus what we derived
    ts_float: bool = False           # timestamps were written with a fraction (HTA rounds such traces)
    raw_bytes: int = 0

    _frame: object = field(default=None, repr=False)

    @property
    def events(self):
        """The rows as a pandas DataFrame (module docstring); built on first use, pandas imported then."""
        if self._frame is None:
            self._frame = self.columns.frame()
        return self._frame

    @property
    def device_type(self) -> str:
        return self.metadata.get("device_type", "unknown")


def _rank(meta: dict) -> int | None:
    info = meta.get("distributedInfo")
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
            return r
        if isinstance(r, str) and r.isdigit():
            return int(r)
    return None


def _device_type(meta: dict, cols: EventColumns) -> str:
    cats = set(cols.categories["cat"]) if len(cols) else set()
    if "mtia_ccp_events" in cats or "mtia_runtime" in cats:
        return "mtia"
    props = meta.get("deviceProperties")
    names = " ".join(str(p.get("name", "")) for p in props if isinstance(p, dict)) if isinstance(props, list) else ""
    if "AMD" in names or "Radeon" in names or "Instinct" in names or "roctracer" in str(meta.get("INFO", "")):
        return "rocm"
    if cats & {"kernel", "gpu_memcpy", "gpu_memset"}:
        return "cuda"
    return "cpu"


def _looks_like(meta: dict) -> str | None:
    """Name a known non-Kineto format from its top-level keys."""
    keys = set(meta)
    if {"nodes", "schema"} <= keys or "nodes" in keys:
        return "a PyTorch execution trace (ExecutionTraceObserver), not a PyTorch profiler trace"
    if "segments" in keys or "device_traces" in keys:
        return "a CUDA memory snapshot, not a PyTorch profiler trace"
    return None


def read_trace(path) -> TraceData:
    """Parse one trace file (.json or .json.gz, gzip detected by content). Raises TraceError with a one-line
    reason when nothing usable can be read; a trace cut short is returned with `truncated=True`."""
    p = Path(path)
    if p.is_dir():
        raise TraceError(f"{path}: is a directory (use find_traces)")
    try:
        size = os.path.getsize(p)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror or e})") from None
    if size == 0:
        raise TraceError(f"{path}: empty file")
    stream = Stream(p, parse=decode_batch)
    cols = ColumnBuilder()
    meta: dict = {}
    # Millions of short-lived event objects would trigger the cyclic collector over and over while nothing here
    # makes cycles: pause it during the read.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        whole = read_whole(p, size)
        if whole is not None:
            meta, events, stream.gzipped = whole
            stream.saw_events_key = True
            cols.add(events)
            del events
        else:
            for kind, payload in stream:
                if kind == "events":
                    cols.add(payload)
                    del payload
                else:
                    key, value = payload
                    meta[key] = value
    except TraceFormatError as e:
        if "JSON array" in str(e) or "not JSON" in str(e):
            raise NotAProfilerTrace(f"{path}: {e}") from None
        raise TraceError(f"{path}: {e}") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e})") from None
    finally:
        if gc_was_on:
            gc.enable()
    if not stream.saw_events_key:
        known = _looks_like(meta)
        if known:
            raise NotAProfilerTrace(f"{path}: {known}")
        if stream.truncated and not meta:
            raise TraceError(f"{path}: no trace could be read: {stream.truncated}")
        raise NotAProfilerTrace(f"{path}: no traceEvents: not a PyTorch profiler trace")
    if "traceEvents" in meta:   # the key was there but held no list of events
        raise NotAProfilerTrace(f"{path}: traceEvents is not a list of events: not a PyTorch profiler trace")
    if cols.n_rows == 0 and stream.truncated:
        raise TraceError(f"{path}: no complete event could be read: {stream.truncated}")
    return _trace_data(p, cols, meta, stream.truncated, stream.gzipped, size)


def _trace_data(p: Path, cols: ColumnBuilder, meta: dict, truncated: str, gzipped: bool, size: int) -> TraceData:
    events = cols.columns(lambda c: CAT_ALIASES.get(c, c))
    meta_out = dict(meta)
    meta_out.update(process_names=cols.process_names, thread_names=cols.thread_names,
                    skipped_events=cols.skipped, string_ids=cols.string_ids, gzipped=gzipped,
                    base_time_ns=meta.get("baseTimeNanoseconds"), display_time_unit=meta.get("displayTimeUnit"))
    meta_out["device_type"] = _device_type(meta, events)
    return TraceData(path=str(p), columns=events, rank=_rank(meta), truncated=bool(truncated),
                     truncation_reason=truncated, metadata=meta_out, ts_float=cols.ts_float, raw_bytes=size)


def trace_of_json(path, data, gzipped: bool, size: int) -> TraceData:
    """A whole trace already parsed as JSON (the object with traceEvents) as read_trace returns it: the same
    columns (trace_columns' dict path), for a caller that also reads the events themselves (one parse for both).
    Raises NotAProfilerTrace for JSON that is no profiler trace."""
    p = Path(path)
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise NotAProfilerTrace(f"{path}: no traceEvents: not a PyTorch profiler trace")
    cols = ColumnBuilder()
    cols.add(data["traceEvents"])
    meta = {k: v for k, v in data.items() if k != "traceEvents"}
    return _trace_data(p, cols, meta, "", gzipped, size)


TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


def find_traces(directory) -> list[Path]:
    """Candidate trace files in a directory (not recursive), execution traces (*_et.json*) excluded."""
    d = Path(directory)
    out = []
    for f in sorted(d.iterdir()):
        n = f.name
        if f.is_file() and (n.endswith(".json") or n.endswith(".json.gz")) and "_et.json" not in n:
            out.append(f)
    return out
