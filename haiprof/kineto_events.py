"""A minimal Kineto (torch.profiler Chrome-trace) loader: complete events ("X") as a DataFrame.

Columns: name, cat, ph, ts_us, dur_us, pid, tid, plus correlation and stream (from args; -1 when absent), the two
fields GPU launch analysis joins on; the trace's top-level metadata is in `attrs["metadata"]`. This is deliberately small and loads the whole file; `haiprof analyze` has
the streaming reader, whose events frame has the same columns, and can replace `load_events` one for one.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

COLUMNS = ("name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "correlation", "stream")


class TraceError(Exception):
    """The file is not a readable PyTorch profiler trace; the message is one line for the user."""


def _int_arg(args: dict, key: str) -> int:
    v = args.get(key, -1)
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def load_events(path) -> pd.DataFrame:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            doc = json.load(f)
    except (OSError, EOFError, ValueError) as e:
        raise TraceError(f"{path.name}: not a readable trace ({type(e).__name__}: {e})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        raise TraceError(f"{path.name}: not a PyTorch profiler trace (no traceEvents)")
    rows = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        rows.append((str(e.get("name", "")), str(e.get("cat", "")), "X", ts, dur, e.get("pid"), e.get("tid"),
                     _int_arg(args, "correlation"), _int_arg(args, "stream")))
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df.attrs["metadata"] = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
    return df
