"""InfiniBand / RoCE port counters and Ethernet NIC counters from sysfs.

InfiniBand (Documentation/ABI/stable/sysfs-class-infiniband):
  /sys/class/infiniband/<dev>/ports/<port>/counters/port_xmit_data, port_rcv_data   octets divided by 4 (IBA
      PortXmitData/PortRcvData count 32-bit words); 32 bits wide on HCAs without extended counters, where they
      saturate at 0xFFFFFFFF, 64 bits where the device supports PortCountersExtended (mlx5 does).
  .../ports/<port>/counters_ext/port_xmit_data_64, port_rcv_data_64   the explicit 64-bit counters (qib, older
      kernels); preferred when present.
  .../ports/<port>/rate    e.g. "100 Gb/sec (4X EDR)";  .../state   e.g. "4: ACTIVE";  .../link_layer
Ethernet (Documentation/ABI/testing/sysfs-class-net-statistics, sysfs-class-net):
  /sys/class/net/<if>/statistics/rx_bytes, tx_bytes (bytes, 64-bit), /sys/class/net/<if>/speed (Mb/s; -1 or
  unreadable when unknown), operstate.
Samples hold raw counters plus their width; rates and wrap handling are the analyzers' job.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .proctree import read_text

_RATE = re.compile(r"([\d.]+)\s*Gb/sec")


def parse_rate_gbps(text: str | None) -> float | None:
    m = _RATE.search(text or "")
    return float(m.group(1)) if m else None


def _ib_ports(sysfs_root: str) -> list[tuple[str, str, Path]]:
    base = Path(sysfs_root) / "class" / "infiniband"
    out = []
    try:
        devs = sorted(os.listdir(base))
    except OSError:
        return out
    for dev in devs:
        try:
            ports = sorted(os.listdir(base / dev / "ports"), key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            continue
        out += [(dev, port, base / dev / "ports" / port) for port in ports]
    return out


def _counter_paths(port: Path, which: str) -> tuple[Path, int]:
    ext = port / "counters_ext" / f"port_{which}_data_64"
    if ext.exists():
        return ext, 64
    return port / "counters" / f"port_{which}_data", 32  # may really be 64-bit: the analyzer checks the values


class InfinibandSampler:
    name = "infiniband"
    enable_hint = "needs an InfiniBand/RoCE HCA with its driver loaded (e.g. mlx5_ib), visible in /sys/class/infiniband"

    def __init__(self, sysfs_root: str = "/sys"):
        self.ports = []
        for dev, port, path in _ib_ports(sysfs_root):
            (xmit, width), (rcv, _) = _counter_paths(path, "xmit"), _counter_paths(path, "rcv")
            self.ports.append((f"{dev}/{port}", path, xmit, rcv, width))

    @staticmethod
    def available(sysfs_root: str = "/sys") -> tuple[bool, str]:
        base = Path(sysfs_root) / "class" / "infiniband"
        if not base.is_dir():
            return False, f"no {base} (no InfiniBand/RoCE device or driver)"
        if not _ib_ports(sysfs_root):
            return False, f"no ports under {base}/*/ports"
        return True, ""

    def sample(self) -> dict:
        ports = {}
        for key, path, xmit, rcv, width in self.ports:
            try:
                tx, rx = int(xmit.read_text()), int(rcv.read_text())
            except (OSError, ValueError):
                continue
            # rate and state change rarely but can (link retrain): a few small reads per port per sample.
            ports[key] = {"xmit_words": tx, "rcv_words": rx, "width": width,
                          "rate_gbps": parse_rate_gbps(read_text(path / "rate")),
                          "state": read_text(path / "state", ""),
                          "link_layer": read_text(path / "link_layer", "")}
        return {"ports": ports}


def _nics(sysfs_root: str) -> list[Path]:
    base = Path(sysfs_root) / "class" / "net"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    # Physical NICs have a "device" link; bridges, veths, lo and ifb do not.
    return [base / n for n in names if (base / n / "device").exists() and (base / n / "statistics").is_dir()]


class NicSampler:
    name = "nic"
    enable_hint = "needs network interfaces backed by a device in /sys/class/net/*/device"

    def __init__(self, sysfs_root: str = "/sys"):
        self.nics = _nics(sysfs_root)

    @staticmethod
    def available(sysfs_root: str = "/sys") -> tuple[bool, str]:
        base = Path(sysfs_root) / "class" / "net"
        if not base.is_dir():
            return False, f"no {base}"
        if not _nics(sysfs_root):
            return False, f"no interface with a device link under {base} (only virtual interfaces)"
        return True, ""

    def sample(self) -> dict:
        nics = {}
        for p in self.nics:
            try:
                rx = int((p / "statistics" / "rx_bytes").read_text())
                tx = int((p / "statistics" / "tx_bytes").read_text())
            except (OSError, ValueError):
                continue
            speed = read_text(p / "speed")  # EINVAL on virtual or down links: unknown, not zero
            try:
                mbps = int(speed) if speed is not None else None
            except ValueError:
                mbps = None
            nics[p.name] = {"rx_bytes": rx, "tx_bytes": tx, "speed_mbps": mbps if mbps and mbps > 0 else None,
                            "operstate": read_text(p / "operstate", "")}
        return {"nics": nics}
