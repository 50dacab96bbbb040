"""The regular files the training process tree reads from: what the read-parallelism probe
(collectors/read_probe.py) reads after the run, so it measures the device the loader's data is on.

The system sampler calls scan() with the tree's pids each sample: each descriptor's link in /proc/PID/fd (a file
opened read-only: the access mode in /proc/PID/fdinfo/FD) and, every MAPS_EVERY-th sample, each shared file
mapping in /proc/PID/maps (a numpy memmap, a memory-mapped data set). A file is noted once, with its size, when
first seen. Limits: a file is seen only if it is open at a sample (a loader that opens, reads and closes each
sample between two samples is missed: a short run may note none); any file open for reading counts (a checkpoint
or a config being read at a sample too); files under MIN_BYTES (a folder of small images) are not noted; at most
MAX_FILES files a run.
"""
from __future__ import annotations

import os

MIN_BYTES = 1 << 20       # the probe reads blocks this large (read_probe.BLOCK)
MAX_FILES = 64
MAPS_EVERY = 4            # maps are read every 4th scan: a mapped data set stays mapped, and the kernel's text of a
                          # torch process's ~400 mappings costs ~0.6 ms to make (benchmarks/hw_sample_cost.py)
MAX_CHECKED = 10000       # descriptors already looked at (pid, fd, target): forgotten past this, then rebuilt
SKIP = ("/proc/", "/sys/", "/dev/")


class OpenFiles:
    def __init__(self, proc_root: str = "/proc"):
        self.proc = proc_root
        self.known: dict[str, int] = {}   # path -> size when first seen
        self._checked: set = set()
        self._scans = 0

    def _read_only(self, pid: int, fd: str) -> bool:
        try:
            with open(f"{self.proc}/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("flags:"):
                        return int(line.split()[1], 8) & 3 == os.O_RDONLY
        except (OSError, ValueError, IndexError):
            pass
        return False

    def _note(self, path: str, new: list) -> None:
        if path in self.known or len(self.known) >= MAX_FILES:
            return
        try:
            st = os.stat(path)
        except OSError:
            return
        if st.st_size >= MIN_BYTES and os.path.isfile(path):
            self.known[path] = st.st_size
            new.append([path, st.st_size])

    def _candidate(self, path: str) -> bool:
        return path.startswith("/") and path not in self.known and not path.startswith(SKIP) \
            and not path.endswith(" (deleted)")

    def scan(self, pids) -> list:
        """[path, size] of the files first seen now, in the processes `pids`."""
        new: list = []
        if len(self.known) >= MAX_FILES:
            return new
        if len(self._checked) > MAX_CHECKED:
            self._checked.clear()
        maps, self._scans = self._scans % MAPS_EVERY == 0, self._scans + 1
        for pid in pids:
            base = f"{self.proc}/{pid}/fd"
            try:
                fds = os.listdir(base)
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"{base}/{fd}")
                except OSError:
                    continue
                key = (pid, fd, target)
                if not self._candidate(target) or key in self._checked:
                    continue
                self._checked.add(key)
                if self._read_only(pid, fd):
                    self._note(target, new)
            if not maps:
                continue
            try:
                with open(f"{self.proc}/{pid}/maps") as f:
                    for line in f:
                        if "s " not in line:   # no shared mapping (perms like r--s): skip the split
                            continue
                        parts = line.split(None, 5)   # address perms offset dev inode path
                        if len(parts) == 6 and parts[1][3:4] == "s" and self._candidate(parts[5].rstrip("\n")):
                            self._note(parts[5].rstrip("\n"), new)
            except OSError:
                continue
        return new
