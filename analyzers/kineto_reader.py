"""Read a PyTorch profiler (Kineto) trace into columns: `read_trace(path) -> TraceData`.

`TraceData.events` is a pandas DataFrame, one row per duration ("X") or instant ("i") event:
    name, cat, ph         categorical strings (category names normalised: "Kernel" -> "kernel", see CAT_ALIASES)
    ts_us, dur_us         float64 microseconds (Chrome trace time is always µs; `displayTimeUnit` only tells a
                          viewer how to label it, `baseTimeNanoseconds` is the epoch offset, kept in metadata)
    pid, tid              int64 (a string id such as "Spans" becomes a negative id; `metadata["string_ids"]`)
    stream, correlation,  int64 from args; -1 when absent (what HTA uses to tell device events from host events)
    external_id, device
Flow, counter and metadata ("M") events are not rows: process/thread names go to `metadata["process_names"]` /
`["thread_names"]`, the counts of what was skipped to `metadata["skipped_events"]`.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .json_stream import Stream, TraceFormatError

# Legacy (PyTorch <= 1.12) and vendor category names -> the names current Kineto writes.
CAT_ALIASES = {
    "Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
    "Operator": "cpu_op", "Driver": "cuda_driver", "gpu_user_annotation": "gpu_user_annotation",
    "User annotation": "user_annotation",
}
ROW_PHASES = ("X", "i", "I")
INT_ARGS = (("stream", "stream"), ("correlation", "correlation"), ("external_id", "External id"),
            ("device", "device"))
COLUMNS = ("name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "stream", "correlation", "external_id", "device")


class TraceError(Exception):
    """Unusable input: the message is one line for the user."""


class NotAProfilerTrace(TraceError):
    """Valid data, but not a PyTorch profiler trace (memory timeline, execution trace, other JSON)."""


@dataclass
class TraceData:
    path: str
    events: pd.DataFrame
    rank: int | None                 # distributedInfo.rank; None when the trace does not say
    truncated: bool = False
    truncation_reason: str = ""
    metadata: dict = field(default_factory=dict)   # every top-level key but traceEvents, plus what we derived
    ts_float: bool = False           # timestamps were written with a fraction (HTA rounds such traces)
    raw_bytes: int = 0

    @property
    def device_type(self) -> str:
        return self.metadata.get("device_type", "unknown")


class _Interner:
    """Strings -> small int codes, built batch by batch (names repeat millions of times)."""

    def __init__(self):
        self.codes: dict = {}

    def encode(self, values: list) -> np.ndarray:
        table = self.codes
        try:
            out = [table.setdefault(v, len(table)) for v in values]
        except TypeError:  # unhashable (a list where a string belongs): fall back to its text
            out = [table.setdefault(v if isinstance(v, str) else ("" if v is None else str(v)), len(table))
                   for v in values]
        return np.fromiter(out, dtype=np.int32, count=len(out))

    def categorical(self, codes: np.ndarray, normalise=None) -> pd.Categorical:
        cats = [("" if k is None else k if isinstance(k, str) else str(k)) for k in self.codes]
        if normalise:
            cats = [normalise(c) for c in cats]
        uniq, inverse = np.unique(np.array(cats, dtype=object), return_inverse=True) if cats else ([], [])
        remap = np.asarray(inverse, dtype=np.int32)
        return pd.Categorical.from_codes(remap[codes] if len(codes) else codes, categories=list(uniq))


def _floats(values: list) -> tuple[np.ndarray, bool]:
    """float64 array (NaN for missing/non-numbers) and whether any value was written as a float."""
    try:
        arr = np.array(values, dtype=np.float64)
        any_float = any(v.__class__ is float for v in values) if arr.size else False
        return arr, any_float
    except (TypeError, ValueError, OverflowError):
        out, any_float = np.empty(len(values)), False
        for i, v in enumerate(values):
            if v.__class__ is float:
                any_float = True
            try:
                out[i] = float(v) if not isinstance(v, (bool, list, dict)) else math.nan
            except (TypeError, ValueError, OverflowError):
                out[i] = math.nan
        return out, any_float


def _ints(values: list, ids: dict | None = None) -> np.ndarray:
    """int64 array; -1 for missing; numeric strings parsed (HTA does too); other strings -> negative ids."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        out = np.full(len(values), -1, dtype=np.int64)
        for i, v in enumerate(values):
            if isinstance(v, bool) or v is None:
                continue
            try:
                out[i] = int(v)
            except (TypeError, ValueError, OverflowError):
                if ids is not None and isinstance(v, str):
                    out[i] = ids.setdefault(v, -2 - len(ids))
        return out


class _Columns:
    def __init__(self):
        self.names, self.cats, self.phs = _Interner(), _Interner(), _Interner()
        self.parts: dict = {c: [] for c in COLUMNS if c not in ("name", "cat", "ph")}
        self.code_parts: dict = {"name": [], "cat": [], "ph": []}
        self.string_ids: dict = {}
        self.ts_float = False
        self.skipped: dict = {}
        self.process_names: dict = {}
        self.thread_names: dict = {}
        self.n_rows = 0

    def add(self, batch: list) -> None:
        evs = [e for e in batch if e.__class__ is dict]
        if len(evs) != len(batch):
            self.skipped["not an object"] = self.skipped.get("not an object", 0) + len(batch) - len(evs)
        phs = [e.get("ph") for e in evs]
        keep = [p in ROW_PHASES for p in phs]
        if not all(keep):
            for e, p, k in zip(evs, phs, keep):
                if not k:
                    if p == "M":
                        self._metadata_event(e)
                    key = str(p)
                    self.skipped[key] = self.skipped.get(key, 0) + 1
            ts_all = [e.get("ts") for e in evs]
            self.ts_float |= any(v.__class__ is float for v in ts_all)
            evs = [e for e, k in zip(evs, keep) if k]
            phs = [p for p, k in zip(phs, keep) if k]
        if not evs:
            return
        ts, any_float = _floats([e.get("ts") for e in evs])
        self.ts_float |= any_float
        good = ~np.isnan(ts)
        if not good.all():  # an event without a time cannot be placed: count it, drop it
            self.skipped["no ts"] = self.skipped.get("no ts", 0) + int((~good).sum())
            idx = np.flatnonzero(good)
            evs = [evs[i] for i in idx]
            phs = [phs[i] for i in idx]
            ts = ts[good]
            if not evs:
                return
        self.parts["ts_us"].append(ts)
        self.parts["dur_us"].append(_floats([e.get("dur") for e in evs])[0])
        self.code_parts["ph"].append(self.phs.encode(phs))
        self.code_parts["name"].append(self.names.encode([e.get("name") for e in evs]))
        self.code_parts["cat"].append(self.cats.encode([e.get("cat") for e in evs]))
        self.parts["pid"].append(_ints([e.get("pid", -1) for e in evs], self.string_ids))
        self.parts["tid"].append(_ints([e.get("tid", -1) for e in evs], self.string_ids))
        args = [e.get("args") for e in evs]
        for col, key in INT_ARGS:
            self.parts[col].append(_ints([a.get(key, -1) if a.__class__ is dict else -1 for a in args]))
        self.n_rows += len(evs)

    def _metadata_event(self, e: dict) -> None:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if e.get("name") == "process_name":
            self.process_names[str(e.get("pid"))] = str(args.get("name"))
        elif e.get("name") == "thread_name":
            self.thread_names[f"{e.get('pid')}/{e.get('tid')}"] = str(args.get("name"))

    def frame(self) -> pd.DataFrame:
        def cat(parts, interner, normalise=None):
            codes = np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
            return interner.categorical(codes, normalise)

        data = {"name": cat(self.code_parts["name"], self.names),
                "cat": cat(self.code_parts["cat"], self.cats, lambda c: CAT_ALIASES.get(c, c)),
                "ph": cat(self.code_parts["ph"], self.phs)}
        for col, parts in self.parts.items():
            dtype = np.float64 if col in ("ts_us", "dur_us") else np.int64
            data[col] = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
            parts.clear()
        return pd.DataFrame(data, columns=list(COLUMNS))


def _rank(meta: dict) -> int | None:
    info = meta.get("distributedInfo")
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
            return r
        if isinstance(r, str) and r.isdigit():
            return int(r)
    return None


def _device_type(meta: dict, events: pd.DataFrame) -> str:
    cats = set(events["cat"].cat.categories) if len(events) else set()
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
    stream = Stream(p)
    cols = _Columns()
    meta: dict = {}
    try:
        for kind, payload in stream:
            if kind == "events":
                cols.add(payload)
            else:
                key, value = payload
                meta[key] = value
    except TraceFormatError as e:
        if "JSON array" in str(e) or "not JSON" in str(e):
            raise NotAProfilerTrace(f"{path}: {e}") from None
        raise TraceError(f"{path}: {e}") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e})") from None
    if not stream.saw_events_key:
        known = _looks_like(meta)
        if known:
            raise NotAProfilerTrace(f"{path}: {known}")
        if stream.truncated and not meta:
            raise TraceError(f"{path}: no trace could be read: {stream.truncated}")
        raise NotAProfilerTrace(f"{path}: no traceEvents: not a PyTorch profiler trace")
    if "traceEvents" in meta:   # the key was there but held no list of events
        raise NotAProfilerTrace(f"{path}: traceEvents is not a list of events: not a PyTorch profiler trace")
    events = cols.frame()
    if cols.n_rows == 0 and stream.truncated:
        raise TraceError(f"{path}: no complete event could be read: {stream.truncated}")
    meta_out = dict(meta)
    meta_out.update(process_names=cols.process_names, thread_names=cols.thread_names,
                    skipped_events=cols.skipped, string_ids=cols.string_ids, gzipped=stream.gzipped,
                    base_time_ns=meta.get("baseTimeNanoseconds"), display_time_unit=meta.get("displayTimeUnit"))
    meta_out["device_type"] = _device_type(meta, events)
    return TraceData(path=str(p), events=events, rank=_rank(meta), truncated=bool(stream.truncated),
                     truncation_reason=stream.truncated, metadata=meta_out, ts_float=cols.ts_float,
                     raw_bytes=size)


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
