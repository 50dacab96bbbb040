"""Links from one run directory to others (a fixed run's baseline, its diagnosis run, its interleaved passes).

A link is stored twice: absolute under its key (what older readers read) and relative to the linking run's
directory under key + REL, so a run directory moved or copied together with its baseline keeps its before/after.
Read back relative first, then absolute, then as a sibling of the same name (an older file, both moved).
"""
from __future__ import annotations

import os
from pathlib import Path

REL = "_rel"


def relative(run_dir, target) -> str | None:
    if not target:
        return None
    try:
        return os.path.relpath(Path(target).resolve(), Path(run_dir).resolve())
    except (OSError, ValueError):   # another drive (Windows): no relative path, the absolute one stands
        return None


def with_relative(run_dir, links: dict, keys) -> dict:
    """links with key + REL added for each of keys."""
    return {**links, **{k + REL: relative(run_dir, links.get(k)) for k in keys}}


def resolve(run_dir, links: dict, key: str) -> str | None:
    """The directory links[key] names, where it is now (resolved); as recorded when none is found (for the message
    that says it is unreadable); None when there is no link."""
    absolute, rel = links.get(key), links.get(key + REL)
    absolute = absolute if isinstance(absolute, str) and absolute else None
    rel = rel if isinstance(rel, str) and rel else None
    if absolute is None and rel is None:
        return None
    here = Path(run_dir).resolve()
    candidates = [here / rel] if rel else []
    if absolute:
        candidates += [Path(absolute), here.parent / Path(absolute).name]
    for c in candidates:
        try:
            if c.is_dir() and c.resolve() != here:
                return str(c.resolve())
        except OSError:
            continue
    return absolute or str(here / rel)
