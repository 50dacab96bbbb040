"""Trace events -> numpy columns, batch by batch, without pandas (the DataFrame is built only when asked for).

Batches come in two shapes. The fast one: `decode_batch` parses a batch of JSON event text straight into small
fixed-field records (msgspec Structs holding only the fields we read; every other key of an event is skipped
while parsing, no dict is built). An event that does not fit the record (an `args` that is not an object, an
array element that is not an object) makes the whole batch fall back to plain dicts (orjson): same
columns, slower. Both shapes feed the same column code, so the results are identical.
"""
from __future__ import annotations

import math
import zlib
from collections import Counter
from typing import Any

import msgspec
import numpy as np
import orjson

ROW_PHASES = ("X", "i", "I")
INT_ARGS = (("stream", "stream"), ("correlation", "correlation"), ("external_id", "External id"),
            ("device", "device"), ("bytes", "bytes"))
COLUMNS = ("name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "stream", "correlation", "external_id", "device",
           "bytes")
CODED = ("name", "cat", "ph")


class _Args(msgspec.Struct, gc=False):
    stream: Any = -1
    correlation: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")
    device: Any = -1
    bytes: Any = -1             # a copy's size (gpu_memcpy)
    name: Any = None            # process_name / thread_name metadata events


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    name: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = -1
    tid: Any = -1
    args: _Args | None = None


_NO_ARGS = _Args()
_typed = msgspec.json.Decoder(list[_Event]).decode


WHOLE_FILE_MAX_BYTES = 256 << 20   # a trace up to this size (uncompressed) is parsed in one piece, not streamed
_GZIP_MAGIC = b"\x1f\x8b"


def read_whole(path, size: int):
    """The common case at full speed: a complete, well-formed trace small enough to hold as bytes, parsed in one
    call. Returns (metadata dict, event records, gzipped) or None for anything else (too big, truncated, not an
    object, events that do not fit the record...), which the streaming reader then handles and explains."""
    if size > WHOLE_FILE_MAX_BYTES:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
        gzipped = data[:2] == _GZIP_MAGIC
        if gzipped:
            if size * 4 > WHOLE_FILE_MAX_BYTES:   # may inflate past the limit: stream it
                return None
            import gzip
            data = gzip.decompress(data)
            if len(data) > WHOLE_FILE_MAX_BYTES:
                return None
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        raw_events = top.pop("traceEvents", None)
        if raw_events is None:
            return None
        events = _typed(raw_events)
        meta = {k: msgspec.json.decode(v) for k, v in top.items()}
    except (OSError, EOFError, ValueError, RecursionError, zlib.error):   # gzip, msgspec errors are among these
        return None
    return meta, events, gzipped


def decode_batch(text):
    """Parse a JSON array of events. Raises ValueError when the text is not valid JSON."""
    try:
        return _typed(text)
    except msgspec.ValidationError:   # valid JSON that does not fit the record: plain dicts
        return orjson.loads(text)


class Interner:
    """Strings -> small int codes, built batch by batch (names repeat millions of times)."""

    def __init__(self):
        self.codes: dict = {}

    def encode(self, values: list) -> np.ndarray:
        table = self.codes
        try:
            for v in dict.fromkeys(values):      # the batch's distinct values, at C speed
                if v not in table:
                    table[v] = len(table)
            return np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))
        except TypeError:  # unhashable (a list where a string belongs): fall back to its text
            out = [table.setdefault(v if isinstance(v, str) else ("" if v is None else str(v)), len(table))
                   for v in values]
        return np.fromiter(out, dtype=np.int32, count=len(out))

    def sorted_codes(self, codes: np.ndarray, normalise=None) -> tuple[np.ndarray, list]:
        """(codes into the sorted unique category list, that list): pandas' Categorical layout."""
        cats = [("" if k is None else k if isinstance(k, str) else str(k)) for k in self.codes]
        if normalise:
            cats = [normalise(c) for c in cats]
        if not cats:
            return codes, []
        uniq, inverse = np.unique(np.array(cats, dtype=object), return_inverse=True)
        remap = np.asarray(inverse, dtype=np.int32).reshape(-1)
        return (remap[codes] if len(codes) else codes), list(uniq)


def floats(values: list) -> tuple[np.ndarray, bool]:
    """float64 array (NaN for missing/non-numbers) and whether any value was written as a float."""
    try:
        arr = np.array(values, dtype=np.float64)
        any_float = float in set(map(type, values))
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


def ints(values: list, ids: dict | None = None) -> np.ndarray:
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


class EventColumns:
    """The row events of a trace as numpy arrays; name/cat/ph as codes into sorted category lists."""

    def __init__(self, arrays: dict, categories: dict):
        self.arrays = arrays            # column -> ndarray (codes for CODED columns)
        self.categories = categories    # CODED column -> list of str

    def __len__(self) -> int:
        return len(self.arrays["ts_us"])

    def codes_of(self, col: str, values) -> np.ndarray:
        """Codes of the given category values that occur (for np.isin on the code column)."""
        want = set(values)
        return np.array([i for i, c in enumerate(self.categories[col]) if c in want], dtype=np.int32)

    def frame(self):
        import pandas as pd   # only callers that want a DataFrame pay for pandas
        data = {}
        for col in COLUMNS:
            a = self.arrays[col]
            data[col] = pd.Categorical.from_codes(a, categories=self.categories[col]) if col in CODED else a
        return pd.DataFrame(data, columns=list(COLUMNS))


class ColumnBuilder:
    def __init__(self):
        self.interners = {c: Interner() for c in CODED}
        self.parts: dict = {c: [] for c in COLUMNS}
        self.string_ids: dict = {}
        self.ts_float = False
        self.skipped: dict = {}
        self.process_names: dict = {}
        self.thread_names: dict = {}
        self.n_rows = 0

    def _skip(self, why: str, n: int = 1) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + n

    def _skip_phases(self, phases) -> None:
        for p, n in Counter(map(str, phases)).items():
            self._skip(p, n)

    def add(self, batch: list) -> None:
        if batch and batch[0].__class__ is _Event:
            self._add_records(batch)
        else:
            self._add_dicts(batch)

    def _add_records(self, evs: list) -> None:
        phs = [e.ph for e in evs]
        keep = [p in ROW_PHASES for p in phs]
        if not all(keep):
            for e, p, k in zip(evs, phs, keep):
                if p == "M" and not k:
                    a = e.args or _NO_ARGS
                    self._metadata_event(e.name, e.pid, e.tid, a.name)
            self._skip_phases(p for p, k in zip(phs, keep) if not k)
            self.ts_float |= float in set(map(type, [e.ts for e in evs]))
            evs = [e for e, k in zip(evs, keep) if k]
            phs = [p for p, k in zip(phs, keep) if k]
        ts, evs, phs = self._times([e.ts for e in evs], evs, phs)
        if not evs:
            return
        args = [e.args or _NO_ARGS for e in evs]
        self._append(ts, [e.dur for e in evs], phs, [e.name for e in evs], [e.cat for e in evs],
                     [e.pid for e in evs], [e.tid for e in evs],
                     {"stream": [a.stream for a in args], "correlation": [a.correlation for a in args],
                      "external_id": [a.external_id for a in args], "device": [a.device for a in args],
                      "bytes": [a.bytes for a in args]})

    def _add_dicts(self, batch: list) -> None:
        evs = [e for e in batch if e.__class__ is dict]
        if len(evs) != len(batch):
            self._skip("not an object", len(batch) - len(evs))
        phs = [e.get("ph") for e in evs]
        keep = [p in ROW_PHASES for p in phs]
        if not all(keep):
            for e, p, k in zip(evs, phs, keep):
                if p == "M" and not k:
                    a = e.get("args") if isinstance(e.get("args"), dict) else {}
                    self._metadata_event(e.get("name"), e.get("pid"), e.get("tid"), a.get("name"))
            self._skip_phases(p for p, k in zip(phs, keep) if not k)
            self.ts_float |= float in set(map(type, [e.get("ts") for e in evs]))
            evs = [e for e, k in zip(evs, keep) if k]
            phs = [p for p, k in zip(phs, keep) if k]
        ts, evs, phs = self._times([e.get("ts") for e in evs], evs, phs)
        if not evs:
            return
        args = [e.get("args") for e in evs]
        arg_cols = {col: [a.get(key, -1) if a.__class__ is dict else -1 for a in args] for col, key in INT_ARGS}
        self._append(ts, [e.get("dur") for e in evs], phs, [e.get("name") for e in evs],
                     [e.get("cat") for e in evs], [e.get("pid", -1) for e in evs],
                     [e.get("tid", -1) for e in evs], arg_cols)

    def _times(self, ts_values: list, evs: list, phs: list):
        if not evs:
            return None, evs, phs
        ts, any_float = floats(ts_values)
        self.ts_float |= any_float
        good = ~np.isnan(ts)
        if not good.all():  # an event without a time cannot be placed: count it, drop it
            self._skip("no ts", int((~good).sum()))
            idx = np.flatnonzero(good)
            evs = [evs[i] for i in idx]
            phs = [phs[i] for i in idx]
            ts = ts[good]
        return ts, evs, phs

    def _append(self, ts, dur, phs, names, cats, pids, tids, arg_cols: dict) -> None:
        p = self.parts
        p["ts_us"].append(ts)
        p["dur_us"].append(floats(dur)[0])
        p["ph"].append(self.interners["ph"].encode(phs))
        p["name"].append(self.interners["name"].encode(names))
        p["cat"].append(self.interners["cat"].encode(cats))
        p["pid"].append(ints(pids, self.string_ids))
        p["tid"].append(ints(tids, self.string_ids))
        for col, values in arg_cols.items():
            p[col].append(ints(values))
        self.n_rows += len(ts)

    def _metadata_event(self, name, pid, tid, arg_name) -> None:
        if name == "process_name":
            self.process_names[str(pid)] = str(arg_name)
        elif name == "thread_name":
            self.thread_names[f"{pid}/{tid}"] = str(arg_name)

    def columns(self, normalise_cat=None) -> EventColumns:
        arrays, categories = {}, {}
        for col in COLUMNS:
            parts = self.parts[col]
            if col in CODED:
                codes = np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
                arrays[col], categories[col] = self.interners[col].sorted_codes(
                    codes, normalise_cat if col == "cat" else None)
            else:
                dtype = np.float64 if col in ("ts_us", "dur_us") else np.int64
                arrays[col] = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
            parts.clear()
        return EventColumns(arrays, categories)
