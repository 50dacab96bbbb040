"""The writers of the run directory's record streams: `JsonlAppender` (JSON lines) and `ChunkAppender`
(phases.bin's compressed columnar chunks, haiprof/phasestore.py).

Both queue records cheaply on any thread (the training thread's hooks) and write them from a background flush
thread, so no I/O happens at a training step. Kept apart from RunDir (rundir/__init__.py), which reads the files
back: the writers' concern is their cost to the training process. `RunDir.phase_appender()` hands out the phase
writer; haiprof.rundir re-exports both classes.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from pathlib import Path
from typing import Any, Callable

from ..phasestore import encode_chunk


class JsonlAppender:
    """Buffered append-only JSONL writer. `append` is cheap and thread-safe; `flush` does the I/O.

    A background thread calls `flush` every `interval_s`, so data reaches the disk at least once a second.
    """

    def __init__(self, path: Path, interval_s: float = 0.5):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file = self._open()
        self.failed: OSError | None = None   # the write error that stopped recording, if any
        self._prefixes: dict = {}     # record name -> '["name",' (encode's fast path)
        # Called at the start of every flush, on the flush thread: producers that batch work off the training
        # thread (resolving CUDA events) append their records there. Must not raise.
        self.before_flush: list[Callable[[], None]] = []

    def append(self, record: Any) -> None:
        self._queue.append(record)  # deque.append is atomic: safe from hooks on any thread

    def encode(self, record: Any) -> str:
        """One JSON line. Phase records, (name, start_ns, end_ns), are most of a run's lines (thousands a second
        on a fast GPU loop) and are formatted directly: 10x cheaper than json.dumps, which matters because the
        flush thread holds the GIL the training thread needs. Anything else goes through json.dumps."""
        if (type(record) is tuple and len(record) == 3 and type(record[0]) is str and type(record[1]) is int
                and type(record[2]) is int):
            prefix = self._prefixes.get(record[0])
            if prefix is None:
                prefix = "[" + json.dumps(record[0]) + ","
                if len(self._prefixes) < 4096:    # names are a small fixed set; never grow without bound
                    self._prefixes[record[0]] = prefix
            return f"{prefix}{record[1]},{record[2]}]"
        return json.dumps(record, separators=(",", ":"), default=str)

    def _open(self):
        return open(self.path, "a", encoding="utf-8")

    def _write(self, records: list) -> None:
        self._file.write("\n".join(map(self.encode, records)) + "\n")
        self._file.flush()

    def flush(self) -> None:
        for produce in self.before_flush:
            produce()
        with self._lock:
            if self._file is None:
                return
            records = []
            q = self._queue
            while q:
                records.append(q.popleft())
            if records:
                self._write(records)

    def start(self) -> "JsonlAppender":
        self._thread = threading.Thread(target=self._loop, name="haiprof-flush", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.flush()
            except OSError as e:
                self.failed = e   # disk full or dir removed: stop writing, never disturb training (the
                self._drop()      # session says so once); what reached the disk stays readable
                return

    def _drop(self) -> None:
        """Stop recording: later records are discarded, not queued without bound."""
        with self._lock:
            self._queue = deque(maxlen=0)   # append() keeps working and keeps nothing
            try:
                if self._file is not None:
                    self._file.close()
            except OSError:
                pass
            self._file = None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        try:
            self.flush()
        finally:
            with self._lock:
                if self._file is not None:
                    self._file.close()
                    self._file = None


class ChunkAppender(JsonlAppender):
    """The phase records' writer: each flush appends one compressed columnar chunk to phases.bin
    (haiprof/phasestore.py), ~20 bytes a training step where JSON lines took ~250."""

    def _open(self):
        return open(self.path, "ab")

    def _write(self, records: list) -> None:
        end = self._file.tell()
        try:
            self._file.write(encode_chunk(records))
            self._file.flush()
        except OSError:   # a full disk: take the partial chunk back, so the file ends on a whole one
            try:
                self._file.truncate(end)
            except OSError:
                pass
            raise
