"""Per-device block I/O from /proc/diskstats (Documentation/admin-guide/iostats.rst).

Each line: major minor name, then (1) reads completed (2) reads merged (3) sectors read (4) ms reading
(5) writes completed (6) writes merged (7) sectors written (8) ms writing (9) I/Os in flight (10) ms doing I/O
(11) weighted ms; 4.18+ adds four discard fields and 5.5+ two flush fields, which we do not need. Sectors are
always 512 bytes here, whatever the device's block size. Only whole disks are kept (partitions would double
count); loop, ram and zram devices are skipped. The process tree's own read/write bytes are recorded by the system
sampler (collectors/system.py) and not repeated here.
"""
from __future__ import annotations

from pathlib import Path

SECTOR = 512
SKIP_PREFIXES = ("loop", "ram", "zram")


def parse_diskstats(text: str) -> dict[str, list[int]]:
    """name -> [reads, sectors_read, writes, sectors_written, io_ms, in_flight] for every line."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        try:
            v = [int(x) for x in f[3:14]]
        except ValueError:
            continue
        out[f[2]] = [v[0], v[2], v[4], v[6], v[9], v[8]]
    return out


FIELDS = ("reads", "sectors_read", "writes", "sectors_written", "io_ms", "in_flight")


class DiskstatsSampler:
    name = "storage"
    enable_hint = "needs /proc/diskstats (procfs)"

    def __init__(self, proc_root: str = "/proc", sysfs_root: str = "/sys"):
        self.path = Path(proc_root) / "diskstats"
        block = Path(sysfs_root) / "block"
        names = parse_diskstats(self.path.read_text())
        # Whole disks appear in /sys/block; partitions only below them. Without sysfs, keep names as they are.
        whole = {p.name for p in block.iterdir()} if block.is_dir() else set(names)
        self.devices = sorted(n for n in names if n in whole and not n.startswith(SKIP_PREFIXES))

    @staticmethod
    def available(proc_root: str = "/proc") -> tuple[bool, str]:
        path = Path(proc_root) / "diskstats"
        try:
            parse_diskstats(path.read_text())
        except OSError as e:
            return False, f"{path}: {e.strerror or e}"
        return True, ""

    def sample(self) -> dict:
        stats = parse_diskstats(self.path.read_text())
        return {"devices": {n: stats[n] for n in self.devices if n in stats}}
