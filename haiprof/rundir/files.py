"""The JSON files of a run directory, read and written, and the checks of what was read: a file may be
hand-edited, foreign, or cut short by a killed run, and the analyses must get only what they can use."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable


def write_json_atomic(path: Path, obj: Any) -> None:
    # Write-then-rename so a reader (or a crash) never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=True, default=str)
            f.write("\n")
        os.replace(tmp, path)
    finally:   # a full disk: the old file stays whole, and no half-written .tmp is left beside it
        try:
            os.unlink(tmp)
        except OSError:
            pass


# meta.json fields the analyses read, with the types the writer gives them; a field of another type (a hand-edited
# or foreign file) is dropped with a warning rather than crash an analyzer.
_NUM = (int, float)
META_TYPES = {
    "exit_code": (int, type(None)), "pid": int, "cpu_count": (int, type(None)), "cpu_affinity": (int, type(None)),
    "start_time": _NUM, "end_time": (*_NUM, type(None)), "start_monotonic_ns": int, "end_monotonic_ns": int,
    "command": (str, type(None)), "script": (str, type(None)), "module": (str, type(None)), "cwd": str,
    "target_name": str, "host": str, "how": (str, type(None)), "error": (str, type(None)), "rank": int,
    "steps_limit": (int, type(None)), "argv": list, "target_argv": list, "haiprof_argv": list, "gpus": list,
    "python": str, "torch": str, "cpu_model": str, "haiprof_version": str, "overhead_s": dict, "conditions": dict,
    "cpu_wait_share": (*_NUM, type(None)), "pid_start": int,
}


def _bad_value(v: Any, types) -> bool:
    if isinstance(v, bool):   # JSON true is not a count
        return bool not in (types if isinstance(types, tuple) else (types,))
    if isinstance(v, float) and not math.isfinite(v):   # 1e400 parses as inf
        return True
    return not isinstance(v, types)


def clean_meta(meta: Any) -> tuple[dict, list]:
    """(meta usable by the analyses, names of what was wrong): not an object -> {}; wrong-typed fields dropped."""
    if not isinstance(meta, dict):
        return {}, ["not a JSON object"]
    bad = [k for k, types in META_TYPES.items() if k in meta and _bad_value(meta[k], types)]
    return {k: v for k, v in meta.items() if k not in bad}, bad


def phase_record_ok(r: Any) -> bool:
    """[name, start_ns, end_ns, ...] with integer times (what the collectors write; extra fields are theirs)."""
    return (isinstance(r, list) and len(r) >= 3 and isinstance(r[0], str)
            and type(r[1]) is int and type(r[2]) is int)


def _kind(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num" if math.isfinite(v) else "bad"
    return type(v).__name__


def clean_samples(records: list) -> tuple[list, int]:
    """Samples that are objects with an integer t_ns and, key by key, the kind of value most samples have."""
    recs = [r for r in records if isinstance(r, dict) and type(r.get("t_ns")) is int]
    votes: dict = {}
    for r in recs:
        for k, v in r.items():
            kind = _kind(v)
            if kind is not None:
                votes.setdefault(k, {}).setdefault(kind, 0)
                votes[k][kind] += 1
    usual = {k: max(c, key=c.get) for k, c in votes.items()}
    good = [r for r in recs if all(_kind(v) in (None, usual[k]) and _kind(v) != "bad" for k, v in r.items())]
    return good, len(records) - len(good)


def read_jsonl(path: Path, at_most: int | None = None) -> list:
    """Read a JSONL file; a torn last line (process killed mid-write) is skipped, not fatal. `at_most`: a file
    of more lines is read as every k-th line (the first and the last kept), at most about that many."""
    out = []
    stride, last = 1, -1
    if at_most:
        lines = _count_lines(path)
        stride, last = max(1, -(-lines // at_most)), lines - 1
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if stride > 1 and i % stride and i != last:
                    continue
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except FileNotFoundError:
        pass
    return out


def _count_lines(path: Path) -> int:
    n = 0
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                n += block.count(b"\n")
    except OSError:
        return 0
    return n


def iter_records(records: Iterable) -> Iterable[tuple]:
    """Yield well-formed phase records (name, start_ns, end_ns); malformed ones are dropped."""
    for r in records:
        if type(r) is list and len(r) >= 3 and type(r[1]) is int and type(r[2]) is int and type(r[0]) is str:
            yield r[0], r[1], r[2]     # what read_phase_records returns: no conversion needed
        elif isinstance(r, list) and len(r) >= 3 and isinstance(r[0], str):
            try:
                yield r[0], int(r[1]), int(r[2])
            except (TypeError, ValueError, OverflowError):   # 1e400 parses as inf
                continue
