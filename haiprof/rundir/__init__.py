"""The run directory: haiprof's data model.

Every stage talks through these files, so a run can be re-analysed later (`haiprof report`) and survives a
SIGKILL of the training process up to the last flush:

    meta.json              what ran, where and when (rewritten atomically at start and at exit)
    phases.bin             phase intervals from the training process, in compressed chunks (phasestore.py;
                           older runs: phases.jsonl, one JSON list per line), each record
                           [phase, start_ns, end_ns] with CLOCK_MONOTONIC nanoseconds; a step boundary is
                           ["@step", t_ns, t_ns]; a DataLoader iterator's first batch ["@loader", t, t, num_workers]
    samples/<name>.jsonl   one JSON object per sample and collector, each with "t_ns" (CLOCK_MONOTONIC)
    status.jsonl           one line per collector: {"collector", "available", "reason"}
    summary.json           derived by the analyzers (schema below); report.html is derived too

Here: `RunDir` (create, claim, read back what a run wrote). The file names, phases and marks are in
rundir/vocabulary.py, the JSON files' reading and the checks of untrusted files in rundir/files.py, the streams'
buffered writers in rundir/appenders.py (all re-exported here).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import say
from .appenders import ChunkAppender, JsonlAppender  # noqa: F401  (re-exported: importers use haiprof.rundir)
from .files import (META_TYPES, clean_meta, clean_samples, iter_records, phase_record_ok,  # noqa: F401 (re-exported)
                    read_jsonl, write_json_atomic)
from .vocabulary import (ALL_PHASES, BACKWARD_MARK, GATHER_FILE, META, PHASES, PHASES_BIN,  # noqa: F401 (re-exported)
                         PHASES_FILE, REPORT, SAMPLES_DIR, STATUS_FILE, STEP_MARK, STEPS_FILE, SUMMARY, TRACE_FILE)
from . import liveness

if TYPE_CHECKING:   # numpy, loaded where phases are read: not in the sampler process or before the script starts
    from ..phasestore import PhaseColumns

SCHEMA_VERSION = 1
MAX_SAMPLES = 20_000   # per collector, read back (read_samples): about 3 hours at the default interval
# A rank's digest: all that leaves its node when the job has no shared filesystem (runtime/rank_gather.py)
DIGEST_FILES = (META, SUMMARY, STEPS_FILE, STATUS_FILE)


class NotARunDir(Exception):
    """Raised when a path is not a haiprof run directory."""


class OutDirError(Exception):
    """The output directory cannot be used (taken, not a directory, not writable): one line for the user."""


class RunDir:
    """A run directory on disk. Cheap to construct; reads lazily."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._warned: set = set()
        self.read_notes: dict = {}   # what reading the run found wrong, for its status (see _say_skipped)

    def warn_malformed(self, name: str, what: str) -> None:
        """One line per file and run directory, however often it is read."""
        if name not in self._warned:
            self._warned.add(name)
            say(f"haiprof: warning: {name}: {what}")

    # -- creation -------------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike) -> "RunDir":
        p = Path(path).absolute()
        p.mkdir(parents=True, exist_ok=True)
        (p / SAMPLES_DIR).mkdir(exist_ok=True)
        return cls(p)

    @classmethod
    def claim(cls, path: str | os.PathLike) -> "RunDir":
        """A new run directory at `path`, which must not exist yet or be empty: a run never appends to another
        run, and never writes over a user's files. Absolute, so the script's os.chdir() cannot move it."""
        p = Path(path).absolute()
        if p.is_symlink() and not p.exists():
            raise OutDirError(f"--out {path}: is a symbolic link to {os.readlink(p)}, which does not exist")
        try:
            if p.is_dir() and any(p.iterdir()):
                what = "an earlier haiprof run" if (p / META).is_file() else "other files"
                raise OutDirError(f"--out {path}: the directory is not empty (it holds {what}); "
                                  "choose a new directory or remove it")
            if p.exists() and not p.is_dir():
                raise OutDirError(f"--out {path}: exists and is not a directory")
            p.mkdir(parents=True, exist_ok=True)
            (p / SAMPLES_DIR).mkdir()   # exclusive: of two runs given the same --out at once, one wins
        except OutDirError:
            raise
        except FileExistsError:
            raise OutDirError(f"--out {path}: another run is using this directory") from None
        except OSError as e:
            raise OutDirError(f"--out {path}: cannot create the run directory: {e.strerror or e}") from None
        return cls(p)

    @classmethod
    def claim_new(cls, parent: str | os.PathLike, name: str) -> "RunDir":
        """A fresh `parent/name-<timestamp>[-N]/`, created atomically: two runs started in the same second (or
        at the same instant in two processes) each get their own directory."""
        parent = Path(parent).absolute()
        base = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            parent.mkdir(parents=True, exist_ok=True)
            for n in range(1, 10_000):
                p = parent / (base if n == 1 else f"{base}-{n}")
                try:
                    p.mkdir()   # exclusive: exactly one process wins a name
                except FileExistsError:
                    continue
                (p / SAMPLES_DIR).mkdir()
                return cls(p)
        except OSError as e:
            raise OutDirError(f"cannot create a run directory in {parent}: {e.strerror or e}") from None
        raise OutDirError(f"cannot create a run directory in {parent}: too many runs named {base}")

    @classmethod
    def open(cls, path: str | os.PathLike) -> "RunDir":
        p = Path(path)
        if p.exists() and not p.is_dir():
            raise NotARunDir(f"{path}: not a run directory (a file; give the directory `haiprof run` wrote)")
        if not p.is_dir():
            raise NotARunDir(f"{path}: no such directory")
        if not (p / META).is_file():
            raise NotARunDir(f"{path}: not a haiprof run directory (no {META})")
        return cls(p)

    # -- paths ----------------------------------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    def samples_file(self, collector: str) -> Path:
        return self.path / SAMPLES_DIR / f"{collector}.jsonl"

    def in_progress(self, meta: dict | None = None) -> tuple[bool, str]:
        """(True, "") while the run that writes here is still going: no end recorded, and its process alive
        when it ran on this host (elsewhere, a shared filesystem: only the missing end says so)."""
        import socket
        meta = self.read_meta() if meta is None else meta
        if meta.get("end_time") is not None or meta.get("exit_code") is not None:
            return False, "the run has ended"
        if meta.get("host") == socket.gethostname() and isinstance(meta.get("pid"), int):
            why = liveness.gone(meta)   # the pid, and the process's start time (a reused pid is not the run)
            if why:
                return False, why
        return True, ""

    # -- meta -----------------------------------------------------------------------------------------
    def read_meta(self) -> dict:
        try:
            with open(self.path / META, encoding="utf-8") as f:
                raw = json.load(f)
        except (OSError, ValueError) as e:
            raise NotARunDir(f"{self.path}: unreadable {META} ({e.__class__.__name__})") from None
        meta, bad = clean_meta(raw)
        if bad:
            what = ("not a JSON object: analysed without it" if not isinstance(raw, dict)
                    else "field(s) of the wrong type ignored: " + ", ".join(bad))
            self.warn_malformed(META, what)
        return meta

    def write_meta(self, meta: dict) -> None:
        write_json_atomic(self.path / META, liveness.stamp(meta))   # the writer's start time beside its pid

    def update_meta(self, **fields: Any) -> dict:
        meta = self.read_meta()
        meta.update(fields)
        self.write_meta(meta)
        return meta

    # -- streams --------------------------------------------------------------------------------------
    def phase_appender(self) -> JsonlAppender:
        return ChunkAppender(self.path / PHASES_BIN)

    def release_leftover_reservation(self) -> None:
        """Give back the disk a killed writer kept allocated past phases.bin's end (ChunkAppender reserves it;
        only a clean close releases it). The bytes are unchanged: a truncate to the file's own size frees the
        blocks past it. A job's directory: each rank's too. A read-only directory keeps it."""
        for path in (self.path / PHASES_BIN, *self.path.glob(f"rank-*/{PHASES_BIN}")):
            try:
                st = path.stat()
                if st.st_blocks * 512 > st.st_size + ChunkAppender.MIN_RESERVE:
                    os.truncate(path, st.st_size)
            except OSError:
                pass

    def has_phases(self) -> bool:
        return (self.path / PHASES_BIN).is_file() or (self.path / PHASES_FILE).is_file()

    def has_phase_data(self) -> bool:
        """Some phase record reached the disk (a stat, no read): the training loop has begun."""
        for name in (PHASES_BIN, PHASES_FILE):
            try:
                if (self.path / name).stat().st_size > 0:
                    return True
            except OSError:
                pass
        return False

    def _say_skipped(self, skipped) -> None:
        """phases.bin bytes that held no readable chunk: a warning, and damage before the end also in the report's
        collector status (read_status; kept in memory, as a live run's snapshot may read a chunk being written)."""
        if not skipped:
            return
        parts = []
        if skipped.middle:
            what = (f"{skipped.middle} byte(s) in {skipped.places} damaged place(s) held no readable chunk: "
                    f"skipped, the chunks around them read")
            self.read_notes[PHASES_BIN] = {"collector": PHASES_BIN, "available": True, "reason": what}
            parts.append(what)
        if skipped.tail:
            parts.append(f"the last {skipped.tail} byte(s) are a chunk cut short (the run was killed while "
                         f"writing it): skipped")
        self.warn_malformed(PHASES_BIN, "; ".join(parts))

    def read_phase_records(self) -> list:
        """phases.bin (runs since the chunked store) and phases.jsonl (older runs, `haiprof analyze`)."""
        from ..phasestore import read_chunks
        chunked, skipped = read_chunks(self.path / PHASES_BIN)
        self._say_skipped(skipped)
        good = []
        for name, records in ((PHASES_FILE, read_jsonl(self.path / PHASES_FILE)), (PHASES_BIN, chunked)):
            ok = [r for r in records if phase_record_ok(r)]
            if len(ok) < len(records):
                self.warn_malformed(name, f"{len(records) - len(ok)} malformed record(s) skipped")
            good += ok
        return good

    def read_phase_columns(self) -> PhaseColumns:
        """read_phase_records as numpy columns (haiprof/phasestore.py), the malformed records left out with the
        same warnings: what the analysis of a long run reads."""
        from ..phasestore import PhaseColumns, read_columns
        cols, skipped = read_columns(self.path / PHASES_BIN)
        self._say_skipped(skipped)
        odd = [(at, r) for at, r in cols.odd if phase_record_ok(r)]
        legacy = read_jsonl(self.path / PHASES_FILE)
        ok = [r for r in legacy if phase_record_ok(r)]
        for name, n_bad in ((PHASES_FILE, len(legacy) - len(ok)), (PHASES_BIN, len(cols.odd) - len(odd))):
            if n_bad:
                self.warn_malformed(name, f"{n_bad} malformed record(s) skipped")
        cols.odd = odd
        if not ok:
            return cols
        old = PhaseColumns.from_records(ok)
        return old if not len(cols) else old.concat(cols)

    def read_samples(self, collector: str) -> list:
        """A collector's samples; a run of days (a sample every 0.5 s is ~170,000 a day) is read as every k-th
        sample, first and last kept, at most MAX_SAMPLES: the report's analyses and charts need the trend and the
        averages, and memory stays bounded however long the run."""
        good, bad = clean_samples(read_jsonl(self.samples_file(collector), MAX_SAMPLES))
        if bad:
            self.warn_malformed(f"{SAMPLES_DIR}/{collector}.jsonl", f"{bad} malformed record(s) skipped")
        return good

    def sample_collectors(self) -> list[str]:
        d = self.path / SAMPLES_DIR
        return sorted(p.stem for p in d.glob("*.jsonl")) if d.is_dir() else []

    def record_status(self, collector: str, available: bool, reason: str = "") -> None:
        # Called from hooks inside the user's training loop: a vanished or full disk must never raise there.
        line = json.dumps({"collector": collector, "available": available, "reason": reason})
        try:
            with open(self.path / STATUS_FILE, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            pass

    def read_status(self) -> dict:
        """Latest status per collector (a later line overrides: a collector that failed mid-run)."""
        status: dict = {}
        for rec in read_jsonl(self.path / STATUS_FILE):
            if isinstance(rec, dict) and isinstance(rec.get("collector"), str):
                status[rec["collector"]] = rec
        return {**status, **self.read_notes}

    # -- derived outputs ------------------------------------------------------------------------------
    def write_summary(self, summary: dict) -> Path:
        write_json_atomic(self.path / SUMMARY, summary)
        return self.path / SUMMARY

    def read_summary(self) -> dict:
        with open(self.path / SUMMARY, encoding="utf-8") as f:
            return json.load(f)
