"""CPU package energy from RAPL via powercap (Documentation/power/powercap/powercap.rst).

/sys/class/powercap/<zone>/energy_uj is a cumulative microjoule counter that wraps at max_energy_range_uj; the
analyzers turn consecutive readings into joules with that wrap. Only top-level zones (package-N, psys) are sampled:
their sub-zones (core, uncore, dram) are parts of the package and would double-count. Since Linux 5.10 energy_uj
is readable by root only (a side channel, CVE-2020-8694), hence the reason when it is not.
"""
from __future__ import annotations

import os
from pathlib import Path

from .proctree import read_text


def _zones(sysfs_root: str) -> list[Path]:
    base = Path(sysfs_root) / "class" / "powercap"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    # intel-rapl:0 is a package, intel-rapl:0:0 its sub-zone; amd uses the same "intel-rapl" control type.
    return [base / n for n in names if n.count(":") == 1 and (base / n / "energy_uj").exists()]


class RaplSampler:
    name = "rapl"
    enable_hint = ("needs a bare-metal host exposing RAPL (intel_rapl_common / amd_energy drivers) and read access "
                   "to energy_uj (root since Linux 5.10)")

    def __init__(self, sysfs_root: str = "/sys"):
        self.zones = []
        for z in _zones(sysfs_root):
            max_range = read_text(z / "max_energy_range_uj")
            self.zones.append((z.name, read_text(z / "name", z.name), z / "energy_uj",
                               int(max_range) if max_range and max_range.isdigit() else None))

    @staticmethod
    def available(sysfs_root: str = "/sys") -> tuple[bool, str]:
        base = Path(sysfs_root) / "class" / "powercap"
        if not base.is_dir():
            return False, f"no {base} (no powercap driver: a VM or a kernel without intel_rapl)"
        zones = _zones(sysfs_root)
        if not zones:
            return False, f"no RAPL energy_uj under {base}"
        try:
            int((zones[0] / "energy_uj").read_text())
        except PermissionError:
            return False, f"{zones[0] / 'energy_uj'} is not readable (root only since Linux 5.10)"
        except (OSError, ValueError) as e:
            return False, f"{zones[0] / 'energy_uj'}: {e}"
        return True, ""

    def sample(self) -> dict:
        zones = {}
        for zid, name, path, max_range in self.zones:
            try:
                zones[zid] = {"name": name, "energy_uj": int(path.read_text()), "max_energy_range_uj": max_range}
            except (OSError, ValueError):
                continue
        return {"zones": zones}
