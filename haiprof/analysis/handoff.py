"""The worker hand-off rate the prefetch what-if needs (analyzers/whatif.py), probed after the run only where it
needs it: a run waiting for input, with no worker pool, whose batches are large (whatif.handoff_bytes).

Wiring only, as the CPU matmul peak (efficiency.py): collectors/handoff_probe.py measures it once, on the machine
that ran the script (same host and CPU model), kept in the run directory (HANDOFF) so a later `haiprof report`
quotes the same rate; elsewhere (a recorded run re-reported on another machine) it is not measured, and the
prediction says so.
"""
from __future__ import annotations

import json

from haiprof.analyzers import whatif

HANDOFF = "handoff.json"


def attach(run_path, meta: dict, summary: dict) -> None:
    """summary["handoff"]: the kept or newly measured probe, where the what-if needs one (in place)."""
    nbytes = whatif.handoff_bytes(summary)
    if nbytes is None:
        return
    path = run_path / HANDOFF
    try:
        kept = json.loads(path.read_text())
        if isinstance(kept, dict) and kept.get("handoff_bytes_per_s"):
            summary["handoff"] = kept
            return
    except (OSError, ValueError):
        pass
    from .efficiency import _same_machine
    if not _same_machine(meta):
        return
    from haiprof.collectors.handoff_probe import measure
    probe = measure(nbytes)
    if probe is None:
        return
    summary["handoff"] = probe
    try:
        path.write_text(json.dumps(probe))
    except OSError:
        pass
