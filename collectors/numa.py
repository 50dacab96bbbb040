"""NUMA: per-node allocation counters and the placement of the training process tree against its devices.

Sources (kernel Documentation/ABI):
  /sys/devices/system/node/node<N>/numastat   "numa_hit 123" lines: numa_hit, numa_miss, numa_foreign,
      interleave_hit, local_node, other_node; cumulative page counts (ABI/stable/sysfs-devices-node).
      other_node counts pages allocated on this node for a process running on another one: cross-node traffic.
  /sys/devices/system/node/node<N>/cpulist     CPUs of node N.
  /sys/bus/pci/devices/<bdf>/numa_node          the node a PCI device hangs off; -1 when the firmware does not say
      (ABI/testing/sysfs-bus-pci); class (0x03xxxx display/3D = GPU, 0x0200xx Ethernet, 0x0207xx InfiniBand).
  /proc/<pid>/status "Cpus_allowed_list:"       CPU affinity of each process in the training tree
      (Documentation/filesystems/proc.rst).
Placement is recorded when the set of processes changes (DataLoader workers start and stop), not every sample.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .proctree import read_text, tree

NUMASTAT_KEYS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")
_NODE = re.compile(r"node(\d+)$")


def read_nodes(sysfs_root: str) -> dict[int, Path]:
    base = Path(sysfs_root) / "devices" / "system" / "node"
    out = {}
    try:
        names = os.listdir(base)
    except OSError:
        return out
    for n in names:
        m = _NODE.match(n)
        if m:
            out[int(m.group(1))] = base / n
    return dict(sorted(out.items()))


def parse_numastat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def pci_devices(sysfs_root: str) -> list[dict]:
    """GPUs and NICs with their NUMA node."""
    base = Path(sysfs_root) / "bus" / "pci" / "devices"
    out = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return out
    for bdf in names:
        cls = read_text(base / bdf / "class", "")
        try:
            c = int(cls, 16)
        except ValueError:
            continue
        if c >> 16 == 0x03:
            kind = "gpu"
        elif c >> 8 in (0x0200, 0x0207):
            kind = "nic"
        else:
            continue
        node = read_text(base / bdf / "numa_node", "-1")
        out.append({"bdf": bdf, "kind": kind, "class": cls, "vendor": read_text(base / bdf / "vendor", ""),
                    "numa_node": int(node) if node.lstrip("-").isdigit() else -1})
    return out


def process_affinity(pid: int, proc_root: str) -> dict | None:
    status = read_text(Path(proc_root) / str(pid) / "status")
    if status is None:
        return None
    cpus = None
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            cpus = line.split(":", 1)[1].strip()
    return {"pid": pid, "comm": read_text(Path(proc_root) / str(pid) / "comm", ""), "cpus": cpus}


class NumaSampler:
    name = "numa"
    needs_pid = True  # watches the training process tree
    enable_hint = "needs /sys/devices/system/node (a kernel built with CONFIG_NUMA)"

    def __init__(self, root_pid: int, sysfs_root: str = "/sys", proc_root: str = "/proc",
                 exclude_pids: set | None = None):
        self.root_pid, self.sysfs_root, self.proc_root = root_pid, sysfs_root, proc_root
        self.exclude = set(exclude_pids or ()) | {os.getpid()}
        self.nodes = read_nodes(sysfs_root)
        self.node_cpus = {n: read_text(p / "cpulist", "") for n, p in self.nodes.items()}
        self.devices = pci_devices(sysfs_root)
        self._last_pids: tuple = ()

    @staticmethod
    def available(sysfs_root: str = "/sys") -> tuple[bool, str]:
        nodes = read_nodes(sysfs_root)
        if not nodes:
            return False, f"no {Path(sysfs_root) / 'devices/system/node'}/node* (kernel without CONFIG_NUMA)"
        if not (next(iter(nodes.values())) / "numastat").exists():
            return False, "numastat missing under the node directories"
        return True, ""

    def placement(self, pids: list[int]) -> dict:
        procs = [a for a in (process_affinity(p, self.proc_root) for p in pids) if a is not None]
        return {"root_pid": self.root_pid, "node_cpus": {str(n): c for n, c in self.node_cpus.items()},
                "processes": procs, "devices": self.devices}

    def sample(self) -> dict:
        nodes = {}
        for n, path in self.nodes.items():
            text = read_text(path / "numastat")
            if text is not None:
                stat = parse_numastat(text)
                nodes[str(n)] = {k: stat.get(k, 0) for k in NUMASTAT_KEYS}
        rec: dict = {"nodes": nodes}
        pids = tuple(tree(self.root_pid, self.proc_root, self.exclude))
        if pids != self._last_pids:
            self._last_pids = pids
            rec["placement"] = self.placement(list(pids))
        return rec

