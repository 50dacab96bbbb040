"""Hand-built steps for the analyzers' tests, as the analyzers take them: StepColumns (there is no step object)."""
from haiprof.analyzers.step_columns import StepColumns


def step_columns(rows) -> StepColumns:
    """rows: (index, start_ns, end_ns[, {phase: ns}[, traced]]) per step, in order."""
    rows = [tuple(r) + (None, False)[len(r) - 3:] for r in rows]
    names = list(dict.fromkeys(p for r in rows for p in (r[3] or {})))
    return StepColumns.build([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                             {p: [(r[3] or {}).get(p, 0) for r in rows] for p in names}, [r[4] for r in rows])


def rows(steps: StepColumns) -> list:
    """(index, start_ns, end_ns, {phase: ns}, traced) of each step: what a test compares with a hand count."""
    return [(i, a, b, dict(zip(steps.names, ph)), t) for i, a, b, ph, t in
            zip(steps.index.tolist(), steps.start_ns.tolist(), steps.end_ns.tolist(), steps.phases.tolist(),
                steps.traced.tolist())]
