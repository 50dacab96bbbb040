"""The Python API: `haiprof.load(RUN_DIR)` for notebooks and scripts, and `haiprof.profile()` for a region.

Everything is read from the run directory (the same files `haiprof report` reads), so a run profiled on a cluster
can be loaded on a laptop. pandas is imported inside the functions: `import haiprof` is paid by every
`haiprof run` and must stay cheap.

Times in the DataFrames are seconds since the run started (`t_s`, `start_s`, `end_s`: CLOCK_MONOTONIC minus
meta.json's `start_monotonic_ns`) and durations are milliseconds (`*_ms`); the unit is always in the column name.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from .rundir import ALL_PHASES, PHASES, RunDir
from .runtime.warning_state import registries_kept


class Run:
    """A loaded run directory. Attributes are plain dicts or pandas DataFrames, computed once on first use.

    - `path`: the run directory (`pathlib.Path`).
    - `meta`: meta.json (command, argv, host, versions, start/end time, exit code).
    - `summary`: summary.json (the verdict); recomputed from the raw files when summary.json is absent.
    - `bottleneck`, `headline`: the verdict (`io`, `compute`, `launch`, `communication` or `none`) and its sentence.
    - `phase_share`: pandas Series, share of step time per phase (warm-up steps excluded; sums to 1).
    - `steps`: DataFrame, one row per training step:
      `step`, `start_s`, `end_s`, `duration_ms`, `<phase>_ms` for dataloader, h2d, forward, backward, optimizer,
      allreduce and other (they add up to `duration_ms`), `warmup` (the first steps, excluded as warm-up), `traced`
      (touched by the op-level tracing window, excluded for profiler overhead) and `in_stats` (True for the steps
      phase_share and step_time_s are computed from).
    - `phases`: DataFrame, one row per measured interval as recorded (nested intervals overlap):
      `phase`, `timing` (`host`, or `gpu` for CUDA-event timings), `start_s`, `end_s`, `duration_ms`.
    - `samples`: dict collector name -> DataFrame, one row per sample: `t_s`, `cost_ms` (what taking the sample
      cost the sampler), then the collector's own fields, whose names carry their units
      (`cpu_main_pct`, `rss_bytes`, ...). Byte and I/O counters are cumulative since boot or process start.
    - `findings`: DataFrame: `kind`, `severity`, `share` (of step time, 0..1), `message`, `fixes` (list of fix ids),
      `evidence` (dict).
    - `status`: DataFrame, one row per collector: `collector`, `available`, `reason` (why it is unavailable).
    - `ranks`: dict rank -> `Run` for a distributed run's per-rank directories (rank-<N>/); empty otherwise.
    """

    def __init__(self, path: str | os.PathLike):
        self._dir = RunDir.open(path)
        self.path = self._dir.path
        self.meta = self._dir.read_meta()
        self._data = None
        self._cache: dict = {}

    def __repr__(self) -> str:
        s = self.summary
        return f"<haiprof.Run {str(self.path)!r}: {s.get('bottleneck')}, {s.get('steps')} steps>"

    # -- helpers -----------------------------------------------------------------------------------------
    def _columns(self):
        """The phase records as columns, read once for both their readers: the `phases` table and the analysis
        (a long run's phases.bin is its largest file); let go once both have them."""
        return self._cached("columns", self._dir.read_phase_columns)

    def _columns_used(self, by: str) -> None:
        self._cache.setdefault("columns_used", set()).add(by)
        if self._cache["columns_used"] >= {"phases", "model"}:
            self._cache.pop("columns", None)

    def _model(self):
        """The run directory read once (analysis/run_model.Run): the analysis behind `steps` and `summary` (when
        summary.json is absent), and `samples` and `status` once it is read."""
        def build():
            from .analysis.run_model import Run as RunModel
            model = RunModel.read(self._dir, cols=self._columns())
            self._columns_used("model")
            return model
        return self._cached("model", build)

    def _analysis(self):
        if self._data is None:
            from .analysis.summary import analyze
            self._data = analyze(self._dir, run=self._model())
        return self._data

    def _t0_ns(self) -> int:
        t0 = self.meta.get("start_monotonic_ns")
        if isinstance(t0, int):
            return t0
        # An older or hand-made run dir: fall back to the earliest timestamp recorded.
        def first():
            cols = self._columns()
            firsts = [int(cols.start.min())] if len(cols.start) else []
            firsts += [r[1] for _, r in cols.odd]
            return min(firsts) if firsts else 0
        return self._cached("t0", first)

    def _raw_samples(self) -> dict:
        """collector -> sample dicts: the analysis' own when it has read them, else read here."""
        model = self._cache.get("model")
        return model.samples if model is not None else \
            {name: self._dir.read_samples(name) for name in self._dir.sample_collectors()}

    def _raw_status(self) -> dict:
        model = self._cache.get("model")
        return model.status if model is not None else self._dir.read_status()

    def _cached(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # -- the verdict -------------------------------------------------------------------------------------
    @property
    def summary(self) -> dict:
        """summary.json as written at the end of the run (the file of record), else recomputed."""
        def build():
            try:
                return self._dir.read_summary()
            except (OSError, ValueError):
                return self._analysis().summary
        return self._cached("summary", build)

    @property
    def bottleneck(self) -> str:
        return self.summary.get("bottleneck", "none")

    @property
    def headline(self) -> str:
        return self.summary.get("headline", "")

    @property
    def phase_share(self):
        import pandas as pd
        share = self.summary.get("phase_share", {})
        return pd.Series({p: float(share.get(p, 0.0)) for p in ALL_PHASES}, name="share")

    # -- tables ------------------------------------------------------------------------------------------
    @property
    def steps(self):
        def build():
            import numpy as np
            import pandas as pd

            from haiprof.analyzers import steps as step_analysis
            from haiprof.analyzers import thresholds as T
            from haiprof.analyzers.step_columns import StepColumns
            data = self._analysis()
            warmup = int(data.summary.get("warmup_steps_excluded", 0) or 0)
            steps = StepColumns.of(data.steps)   # one column per field: a million steps are no million dicts
            kept = StepColumns.of(step_analysis.steady_steps(data.steps, T.WARMUP_STEPS)).index
            t0 = self._t0_ns()
            table = {"step": steps.index, "start_s": (steps.start_ns - t0) / 1e9, "end_s": (steps.end_ns - t0) / 1e9,
                     "duration_ms": steps.duration_ns / 1e6}
            for p in ALL_PHASES:
                table[f"{p}_ms"] = steps.phase(p) / 1e6
            table.update(warmup=steps.index < warmup, traced=steps.traced.copy(), in_stats=np.isin(steps.index, kept))
            return pd.DataFrame(table)
        return self._cached("steps", build)

    @property
    def phases(self):
        def build():
            import numpy as np
            import pandas as pd
            columns = ["phase", "timing", "start_s", "end_s", "duration_ms"]
            t0 = self._t0_ns()
            cols = self._columns()   # numpy columns: no Python row per interval of a long run
            self._columns_used("phases")

            def what(name):   # (phase, timing); step marks ("@step") live in `steps`, so phase None
                timing, phase = ("gpu", name[4:]) if name.startswith("gpu:") else ("host", name)
                return (phase, timing) if phase in PHASES else (None, None)

            looked = [what(x) for x in cols.names] + [(None, None)]
            phase_of, timing_of = (np.array([w[k] for w in looked], dtype=object) for k in (0, 1))
            is_phase = np.array([w[0] is not None for w in looked])
            at = np.flatnonzero(is_phase[cols.code] & (cols.end >= cols.start))
            odd = [(a, r[0], r[1], r[2]) for a, r in cols.odd if what(r[0])[0] is not None and r[2] >= r[1]]
            if not len(at) and not odd:   # as the rows' table had it: no column of a known dtype
                return pd.DataFrame([], columns=columns).sort_values("start_s").reset_index(drop=True)
            code = cols.code[at]
            start, end = cols.start[at], cols.end[at]
            table = {"phase": phase_of[code], "timing": timing_of[code], "start_s": (start - t0) / 1e9,
                     "end_s": (end - t0) / 1e9, "duration_ms": (end - start) / 1e6}
            # the written order (an odd record comes before the column row it was written before), then a stable
            # sort on start_s: the order the rows had when they were read as records
            order = 2 * at + 1
            if odd:
                more = {"phase": [what(n)[0] for _, n, _, _ in odd], "timing": [what(n)[1] for _, n, _, _ in odd],
                        "start_s": [(s - t0) / 1e9 for _, _, s, _ in odd], "end_s": [(e - t0) / 1e9 for *_, e in odd],
                        "duration_ms": [(e - s) / 1e6 for _, _, s, e in odd]}
                table = {k: np.concatenate([v, np.array(more[k], dtype=v.dtype)]) for k, v in table.items()}
                order = np.concatenate([order, 2 * np.array([a for a, *_ in odd], dtype=np.int64)])
            by = np.lexsort((order, table["start_s"]))
            del cols, code, start, end, at, order   # a long run's columns go before the table is built
            for k in columns:                      # one column sorted at a time: one copy alive, not five
                table[k] = table[k][by]
            return pd.DataFrame(table, columns=columns)
        return self._cached("phases", build)

    @property
    def samples(self) -> dict:
        def build():
            import pandas as pd
            t0 = self._t0_ns()
            out = {}
            for name, got in self._raw_samples().items():
                recs = [r for r in got if isinstance(r, dict) and "t_ns" in r]
                df = pd.DataFrame(recs)
                if df.empty:
                    df = pd.DataFrame(columns=["t_s", "cost_ms"])
                else:
                    df.insert(0, "t_s", (df.pop("t_ns") - t0) / 1e9)
                    if "cost_ns" in df:
                        df.insert(1, "cost_ms", df.pop("cost_ns") / 1e6)
                out[name] = df
            return out
        return self._cached("samples", build)

    @property
    def findings(self):
        def build():
            import pandas as pd
            cols = ["kind", "severity", "share", "message", "fixes", "evidence"]
            rows = [{c: f.get(c) for c in cols} for f in self.summary.get("findings", [])]
            return pd.DataFrame(rows, columns=cols)
        return self._cached("findings", build)

    @property
    def status(self):
        def build():
            import pandas as pd
            rows = [{"collector": k, "available": bool(v.get("available")), "reason": v.get("reason", "")}
                    for k, v in sorted(self._raw_status().items())]
            return pd.DataFrame(rows, columns=["collector", "available", "reason"])
        return self._cached("status", build)


    @property
    def ranks(self) -> dict:
        def build():
            import re
            out = {}
            for sub in sorted(self.path.iterdir()):
                m = re.fullmatch(r"rank-(\d+)", sub.name)
                if m and (sub / "meta.json").is_file():
                    out[int(m.group(1))] = Run(sub)
            return dict(sorted(out.items()))
        return self._cached("ranks", build)


def load(run_dir: str | os.PathLike) -> Run:
    """Load a run directory written by `haiprof run` (or `haiprof.profile()`) as a `haiprof.Run`.

    >>> run = haiprof.load("haiprof-runs/train-20261121-120000")
    >>> run.bottleneck, run.steps["duration_ms"].median()
    >>> run.samples["system"].plot(x="t_s", y="cpu_main_pct")

    Raises `haiprof.rundir.NotARunDir` when the path is not a run directory.
    """
    return Run(run_dir)


class Profile:
    """What `haiprof.profile()` yields: `path` at once, `run` (a loaded `Run`) after the block ends."""

    def __init__(self, path: Path):
        self.path = path
        self.run: Run | None = None
        self.summary: dict | None = None


@contextlib.contextmanager
def profile(out: str | os.PathLike | None = None, name: str = "profile", sample_interval_s: float = 0.5,
            quiet: bool = True):
    """Profile a region of code in this process (a notebook cell, part of a script) with the same collectors as
    `haiprof run`, writing an ordinary run directory.

    >>> with haiprof.profile() as prof:
    ...     train(model, loader, epochs=1)
    >>> prof.run.headline

    `out` defaults to haiprof-runs/<name>-<timestamp>/. The hooks are removed when the block ends, also on an
    exception (which propagates unchanged after the run directory is finalised). `quiet=False` prints the
    verdict and the report path on stderr, as `haiprof run` does.
    """
    from haiprof.collectors.phases import PhaseRecorder

    from .runtime import run_setup, session

    opts = run_setup.RunOptions(script=None, module=None, args=[], out=None, quiet=quiet,
                                sample_interval_s=sample_interval_s)
    run_dir = run_setup.claim_out_dir(out, name)
    meta = run_setup.collect_meta(opts, name, run_dir)
    # the process that profiles itself: its own command line (a list, as meta.json's readers expect)
    meta.update(target_argv=[sys.executable, *sys.argv], command=None, how="profile()")
    run_dir.write_meta(meta)
    sidecar = session.start_sidecar(run_dir, sample_interval_s)
    appender = run_dir.phase_appender().start()
    recorder = PhaseRecorder(appender.append).drain_from(appender.before_flush)
    try:
        recorder.install()
    except Exception as e:  # hooks unavailable in this torch: still run the block, say why
        run_dir.record_status("phases", False, f"hooks could not be installed: {type(e).__name__}: {e}")
    handle = Profile(run_dir.path)
    exit_code, error = 0, None
    owner_pid = os.getpid()
    try:
        yield handle
    except BaseException as e:
        exit_code, error = 1, f"{type(e).__name__}: {e}"[:500]
        raise
    finally:
        if os.getpid() == owner_pid:   # a forked child leaving the block must not finalize the run
            with registries_kept():   # the code after the block: its warnings shown once stay so
                _finalize(run_dir, handle, recorder, appender, sidecar, exit_code, error, quiet)


def _finalize(run_dir, handle, recorder, appender, sidecar, exit_code, error, quiet) -> None:
    from .analysis.report import finish
    from .runtime import session
    recorder.uninstall()
    appender.close()
    session.stop_sidecar(sidecar)
    run_dir.update_meta(end_time=time.time(), end_monotonic_ns=time.monotonic_ns(), exit_code=exit_code,
                        error=error)
    handle.summary = finish(run_dir, quiet=quiet)
    handle.run = Run(run_dir.path)
