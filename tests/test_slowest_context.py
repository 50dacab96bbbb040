"""The slowest-steps table says what else happened around each slow step (haiprof/analysis/whole_run.py
_context): an evaluation pass before it, a checkpoint's disk writes, the host's CPU around it, the GPU's busy
time (render/slowest.py), and links the step to the step chart."""
from types import SimpleNamespace

import numpy as np

from haiprof.analysis import whole_run
from haiprof.render.slowest import section_slowest

MS = 1_000_000


def _arrays(n=10, ms=10):
    start = np.arange(n, dtype=np.int64) * (ms + 1) * MS
    return {"index": np.arange(n, dtype=np.int64) + 3, "start": start, "end": start + ms * MS}


def test_eval_checkpoint_and_host_notes_land_on_their_step():
    a = _arrays()
    rows = [{"step": 6, "time_ms": 10.0, "phases_ms": {}, "notes": []},
            {"step": 9, "time_ms": 10.0, "phases_ms": {}, "notes": ["epoch start (a new DataLoader iterator)"]},
            {"step": 4, "time_ms": 10.0, "phases_ms": {}, "notes": []}]
    # eval forwards between step 5's end and step 6's start; none elsewhere
    records = [["eval", int(a["end"][2]) + 100, int(a["end"][2]) + 200]] * 5 + [["forward", 0, 1]]
    # samples every 5 ms; the process wrote 50 MB in the sample interval that ends inside step 9
    t = np.arange(0, 120 * MS, 5 * MS)
    wrote = np.where(t >= a["start"][6] + 2 * MS, 50 * 10**6, 1000)
    system = [{"t_ns": int(x), "cpu_main_pct": 97.0, "cpu_cores_pct": [100.0, 40.0], "proc_write_bytes": int(w)}
              for x, w in zip(t, wrote)]
    whole_run._context(rows, a, records, system)
    assert rows[0]["notes"] == ["an evaluation pass before it (5 eval forwards)"]
    assert rows[1]["notes"][0].startswith("epoch start") and "wrote 50 MB to disk" in rows[1]["notes"][1]
    assert rows[2]["notes"] == []
    assert all(r["host"].startswith("training process 97% CPU, machine 70% busy") for r in rows)


def test_table_links_each_step_and_gives_the_gpu_busy_time():
    rows = [{"step": s, "time_ms": 30.0 - s, "phases_ms": {"forward": 5.0}, "notes": ["<b>x</b>"],
             "host": "training process 97% CPU"} for s in (7, 12)]
    d = SimpleNamespace(summary={"slowest_steps": rows, "step_time_s": {"median": 0.01},
                                 "device": {"per_step": [{"index": 7, "busy_s": 0.004, "duration_s": 0.023}]}})
    html = section_slowest(d, {})
    assert '<a class="zoom-step" href="#fig-steps" data-step="7"' in html and 'data-step="12"' in html
    assert "training process 97% CPU; GPU busy 4 of 23 ms" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
