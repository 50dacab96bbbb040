"""`haiprof doctor`: which collectors work on this host, why not, how to enable them, and the host facts the
analyzers use (cores, NUMA nodes, GPUs, NICs), and what torch brings: its CUDA build and whether a device is
usable (torch.cuda.is_available(), which creates no CUDA context), torch.profiler's Kineto backend (the
tracing window), and CUPTI (Kineto's kernel-level view of CUDA builds)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import OneLineParser


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


CUPTI_DIRS = ("torch/lib", "nvidia/cuda_cupti/lib", "nvidia/cu13/lib", "nvidia/cu12/lib")


def _find_cupti() -> str | None:
    """Where libcupti is: beside torch's libraries, in the nvidia-cuda-cupti wheel, under CUDA_HOME, or on the
    loader's path; None when nowhere."""
    import ctypes.util
    import glob
    import site
    import sys
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    cands = [os.path.join(r, d) for r in roots if isinstance(r, str) for d in CUPTI_DIRS]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands += [os.path.join(home, "extras", "CUPTI", "lib64"), os.path.join(home, "lib64")]
    for d in cands:
        hits = sorted(glob.glob(os.path.join(d, "libcupti.so*")))
        if hits:
            return hits[0]
    return ctypes.util.find_library("cupti")


def torch_facts() -> dict:
    """torch's version, CUDA build and availability, Kineto, CUPTI. Never raises (a broken torch is a fact)."""
    try:
        import torch
    except Exception as e:
        return {"torch": None, "error": f"import torch failed: {type(e).__name__}: {e}"}
    out: dict = {"torch": torch.__version__, "cuda_build": getattr(torch.version, "cuda", None)}
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())   # no CUDA context is created
        out["cuda_devices"] = torch.cuda.device_count() if out["cuda_available"] else 0
    except Exception as e:
        out["cuda_available"], out["cuda_error"] = False, f"{type(e).__name__}: {e}"
    try:
        kineto = getattr(torch.autograd, "kineto_available", None) or torch._C._autograd._kineto_available
        out["kineto"] = bool(kineto())
        import torch.profiler
        out["profiler_activities"] = sorted(a.name for a in torch.profiler.supported_activities())
    except Exception as e:
        out["kineto"], out["kineto_error"] = False, f"{type(e).__name__}: {e}"
    if out["cuda_build"]:
        where = _find_cupti()
        out["cupti"] = {"found": where is not None, "where": where}
    else:
        out["cupti"] = {"found": None, "where": None, "note": "not applicable: CPU-only torch build"}
    return out


def torch_lines(t: dict) -> list[str]:
    if not t.get("torch"):
        return [f"  torch: unavailable ({t.get('error')})"]
    lines = [f"  torch: {t['torch']}"]
    if not t.get("cuda_build"):
        lines.append("  CUDA: CPU-only torch build (no GPU collectors, CUDA events or kernel traces)")
    else:
        avail = (f"available, {t.get('cuda_devices')} device(s)" if t.get("cuda_available")
                 else "not available (" + (t.get("cuda_error") or "no usable device or driver") + ")")
        lines.append(f"  CUDA: built for {t['cuda_build']}, {avail}")
    if t.get("kineto"):
        acts = ", ".join(t.get("profiler_activities") or [])
        lines.append(f"  torch.profiler (Kineto): built in, activities {acts} (--trace-steps works)")
    else:
        lines.append("  torch.profiler (Kineto): not built in (" + (t.get("kineto_error") or "this torch build")
                     + "): --trace-steps records nothing")
    c = t.get("cupti") or {}
    if c.get("found") is None:
        lines.append(f"  CUPTI: {c.get('note')}")
    elif c["found"]:
        lines.append(f"  CUPTI: {c['where']}")
    else:
        lines.append("  CUPTI: not found: the tracing window has no GPU kernels "
                     "(install the nvidia-cuda-cupti wheel matching torch's CUDA, or the CUDA toolkit's CUPTI)")
    return lines


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
    return {"collectors": rows, "host": _host_facts(), "torch": torch_facts()}


def cmd_doctor(argv: list[str]) -> int:
    p = OneLineParser(prog="haiprof doctor", description="Check which collectors work on this host.")
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
    print("torch:")
    for line in torch_lines(r["torch"]):
        print(line)
    return 0
