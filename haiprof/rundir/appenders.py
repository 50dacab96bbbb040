"""The writers of the run directory's record streams: `JsonlAppender` (JSON lines) and `ChunkAppender`
(phases.bin's compressed columnar chunks, haiprof/phasestore.py).

Both queue records cheaply on any thread (the training thread's hooks) and write them from a background flush
thread, so no I/O happens at a training step. Kept apart from RunDir (rundir/__init__.py), which reads the files
back: the writers' concern is their cost to the training process. `RunDir.phase_appender()` hands out the phase
writer; haiprof.rundir re-exports both classes.

They write through an `OwnedFd`, never a Python file object: the script runs in this process and may close
descriptors it did not open (a daemon's os.closerange(3, ...)), then get the same numbers for its own files.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, Callable

from ..errors import fd_identity, fd_kept_high


class OwnedFd:
    """A descriptor on one of haiprof's own files, verified before each use: the number must still refer to the
    file it was opened on (st_dev, st_ino). If the script closed it, or closed it and got the number back for a
    file of its own, the number is the script's: it is left alone (never written, never closed) and the file is
    opened again by its path. No file object holds the number either: its finalizer would close it. Kept at a high
    number (errors.fd_kept_high): the script's own files get the low ones, as under python."""

    TRIES = 8   # a script that closes descriptors in a loop may take a fresh one again at once

    def __init__(self, path, flags: int):
        self.path, self.flags = Path(path), flags | os.O_CLOEXEC
        self.fd, self._id = -1, None
        self.reopened = 0   # how often the script took our descriptor (said in the run's status)
        self._open()

    def _open(self) -> None:
        """Open the file; the new number is checked against the path: a script closing descriptors on another
        thread may close it and take it for a file of its own at once (then it is left to the script)."""
        for _ in range(self.TRIES):
            low = os.open(self.path, self.flags, 0o644)
            try:
                st = os.stat(self.path)
            except OSError:
                st = None
            want = (st.st_dev, st.st_ino) if st is not None else None   # None: the low number is never closed
            fd = fd_kept_high(low, expect=want)
            ident = fd_identity(fd)
            if ident is not None and want is not None and ident == want:
                self.fd, self._id = fd, ident
                return
            if fd != low:   # our own copy of whatever the low number held by then
                os.close(fd)
        raise OSError(errno.EBADF, f"cannot keep a descriptor on {self.path}: the script kept taking it")

    def _ours(self) -> os.stat_result | None:
        if self.fd < 0:
            return None
        try:
            st = os.fstat(self.fd)
        except OSError:   # EBADF: closed by the script
            return None
        return st if (st.st_dev, st.st_ino) == self._id else None

    def verify(self) -> os.stat_result:
        """The descriptor's stat, after making sure it is ours (reopening the file if it is not). One fstat."""
        st = self._ours()
        if st is None:
            if self.fd >= 0:
                self.reopened += 1
            self.fd = -1   # abandoned, not closed: the number may be the script's file now
            self._open()
            st = os.fstat(self.fd)
        return st

    def append(self, data: bytes) -> None:
        """All of `data` at the file's end, checked just before the write. A write that fails takes back what it
        wrote, so the file ends on a whole record (a full disk); a descriptor closed between the check and the
        write (EBADF) is reopened and the write done again."""
        for attempt in range(self.TRIES):
            view = memoryview(data)
            try:
                end = self.verify().st_size   # O_APPEND: the data starts at the end
                while view:
                    view = view[os.write(self.fd, view):]
                return
            except OSError as e:
                if len(view) < len(data) and self._ours() is not None:
                    try:
                        os.ftruncate(self.fd, end)
                    except OSError:
                        pass
                if e.errno != errno.EBADF or attempt == self.TRIES - 1:
                    raise

    def close(self) -> None:
        """Close the descriptor only if it is still ours."""
        if self._ours() is not None:
            os.close(self.fd)
        self.fd = -1


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
        self._file: OwnedFd | None = OwnedFd(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.reopened = 0   # times the script had closed our descriptor (kept after close)
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

    def _write(self, records: list) -> None:
        self._file.append(("\n".join(map(self.encode, records)) + "\n").encode("utf-8"))

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
                try:
                    self._write(records)
                finally:
                    self.reopened = self._file.reopened

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
            self._release()

    def _release(self) -> None:
        if self._file is not None:
            self.reopened = self._file.reopened
            try:
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
                self._release()


_FALLOC_FL_KEEP_SIZE = 1   # linux/falloc.h: allocate blocks past the end without moving the end


def _libc_fallocate():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate = _libc_fallocate()


def keep_allocated(fd: int, start: int, length: int) -> int:
    """Allocate `length` bytes of disk past `start` for the file, its size unchanged (0), or the errno why not
    (ENOSPC; EOPNOTSUPP on a filesystem without it, or off Linux)."""
    if _fallocate is None:
        return errno.EOPNOTSUPP
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, start, length) == 0:
        return 0
    return ctypes.get_errno() or errno.EIO


class ChunkAppender(JsonlAppender):
    """The phase records' writer: each flush appends one compressed columnar chunk to phases.bin
    (haiprof/phasestore.py), ~20 bytes a training step where JSON lines took ~250.

    The step records are the run: when the disk fills, they must be the last thing to stop. So the writer keeps
    disk allocated past phases.bin's end (RESERVE bytes, halved down to MIN_RESERVE while the disk is short), taken
    before the script starts and topped up after each chunk: a trace export, the loss stream or another program
    filling the disk runs out of space first, and the chunks already reserved for still land. Given back at close.
    """

    RESERVE = 1 << 20          # ~50 s of records of a 1 ms training step
    MIN_RESERVE = 16 << 10

    def __init__(self, path: Path, interval_s: float = 0.5):
        super().__init__(path, interval_s)
        self._reserved_to = 0      # the file offset up to which disk is allocated
        self._can_reserve = True   # False on a filesystem without fallocate
        self._reserve()

    def _reserve(self) -> None:
        if not self._can_reserve:
            return
        size = self._file.verify().st_size   # verified first: the descriptor may be a reopened one
        if self._reserved_to - size >= self.RESERVE // 2:
            return
        want = self.RESERVE
        while want >= self.MIN_RESERVE:
            err = keep_allocated(self._file.fd, size, want)
            if err == 0:
                self._reserved_to = size + want
                return
            if err != errno.ENOSPC:
                self._can_reserve = False   # not on this filesystem: plain appends
                return
            want //= 2

    def _write(self, records: list) -> None:
        from ..phasestore import encode_chunk   # numpy: loaded by then (torch loads it; Session.start imports this)
        self._file.append(encode_chunk(records))   # a failed write leaves phases.bin on a whole chunk (OwnedFd)
        try:
            self._reserve()
        except OSError:
            pass   # the next chunk's write says whether there is room

    def _release(self) -> None:
        """The unused reservation is given back (a truncate at the end frees the blocks past it)."""
        if self._file is not None and self._reserved_to:
            try:
                os.ftruncate(self._file.fd, self._file.verify().st_size)
            except OSError:
                pass
        super()._release()
