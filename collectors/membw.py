"""Memory bandwidth from uncore perf counters, opened with perf_event_open(2) through ctypes.

Where the kernel exposes a memory-controller PMU in /sys/bus/event_source/devices (Documentation/ABI/testing/
sysfs-bus-event_source-devices-*):
  Intel  uncore_imc_<N>   events/cas_count_read, cas_count_write ("event=0x04,umask=0x03") with a .scale file
                          (6.103515625e-5 = 64 bytes in MiB) and a cpumask naming the CPU to open them on;
  AMD    amd_umc_<N>      (Zen 4+) the UMC CAS command counter, event 0x0a with rdwrmask 1 = reads, 2 = writes,
                          64 bytes per CAS (the encoding of perf's umc_cas_cmd.rd/.wr events);
each counter is opened system-wide (pid = -1, cpu from cpumask), which needs perf_event_paranoid <= 0 or
CAP_PERFMON/CAP_SYS_ADMIN. Virtual machines normally expose no uncore PMU at all: then the collector is
unavailable and says so. Samples hold cumulative bytes per direction; rates are derived by the analyzers.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path

from .proctree import read_text

PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331}
PERF_ATTR_SIZE_VER1 = 72
AMD_CAS_BYTES = 64


class PerfEventAttr(ctypes.Structure):
    # struct perf_event_attr up to config2 (PERF_ATTR_SIZE_VER1, include/uapi/linux/perf_event.h);
    # the flag bitfield is one u64: bit 0 disabled, bit 1 inherit, ... we leave them all 0 (counting, enabled).
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
                ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
                ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64)]


def perf_event_open(pmu_type: int, config: int, pid: int, cpu: int, config1: int = 0) -> int:
    """Open one counting event; returns the fd or raises OSError with the kernel's errno."""
    nr = PERF_EVENT_OPEN.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"perf_event_open syscall number unknown for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    attr = PerfEventAttr(type=pmu_type, size=PERF_ATTR_SIZE_VER1, config=config, config1=config1)
    fd = libc.syscall(nr, ctypes.byref(attr), pid, cpu, -1, 0)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def read_counter(fd: int) -> int:
    return int.from_bytes(os.read(fd, 8), "little")


def encode(format_dir: Path, terms: dict[str, int]) -> tuple[int, int]:
    """(config, config1) from terms like {"event": 4, "umask": 3} and the PMU's format/ files ("config:0-7")."""
    words = {"config": 0, "config1": 0}
    for name, value in terms.items():
        spec = read_text(format_dir / name)
        if spec is None:
            raise ValueError(f"PMU has no format field {name!r}")
        word, bits = spec.split(":", 1)
        shift = 0
        for rng in bits.split(","):  # a field may be split over several bit ranges, low bits first
            lo, _, hi = rng.partition("-")
            lo, hi = int(lo), int(hi or lo)
            width = hi - lo + 1
            words[word] = words.get(word, 0) | (((value >> shift) & ((1 << width) - 1)) << lo)
            shift += width
    return words["config"], words["config1"]


def parse_event(text: str) -> dict[str, int]:
    """'event=0x04,umask=0x03' -> {"event": 4, "umask": 3}."""
    out = {}
    for term in text.strip().split(","):
        k, _, v = term.partition("=")
        out[k.strip()] = int(v, 0) if v else 1
    return out


def find_counters(sysfs_root: str) -> list[dict]:
    """Every memory-controller counter the kernel exposes: pmu, direction, type, config, cpu, scale to bytes."""
    base = Path(sysfs_root) / "bus" / "event_source" / "devices"
    out = []
    try:
        pmus = sorted(os.listdir(base))
    except OSError:
        return out
    for pmu in pmus:
        d = base / pmu
        pmu_type = read_text(d / "type")
        cpu = (read_text(d / "cpumask", "0") or "0").split(",")[0].split("-")[0]
        if pmu_type is None:
            continue
        if pmu.startswith("uncore_imc") and "free_running" not in pmu:
            for direction, event in (("read", "cas_count_read"), ("write", "cas_count_write")):
                spec = read_text(d / "events" / event)
                if spec is None:
                    continue
                scale = float(read_text(d / "events" / f"{event}.scale", "1") or 1)
                unit = read_text(d / "events" / f"{event}.unit", "") or ""
                to_bytes = scale * (2**20 if unit.startswith("MiB") else 1)
                config, config1 = encode(d / "format", parse_event(spec))
                out.append({"pmu": pmu, "direction": direction, "type": int(pmu_type), "config": config,
                            "config1": config1, "cpu": int(cpu), "bytes_per_count": to_bytes})
        elif pmu.startswith("amd_umc"):
            for direction, mask in (("read", 1), ("write", 2)):
                try:
                    config, config1 = encode(d / "format", {"event": 0x0A, "rdwrmask": mask})
                except ValueError:
                    continue
                out.append({"pmu": pmu, "direction": direction, "type": int(pmu_type), "config": config,
                            "config1": config1, "cpu": int(cpu), "bytes_per_count": AMD_CAS_BYTES})
    return out


def _paranoid(proc_root: str) -> int | None:
    text = read_text(Path(proc_root) / "sys" / "kernel" / "perf_event_paranoid")
    return int(text) if text and text.lstrip("-").isdigit() else None


def unavailable_reason(sysfs_root: str = "/sys", proc_root: str = "/proc") -> str:
    """Why no counter can be read, or "" when some can be tried."""
    base = Path(sysfs_root) / "bus" / "event_source" / "devices"
    paranoid = _paranoid(proc_root)
    par = "" if paranoid is None else f"; perf_event_paranoid={paranoid}"
    if paranoid is not None and paranoid > 0 and os.geteuid() != 0:
        par += " (system-wide uncore counters need <= 0 or CAP_PERFMON)"
    if not base.is_dir():
        return f"no {base}: the kernel has no perf_event support{par}"
    if not find_counters(sysfs_root):
        pmus = ", ".join(sorted(os.listdir(base))) or "none"
        return (f"no memory-controller PMU (uncore_imc_*, amd_umc_*) in {base} (present: {pmus}); "
                f"virtual machines usually hide uncore counters{par}")
    if paranoid is not None and paranoid > 0 and os.geteuid() != 0:
        return f"perf_event_paranoid={paranoid}: system-wide uncore counters need <= 0 or CAP_PERFMON"
    return ""


class MemBandwidthSampler:
    name = "membw"
    enable_hint = ("bare metal with an uncore memory-controller PMU, and `sysctl kernel.perf_event_paranoid=0` "
                   "(or run as root / grant CAP_PERFMON)")

    def __init__(self, sysfs_root: str = "/sys"):
        self.counters = []
        errors = []
        for c in find_counters(sysfs_root):
            try:
                fd = perf_event_open(c["type"], c["config"], -1, c["cpu"], c["config1"])
            except OSError as e:
                errors.append(f"{c['pmu']}/{c['direction']}: {e.strerror}")
                continue
            self.counters.append((c, fd))
        if not self.counters:
            raise OSError(errno.EACCES, "no uncore counter could be opened: " + "; ".join(errors[:3]))

    @staticmethod
    def available(sysfs_root: str = "/sys", proc_root: str = "/proc") -> tuple[bool, str]:
        reason = unavailable_reason(sysfs_root, proc_root)
        return (not reason), reason

    def sample(self) -> dict:
        total = {"read": 0.0, "write": 0.0}
        for c, fd in self.counters:
            total[c["direction"]] += read_counter(fd) * c["bytes_per_count"]
        return {"read_bytes": total["read"], "write_bytes": total["write"], "counters": len(self.counters)}

    def close(self) -> None:
        for _, fd in self.counters:
            os.close(fd)
        self.counters = []
