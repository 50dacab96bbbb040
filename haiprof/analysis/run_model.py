"""A run directory, read once for its report: `Run.read(run_dir)`.

Every analysis of a report takes what it needs from here, none reads a raw file of the run again: meta.json
(checked), phases.bin once (the intervals and step marks as columns, split once; the host steps as columns;
the few records with values as lists), the samples and the collectors' status, and the op-level trace of the
tracing window, parsed once on first use (analyzers/kineto_reader.py) for the launch statistics and the GPU
section alike; each window's events as dicts, read once for the analyses that need each op's shapes (the FLOP
count). A long run's intervals and its trace are large: `release_intervals()` and `release_trace()` free them
after their last analysis.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from haiprof.analyzers import step_columns
from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers import thresholds as T

from ..phasestore import PhaseColumns
from ..rundir import RunDir, iter_records
from ..rundir.vocabulary import BATCH_MARK, BACKWARD_MARK, DDP_MARK, EVAL, GPU_PREFIX, KINETO_TRACES, STEP_MARK

# phase intervals and step marks, one or more a step: analysed as columns, never turned into lists
BULK_RECORDS = {*step_analysis.PRIORITY, *(GPU_PREFIX + p for p in step_analysis.PRIORITY), EVAL, GPU_PREFIX + EVAL,
                STEP_MARK, BACKWARD_MARK}
# records with values, one a step, that no analysis reads as the general lists: the DataLoader waits' thread CPU
# (the io split reads their columns), the batch sizes (a job's digest reads them with the sync statistics)
PER_STEP_EXTRAS = {"dataloader", BATCH_MARK}


@dataclass
class Run:
    run_dir: RunDir
    meta: dict
    records: list                  # the records other than intervals and step marks (marks with values...), lists
    loader_waits: PhaseColumns     # DataLoader waits with their thread's CPU and runqueue wait (the io split)
    rank_marks: PhaseColumns       # batch sizes and gradient-sync statistics (rank_records), as columns
    rank_odd: list                 # the sync statistics' records (a dict each: never columns)
    split: Any                     # step_columns.Split: the intervals and marks as columns (None once released)
    steps: Any                     # step_columns.StepColumns: every host step, warm-up included
    step_info: dict                # how the steps were found (steps.build_steps)
    samples: dict = field(default_factory=dict)   # collector -> sample dicts
    status: dict = field(default_factory=dict)    # collector -> {"available", "reason"}
    _trace: Any = field(default=None, repr=False)
    _trace_read: bool = field(default=False, repr=False)
    _events: dict = field(default_factory=dict, repr=False)   # trace file name -> its events as dicts

    @classmethod
    def read(cls, run_dir: RunDir, cols: PhaseColumns | None = None) -> "Run":
        """`cols`: the phase records as the caller already read them (RunDir.read_phase_columns; left unchanged),
        else read here."""
        meta = run_dir.read_meta()
        cols = cols if cols is not None else run_dir.read_phase_columns()
        # the few records other than intervals and marks (marks with values, records with extras) are lists; the
        # DataLoader waits with their thread's CPU are columns (taken before the split below: their temporaries
        # and the split's are not alive together)
        records = cols.records((~cols.rows(BULK_RECORDS) | (cols.nx > 0)) & ~cols.rows(PER_STEP_EXTRAS))
        loader_waits = cols.take(cols.rows({"dataloader"}) & (cols.nx > 0))
        # a batch size a step: columns until a rank's digest asks for them (rank_records)
        rank_marks = cols.take(cols.rows({BATCH_MARK, DDP_MARK}))
        rank_odd = [r for _, r in cols.odd if isinstance(r, list) and r[:1] == [DDP_MARK]]
        # the phase intervals and step marks stay numpy columns, split once for every analysis
        split = step_columns.split_columns(cols.names, cols.code, cols.start, cols.end,
                                           list(iter_records(r for _, r in cols.odd)))
        del cols
        steps, step_info = step_analysis.build_steps((), split)
        samples = {name: run_dir.read_samples(name) for name in run_dir.sample_collectors()}
        return cls(run_dir, meta, records, loader_waits, rank_marks, rank_odd, split, steps, step_info, samples,
                   run_dir.read_status())

    def rank_records(self) -> list:
        """The batch sizes and gradient-sync statistics as records (a distributed rank's digest reads them):
        the batch sizes in order, then the sync statistics in order."""
        return self.rank_marks.records() + self.rank_odd

    @property
    def steady(self):
        """The host's steady steps (analyzers/steps.steady_steps: after warm-up, outside the tracing window,
        without a slow start), as columns."""
        return step_analysis.steady_steps(self.steps, T.WARMUP_STEPS)

    def release_intervals(self) -> None:
        """After the last analysis of the intervals: a long run's arrays are freed before the rest."""
        self.split = None

    # -- the op-level trace of the tracing window -----------------------------------------------------------------
    def trace_path(self):
        """trace.json.gz (compressed at the end of the run), else trace.json (killed before); None without one."""
        return next((self.run_dir.file(n) for n in KINETO_TRACES if self.run_dir.file(n).is_file()), None)

    def trace(self):
        """The trace parsed once (kineto_reader.TraceData), a kineto_reader.TraceError when it cannot be read, or
        None when the run has no trace. A whole trace of a usual size is parsed as JSON once, its events kept for
        trace_events and its columns made from them; a larger one, or one cut short (a killed run), is read by
        the streaming reader (columns only; the events are not held for it)."""
        if not self._trace_read:
            from haiprof.analyzers.kineto_reader import TraceError, read_trace, trace_of_json

            from .windows import MAX_TRACE_BYTES, load_trace

            self._trace_read = True
            path = self.trace_path()
            if path is not None:
                size = path.stat().st_size
                data = load_trace(path) if size <= MAX_TRACE_BYTES else None
                try:
                    if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
                        self._trace = trace_of_json(path, data, path.suffix == ".gz", size)
                        self._events[str(path)] = data["traceEvents"]
                    else:
                        self._trace = read_trace(path)
                except TraceError as e:
                    self._trace = e
        return self._trace

    def trace_events(self, path) -> list | None:
        """A tracing window's events as dicts (windows.read_events), read once per file however many analyses
        ask: the FLOP count needs what the columns leave out (each op's input shapes and types)."""
        from .windows import read_events

        name = str(path)
        if name == str(self.trace_path()):
            self.trace()   # the tracing window's own trace: parsed once, for its columns and its events
        if name not in self._events:
            self._events[name] = read_events(path)
        return self._events[name]

    def release_trace(self) -> None:
        """After the last reader of the trace's columns and of the windows' events: a large trace is freed."""
        self._trace, self._events = None, {}   # _trace_read stays: a later ask does not parse it again
