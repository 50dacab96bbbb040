"""The run directory's shared words (haiprof/rundir/vocabulary.py) are defined there only: a second definition of
the phases, a mark or a file name elsewhere is how copies drift apart (a phase added in one place, a renamed
file read under its old name in another)."""
from __future__ import annotations

import ast

from haiprof.rundir import vocabulary as V

from test_layout import modules

VOCABULARY = "haiprof.rundir.vocabulary"
# the values that must have one definition: module-level constants with these values elsewhere are copies
SHARED = {V.PHASES, V.ALL_PHASES, V.STEP_MARK, V.OPT_STEP_MARK, V.BACKWARD_MARK, V.GPU_STEP_MARK, V.TRACE_BEGIN, V.TRACE_END,
          V.WINDOW_MARK, V.LOADER_MARK, V.MEM_MARK, V.BATCH_MARK, V.DDP_MARK, V.KINETO_TRACES, V.KINETO_TRACE,
          V.KINETO_TRACES[1], V.PHASES_BIN, V.PHASES_FILE, V.META, V.GATHER_FILE, V.STEPS_FILE, V.TRACE_FILE}


def _constant(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _hashable(c) -> bool:
    try:
        hash(c)
    except TypeError:   # a tuple holding lists
        return False
    return True


def copies() -> list[str]:
    out = []
    for name, path in modules().items():
        if name == VOCABULARY:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:   # module level: where constants live
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            values = value.elts if isinstance(value, ast.Tuple) and all(isinstance(t, ast.Tuple) for t in targets) \
                else [value]   # `A, B = "x", "y"` defines two constants
            for v in values:
                c = _constant(v)
                if isinstance(c, (str, tuple)) and _hashable(c) and c in SHARED:
                    out.append(f"{name}:{node.lineno} {c!r}")
    return out


def test_shared_words_are_defined_once():
    found = copies()
    assert not found, "import these from haiprof.rundir.vocabulary instead:\n" + "\n".join(found)


def test_the_check_sees_a_copy(tmp_path, monkeypatch):
    """A module that defines the step mark itself is reported (the check can fail)."""
    import test_layout

    fake = tmp_path / "copy.py"
    fake.write_text('STEP_MARK = "@step"\nA, B = "@trace-begin", "x"\nOK = ("dataloader",)\n')
    monkeypatch.setattr(test_layout, "modules", lambda: {"haiprof.copy": fake})
    monkeypatch.setitem(globals(), "modules", test_layout.modules)
    assert copies() == ["haiprof.copy:1 '@step'", "haiprof.copy:2 '@trace-begin'"]


def test_every_layer_reads_the_same_phases():
    from haiprof.analyzers import compare, step_columns, timeline_owner
    from haiprof.collectors import phases
    from haiprof.render import html
    from haiprof import rundir

    assert timeline_owner.PHASES is rundir.PHASES is V.PHASES
    assert compare.PHASES is html.PHASES is V.ALL_PHASES
    assert step_columns.STEP_MARK is phases.STEP_MARK is V.STEP_MARK
