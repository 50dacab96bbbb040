"""The steps of a run as the report numbers them, for commands that select a stretch of a run by step
(`haiprof export --steps A:B`): the analyzers' own step building, nothing else of the analysis."""
from __future__ import annotations

import numpy as np

from haiprof.analyzers import step_columns
from haiprof.analyzers import steps as step_analysis

from ..phasestore import PhaseColumns
from ..rundir import iter_records


def step_spans(cols: PhaseColumns) -> tuple[np.ndarray, np.ndarray]:
    """(start_ns, end_ns) of every step on the run dir's CLOCK_MONOTONIC, indexed by step number: the steps of
    summary.json, `haiprof.load(...).steps` and the report (run_model.Run builds them the same way). `cols`: the
    run dir's phase records as its caller read them (RunDir.read_phase_columns; once, for the export too)."""
    split = step_columns.split_columns(cols.names, cols.code, cols.start, cols.end,
                                       list(iter_records(r for _, r in cols.odd)))
    steps, _ = step_analysis.build_steps((), split)
    return np.asarray(steps.start_ns), np.asarray(steps.end_ns)
