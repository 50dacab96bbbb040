"""`haiprof doctor`: which collectors work on this host, why not, how to enable them, and the host facts the
analyzers use (cores, NUMA nodes, GPUs, NICs)."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def _host_facts(sysfs_root: str = "/sys") -> dict:
    from haiprof.collectors.infiniband import NicSampler, _ib_ports, parse_rate_gbps
    from haiprof.collectors.numa import pci_devices, read_nodes
    from haiprof.collectors.proctree import read_text
    nodes = read_nodes(sysfs_root)
    devices = pci_devices(sysfs_root)
    nics = []
    for p in NicSampler(sysfs_root).nics:
        speed = read_text(p / "speed")
        nics.append({"name": p.name, "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit()
                     and int(speed) > 0 else None, "operstate": read_text(p / "operstate")})
    ib = [{"port": f"{dev}/{port}", "rate_gbps": parse_rate_gbps(read_text(path / "rate")),
           "state": read_text(path / "state")} for dev, port, path in _ib_ports(sysfs_root)]
    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "numa_nodes": {str(n): read_text(p / "cpulist") for n, p in nodes.items()},
        "gpus_pci": [{"bdf": d["bdf"], "numa_node": d["numa_node"], "vendor": d["vendor"]}
                     for d in devices if d["kind"] == "gpu"],
        "gpus_nvml": _nvml_gpus(),
        "nics": nics, "infiniband_ports": ib,
        "perf_event_paranoid": read_text(Path("/proc/sys/kernel/perf_event_paranoid")),
    }


def _nvml_gpus() -> list:
    from haiprof.collectors.gpu_nvml import Nvml
    nvml = Nvml()
    ok, _ = nvml.init()
    if not ok:
        return []
    out = []
    count, _ = nvml.call("nvmlDeviceGetCount")
    for i in range(count or 0):
        h, _ = nvml.call("nvmlDeviceGetHandleByIndex", i)
        name, _ = nvml.call("nvmlDeviceGetName", h) if h is not None else (None, None)
        out.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name})
    nvml.shutdown()
    return out


def report() -> dict:
    from haiprof.collectors.system import SystemSampler
    from ..runtime.hwcollectors import hardware_classes
    rows = []
    for cls in [SystemSampler, *hardware_classes()]:
        try:
            ok, reason = cls.available()
        except Exception as e:  # doctor must list every collector even if a check itself breaks
            ok, reason = False, f"availability check failed: {type(e).__name__}: {e}"
        rows.append({"collector": cls.name, "available": ok, "reason": reason,
                     "how_to_enable": "" if ok else getattr(cls, "enable_hint", "")})
    return {"collectors": rows, "host": _host_facts()}


def cmd_doctor(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="haiprof doctor", description="Check which collectors work on this host.")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    r = report()
    if ns.json:
        print(json.dumps(r, indent=1))
        return 0
    print("collectors:")
    for c in r["collectors"]:
        print(f"  {c['collector']:<11} {'available' if c['available'] else 'unavailable'}"
              + (f": {c['reason']}" if c["reason"] else ""))
        if c["how_to_enable"]:
            print(f"  {'':<11} to enable: {c['how_to_enable']}")
    h = r["host"]
    print("host:")
    print(f"  cores: {h['cores']} ({h['cores_usable']} usable by this process)")
    print(f"  NUMA nodes: {len(h['numa_nodes'])} " + ", ".join(f"node{n}: cpus {c}" for n, c in h["numa_nodes"].items()))
    gpus = h["gpus_nvml"] or h["gpus_pci"]
    print(f"  GPUs: {len(gpus)}" + "".join(f"\n    {g}" for g in gpus))
    print("  NICs: " + (", ".join(f"{n['name']} ({n['speed_mbps'] or '?'} Mb/s, {n['operstate']})" for n in h["nics"])
                         or "none with a device"))
    print("  InfiniBand ports: " + (", ".join(f"{i['port']} {i['rate_gbps']} Gb/s {i['state']}"
                                             for i in h["infiniband_ports"]) or "none"))
    print(f"  perf_event_paranoid: {h['perf_event_paranoid']}")
    return 0
