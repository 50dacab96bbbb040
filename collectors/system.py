"""System sampler (psutil): process-tree CPU and memory, per-core CPU, disk and network counters.

Runs in the sampler side process (haiprof/runtime/sidecar.py), never on the training thread. Counters are
recorded as cumulative values; rates are derived by the analyzers. Children that exit keep their last counters ("retired"), so
a DataLoader worker that finishes does not make the tree's totals go backwards. torch.compile's worker processes
(and their pool) are counted apart (`compile_procs`, `cpu_compile_pct`), never as DataLoader workers: `procs` and
`cpu_children_pct` are the training process and its other children.
"""
from __future__ import annotations

import os

from .open_files import OpenFiles
from .proctree import split_compile_workers, tree


class SystemSampler:
    name = "system"

    def __init__(self, root_pid: int, exclude_pids: set | None = None):
        import psutil  # imported here, in the sampler process only
        self._psutil = psutil
        self.root = psutil.Process(root_pid)
        self.exclude = set(exclude_pids or ()) | {os.getpid()}
        self._procs: dict = {}
        self._last_io: dict = {}
        self._retired_io = [0, 0]
        self._compile: set = set()
        self._files = OpenFiles()   # the files the tree reads: the read probe's (analysis/read_parallel.py)
        psutil.cpu_percent(percpu=True)  # prime: the first call has no interval to measure against

    @staticmethod
    def available() -> tuple[bool, str]:
        return True, ""   # psutil is a dependency of haiprof

    def _tree(self) -> list:
        ps = self._psutil
        live = {}
        # proctree walks /proc/<pid>/task/*/children; psutil's children(recursive=True) scans every /proc/*/stat.
        pids = tree(self.root.pid, exclude=self.exclude)
        self._compile = split_compile_workers(self.root.pid, pids, exclude=self.exclude)
        for pid in pids:
            proc = self._procs.get(pid)   # reuse: cpu_percent needs the previous call's state
            if proc is None:
                try:
                    proc = self.root if pid == self.root.pid else ps.Process(pid)
                except ps.Error:
                    continue              # exited between the walk and now
            live[pid] = proc
        for pid in set(self._last_io) - set(live):   # exited since the last sample
            r, w = self._last_io.pop(pid)
            self._retired_io[0] += r
            self._retired_io[1] += w
        self._procs = live
        return list(live.values())

    def sample(self) -> dict:
        ps = self._psutil
        cpu_main = cpu_children = 0.0
        rss = 0
        read_b, write_b = self._retired_io
        nprocs = ncompile = 0
        cpu_compile = 0.0
        tree = self._tree()
        for p in tree:
            try:
                with p.oneshot():
                    cpu = p.cpu_percent(None)
                    mem = p.memory_info().rss
                    try:
                        io = p.io_counters()
                        self._last_io[p.pid] = (io.read_bytes, io.write_bytes)
                    except (ps.AccessDenied, AttributeError, NotImplementedError):
                        pass
            except ps.Error:
                continue
            rss += mem
            if p.pid in self._compile:
                ncompile += 1
                cpu_compile += cpu
                continue
            nprocs += 1
            if p.pid == self.root.pid:
                cpu_main += cpu
            else:
                cpu_children += cpu
        for r, w in self._last_io.values():
            read_b += r
            write_b += w
        rec = {
            "cpu_main_pct": cpu_main, "cpu_children_pct": cpu_children, "procs": nprocs,
            "compile_procs": ncompile, "cpu_compile_pct": cpu_compile,
            "rss_bytes": rss, "proc_read_bytes": read_b, "proc_write_bytes": write_b,
            "cpu_cores_pct": ps.cpu_percent(percpu=True),
        }
        files = self._files.scan([p.pid for p in tree if p.pid not in self._compile])
        if files:   # each file once, when first seen open for reading
            rec["read_files"] = files
        vm = ps.virtual_memory()
        rec["mem_used_bytes"], rec["mem_total_bytes"] = vm.total - vm.available, vm.total
        disk = ps.disk_io_counters()
        if disk is not None:
            rec["disk_read_bytes"], rec["disk_write_bytes"] = disk.read_bytes, disk.write_bytes
        net = ps.net_io_counters()
        if net is not None:
            rec["net_sent_bytes"], rec["net_recv_bytes"] = net.bytes_sent, net.bytes_recv
        return rec
