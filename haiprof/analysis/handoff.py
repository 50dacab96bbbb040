"""The worker hand-off rate the prefetch what-if needs (analyzers/whatif.py), probed after the run only where it
needs it: a run waiting for input, with no worker pool, whose batches are large (whatif.handoff_bytes).

Wiring only, as the CPU matmul peak (efficiency.py): collectors/handoff_probe.py measures it once, on the machine
that ran the script (same host and CPU model), kept in the run directory (HANDOFF) so a later `haiprof report`
quotes the same rate; elsewhere (a recorded run re-reported on another machine) it is not measured, and the
prediction says so.
"""
from __future__ import annotations

from haiprof.analyzers import whatif

from . import run_probes

HANDOFF = "handoff.json"


def attach(run_path, meta: dict, summary: dict) -> None:
    """summary["handoff"]: the kept or newly measured probe, where the what-if needs one (in place)."""
    nbytes = whatif.handoff_bytes(summary)
    if nbytes is None:
        return
    path = run_path / HANDOFF
    probe = run_probes.kept(path, lambda k: bool(k.get("handoff_bytes_per_s")))
    if probe is None and not run_probes.why_not_here(run_path, meta):
        from haiprof.collectors.handoff_probe import measure
        probe = measure(nbytes)
        if probe is not None:
            run_probes.keep(path, probe)
    if probe is not None:
        summary["handoff"] = probe
