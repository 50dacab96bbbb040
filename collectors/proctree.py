"""The training process tree from procfs alone (no psutil), so fixture trees can stand in for /proc.

Children come from /proc/<pid>/task/<tid>/children (Documentation/filesystems/proc.rst, CONFIG_PROC_CHILDREN);
when that file is missing the tree is rebuilt from the ppid field of /proc/*/stat.
"""
from __future__ import annotations

import os
from pathlib import Path


def _children_files(proc: Path, pid: int) -> list[int] | None:
    task = proc / str(pid) / "task"
    try:
        tids = os.listdir(task)
    except OSError:
        return None
    out: list[int] = []
    found = False
    for tid in tids:
        try:
            text = (task / tid / "children").read_text()
        except OSError:
            continue
        found = True
        out += [int(x) for x in text.split()]
    return out if found else None


def _ppid_map(proc: Path) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            stat = (proc / name / "stat").read_text()
        except OSError:
            continue
        # comm may contain spaces and parentheses: fields after the last ')' are fixed.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(root_pid: int, proc_root: str = "/proc", exclude: set | None = None) -> list[int]:
    """root_pid followed by all its descendants (breadth first); pids in `exclude` (the sampler itself) and their subtrees skipped."""
    proc = Path(proc_root)
    exclude = exclude or set()
    out, queue, ppids = [], [root_pid], None
    while queue:
        pid = queue.pop(0)
        if pid in out or (pid in exclude and pid != root_pid):
            continue
        out.append(pid)
        kids = _children_files(proc, pid)
        if kids is None:
            if ppids is None:
                ppids = _ppid_map(proc)
            kids = ppids.get(pid, [])
        queue += kids
    return out


# torch.compile's worker processes (inductor's SubprocPool: `python .../torch/_inductor/compile_worker/__main__.py
# --pickler=... --kind=fork --workers=N --parent=PID ...`, and the pool it forks) are children of the training
# process, but no DataLoader workers.
COMPILE_WORKER_MARKS = ("torch/_inductor/compile_worker", "torch._inductor.compile_worker")


def is_compile_worker(cmdline: list[str]) -> bool:
    return any(m in arg for arg in cmdline[:3] for m in COMPILE_WORKER_MARKS)


def cmdline(pid: int, proc_root: str = "/proc") -> list[str]:
    """/proc/<pid>/cmdline as argv (NUL-separated); [] when unreadable (exited, or a kernel thread)."""
    try:
        raw = (Path(proc_root) / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [x.decode("utf-8", "replace") for x in raw.split(b"\0") if x]


def split_compile_workers(root_pid: int, pids: list[int], proc_root: str = "/proc",
                          exclude: set | None = None) -> set[int]:
    """The pids of `pids` (a tree from tree()) that are torch.compile workers or descend from one."""
    roots = {p for p in pids if p != root_pid and is_compile_worker(cmdline(p, proc_root))}
    if not roots:
        return set()
    rest = set(tree(root_pid, proc_root, (exclude or set()) | roots))
    return {p for p in pids if p not in rest}


def parse_cpulist(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0,1,2,3,8,10,11} (the kernel's cpulist format, lib/bitmap.c)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            step = 1
            if ":" in b:  # 0-7:2/4 group syntax is rare in procfs; treat the range plainly
                b = b.split(":", 1)[0]
            cpus.update(range(int(a), int(b) + 1, step))
        else:
            cpus.add(int(part))
    return cpus


def read_text(path: Path, default: str | None = None) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return default
