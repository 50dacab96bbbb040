"""docs/verdicts.md is what haiprof says today: the recorded rows (shared H100 recordings, a public peer trace)
regenerated and compared cell by cell, and on every row, recorded or CPU, the verdict's kind is the kind of the
first action of "Do this next"."""
import json
import re
import sys
from pathlib import Path

import pytest

from conftest import GPU_RUNS, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import verdict_table as VT  # noqa: E402

DOC = REPO / "docs" / "verdicts.md"


def _table(name: str) -> str:
    text = DOC.read_text()
    start, end = f"<!-- {name} table: start -->\n", f"<!-- {name} table: end -->"
    return text[text.index(start) + len(start):text.index(end)]


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:] if line.strip()]


@pytest.mark.skipif(not VT.GPU_RUNS.is_dir(), reason=f"no recorded GPU runs at {VT.GPU_RUNS}")
def test_recorded_rows_are_regenerated_exactly(tmp_path, gpu_reports):
    def report(run):   # conftest.gpu_reports: the same `haiprof report` of each recording the GPU tests read
        if run.parent != GPU_RUNS / "h100-2026-11-22":
            return VT._report(run, tmp_path)
        d, r = gpu_reports([run.name])[run.name]
        assert r.returncode == 0, r.stderr
        return json.loads((d / "summary.json").read_text())
    rows = VT.recorded_rows(tmp_path, report)
    assert rows and VT.markdown(rows) == _table("recorded")


@pytest.mark.parametrize("name", ["recorded", "examples"])
def test_the_verdict_is_the_first_actions_kind(name):
    rows = _rows(_table(name))
    assert rows, f"the {name} table of docs/verdicts.md is empty"
    for r in rows:
        verdict, first = r[2], r[4]
        kind = re.search(r"\((\w+)\)$", first)
        # the first action is the verdict's fix, unless the script already does it or this run applied it
        assert verdict == "none" or (kind and kind.group(1) == verdict) or r[10] != "-", r
        removable = {k: float(v) for k, v in zip(VT.KINDS, r[6:10]) if v != "-"}
        if verdict != "none":   # the verdict is the class with the most removable time
            assert removable[verdict] == max(removable.values()), r
