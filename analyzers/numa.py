"""NUMA: cross-node allocation rate (numastat deltas) and placement of the training processes vs GPUs/NICs."""
from __future__ import annotations

from . import counters
from .findings import Finding

PAGE = 4096  # numastat counts pages; base page size on x86-64 and most arm64 kernels


def parse_cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            cpus.update(range(int(a), int(b.split(":")[0]) + 1))
        elif part.strip():
            cpus.add(int(part))
    return cpus


def cross_node(samples: list[dict]) -> dict:
    samples = [s for s in samples if "t_ns" in s and s.get("nodes")]
    if len(samples) < 2:
        return {"nodes": len(samples[0]["nodes"]) if samples else 0, "samples": len(samples)}
    nodes = sorted(samples[0]["nodes"])
    dt = (samples[-1]["t_ns"] - samples[0]["t_ns"]) / 1e9
    tot = {k: 0 for k in ("local_node", "other_node", "numa_miss", "numa_hit")}
    for n in nodes:
        for k in tot:
            d, _ = counters.delta(samples[0]["nodes"].get(n, {}).get(k, 0), samples[-1]["nodes"].get(n, {}).get(k, 0))
            tot[k] += d or 0
    allocs = tot["local_node"] + tot["other_node"]
    series = []
    for n in nodes:
        r = counters.rate_series(samples, lambda s: s["nodes"].get(n, {}).get("other_node"), scale=PAGE)
        series.append((f"node {n} remote allocations", r))
    return {"nodes": len(nodes), "samples": len(samples), "duration_s": dt,
            "cross_node_pages_per_s": tot["other_node"] / dt if dt > 0 else None,
            "cross_node_bytes_per_s": tot["other_node"] * PAGE / dt if dt > 0 else None,
            "cross_node_share": tot["other_node"] / allocs if allocs else 0.0,
            "numa_miss_pages": tot["numa_miss"], "_series": series}


def _norm_bdf(bus_id: str | None) -> str:
    # NVML says "00000000:3B:00.0", sysfs "0000:3b:00.0": compare the bus:device.function part.
    return (bus_id or "").lower()[-7:]


def placement(samples: list[dict], gpu_samples: list[dict]) -> dict:
    recs = [s["placement"] for s in samples if isinstance(s.get("placement"), dict)]
    if not recs:
        return {"checked": False, "reason": "no placement record"}
    last = recs[-1]
    node_cpus = {int(n): parse_cpulist(c) for n, c in last.get("node_cpus", {}).items()}
    all_nodes = set(node_cpus)
    procs = {}
    for rec in recs:  # every process seen during the run (workers come and go)
        for p in rec.get("processes", []):
            procs[p["pid"]] = p
    used_bus = set()
    for s in gpu_samples:
        for d in s.get("devices", []):
            if d.get("proc_mem_bytes"):
                used_bus.add(d.get("index"))
    info = next((s["info"] for s in gpu_samples if s.get("info")), [])
    used_bdfs = {_norm_bdf(i.get("pci_bus_id")) for i in info if i.get("index") in used_bus}
    gpus = [d for d in last.get("devices", []) if d["kind"] == "gpu"]
    if used_bdfs:
        gpus = [d for d in gpus if _norm_bdf(d["bdf"]) in used_bdfs] or gpus
    nics = [d for d in last.get("devices", []) if d["kind"] == "nic" and
            (d.get("class", "").startswith("0x0207") or d.get("vendor") == "0x15b3")]
    out_procs = []
    for pid, p in sorted(procs.items()):
        cpus = parse_cpulist(p.get("cpus") or "")
        nodes = sorted(n for n, c in node_cpus.items() if cpus & c)
        role = "training process" if pid == last.get("root_pid") else "DataLoader worker / child"
        out_procs.append({"pid": pid, "comm": p.get("comm"), "role": role, "cpus": p.get("cpus"),
                          "nodes": nodes, "pinned": set(nodes) != all_nodes})
    return {"checked": True, "numa_nodes": len(all_nodes), "processes": out_procs,
            "gpus": [{"bdf": d["bdf"], "numa_node": d["numa_node"]} for d in gpus],
            "nics": [{"bdf": d["bdf"], "numa_node": d["numa_node"]} for d in nics]}


def findings(cross: dict, place: dict, cross_moderate: float) -> list[dict]:
    out = []
    share = cross.get("cross_node_share") or 0.0
    if cross.get("nodes", 0) > 1 and share >= cross_moderate:
        out.append(Finding(kind="numa", severity="moderate", share=0.0,
                           message=f"{100 * share:.0f}% of memory allocations went to a remote NUMA node "
                                   f"({(cross.get('cross_node_bytes_per_s') or 0) / 2**20:.1f} MiB/s)",
                           evidence={k: v for k, v in cross.items() if not k.startswith("_")},
                           fixes=[]).as_dict())
    if not place.get("checked") or place.get("numa_nodes", 0) < 2:
        return out
    for kind, devs in (("GPU", place["gpus"]), ("NIC", place["nics"])):
        dev_nodes = {d["numa_node"] for d in devs if d["numa_node"] >= 0}
        if not dev_nodes:
            continue
        bad = [p for p in place["processes"] if p["pinned"] and not dev_nodes & set(p["nodes"])]
        if not bad:
            continue
        roles = sorted({p["role"] for p in bad})
        node = sorted(dev_nodes)[0]
        out.append(Finding(kind="placement", severity="moderate" if kind == "GPU" else "info", share=0.0,
                           message=f"{', '.join(roles)} pinned to NUMA node(s) "
                                   f"{sorted({n for p in bad for n in p['nodes']})} while the {kind} "
                                   f"({', '.join(d['bdf'] for d in devs)}) is on node {sorted(dev_nodes)}: every "
                                   f"copy crosses the socket link; pin to node {node} (numactl --cpunodebind={node} "
                                   f"--membind={node}, or DataLoader worker_init_fn with os.sched_setaffinity)",
                           evidence={"processes": [{k: p[k] for k in ("pid", "role", "cpus", "nodes")} for p in bad],
                                     "devices": devs},
                           fixes=[]).as_dict())
    return out
