"""The storage device's parallel read rate the prefetch what-if needs (analyzers/whatif_input.py), probed after the
run only where it needs it: a loader waiting on local storage reads on the training thread, no worker pool, so the
fix would start N workers reading at once (whatif.read_probe_readers).

Wiring only, as the hand-off probe (handoff.py): collectors/read_probe.py reads the files the system sampler saw
open for reading in the training process tree (collectors/open_files.py, `read_files` in its samples), on the
machine that ran the script (same host and CPU model), kept in the run directory (READ_PROBE) so a later `haiprof
report` quotes the same rates. Where it cannot measure, summary["read_probe"] says why ("not_measured"), and the
prediction keeps a device that serves N readers N times faster as its point.
"""
from __future__ import annotations

from haiprof.analyzers import whatif

from . import run_probes

READ_PROBE = "read_probe.json"


def read_files(system_samples: list) -> list:
    """[path, size] of every file the sampler noted, in the order first seen."""
    out, seen = [], set()
    for rec in system_samples:
        for item in rec.get("read_files") or []:
            if isinstance(item, list) and len(item) == 2 and item[0] not in seen:
                seen.add(item[0])
                out.append(item)
    return out


def attach(run_path, meta: dict, summary: dict, system_samples: list) -> None:
    """summary["read_probe"]: the kept or newly measured probe, or why there is none, where the what-if needs one
    (in place)."""
    readers = whatif.read_probe_readers(summary)
    if readers is None:
        return
    path = run_path / READ_PROBE
    kept = run_probes.kept(path, lambda k: bool(k.get("speedup")))
    if kept is not None:
        summary["read_probe"] = kept
        return
    files = read_files(system_samples)
    why = run_probes.why_not_here(run_path, meta)   # another machine; a report of the run still training
    if why is None and not files:
        why = "no data file was seen open in the training process at a sample"
    elif why is None:
        from haiprof.collectors.read_probe import measure
        probe = measure(files, readers)
        if probe is not None:
            summary["read_probe"] = probe
            run_probes.keep(path, probe)
            return
        why = f"none of the {len(files)} file(s) the loader read is left as it was"
    summary["read_probe"] = {"not_measured": why}
