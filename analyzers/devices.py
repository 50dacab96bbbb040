"""GPU, disk and memory-bandwidth summaries and timelines from their collectors' samples."""
from __future__ import annotations

import statistics

from . import counters

SECTOR = 512
THROTTLE_BITS = {  # nvmlClocksEventReason* / nvmlClocksThrottleReason* (nvml.h)
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_throttle(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def gpus(samples: list[dict], t0_ns: int | None = None, steady_ns: tuple | None = None) -> tuple[dict, dict]:
    """(summary, timelines) per GPU. Timelines count seconds from t0_ns (default: the first sample). steady_ns,
    (start, end) of the steady steps, gives the `*_steady_mean` figures: a whole-run mean of SM utilization
    averages in seconds of CUDA initialisation and model loading, when the GPU sits idle by necessity."""
    samples = [s for s in samples if "t_ns" in s]
    if not samples:
        return {}, {}
    t0 = samples[0]["t_ns"] if t0_ns is None else t0_ns
    info = {i["index"]: i for s in samples for i in s.get("info", [])}
    unsupported = {}
    for s in samples:
        unsupported.update(s.get("unsupported", {}))
    out, tl = {}, {"util": [], "power": [], "memory": []}
    for idx in sorted({d["index"] for s in samples for d in s.get("devices", [])}):
        per = [{"t_ns": s["t_ns"], **d} for s in samples for d in s.get("devices", []) if d["index"] == idx]
        reasons = set()
        for p in per:
            reasons.update(decode_throttle(p.get("throttle_reasons") or 0))
        tx = counters.rate_series(per, lambda p: p.get("pcie_tx_bytes"))
        rx = counters.rate_series(per, lambda p: p.get("pcie_rx_bytes"))
        name = (info.get(idx) or {}).get("name") or f"GPU {idx}"
        during = [p for p in per if steady_ns and steady_ns[0] < p["t_ns"] <= steady_ns[1]]
        out[str(idx)] = {
            "name": name, "pci_bus_id": (info.get(idx) or {}).get("pci_bus_id"),
            "sm_util_pct_mean": _mean(p.get("sm_util_pct") for p in per),
            "power_w_mean": (_mean(p.get("power_mw") for p in per) or 0) / 1e3 or None,
            # over the steady steps only (None when no sample fell inside them: too short a run)
            "sm_util_pct_steady_mean": _mean(p.get("sm_util_pct") for p in during),
            "power_w_steady_mean": (_mean(p.get("power_mw") for p in during) or 0) / 1e3 or None,
            "steady_samples": len(during),
            "power_w_max": max((p.get("power_mw") or 0 for p in per), default=0) / 1e3 or None,
            "mem_used_bytes_max": max((p.get("mem_used_bytes") or 0 for p in per), default=0),
            "mem_total_bytes": next((p["mem_total_bytes"] for p in per if "mem_total_bytes" in p), None),
            "proc_mem_bytes_max": max((p.get("proc_mem_bytes") or 0 for p in per), default=0),
            "temperature_c_max": max((p.get("temperature_c") or 0 for p in per), default=None),
            "sm_clock_mhz_mean": _mean(p.get("sm_clock_mhz") for p in per),
            "throttle_reasons_seen": sorted(reasons - {"gpu_idle"}),
            "pcie_tx_bytes_per_s_mean": counters.mean_rate(tx) if tx["rate"] else
            (_mean(p.get("pcie_tx_kbps") for p in per) or 0) * 1e3 or None,
            "pcie_rx_bytes_per_s_mean": counters.mean_rate(rx) if rx["rate"] else
            (_mean(p.get("pcie_rx_kbps") for p in per) or 0) * 1e3 or None,
        }
        t = [(p["t_ns"] - t0) / 1e9 for p in per]
        label = f"GPU {idx}"
        tl["util"].append((label, t, [p.get("sm_util_pct") for p in per]))
        tl["power"].append((label, t, [(p.get("power_mw") or 0) / 1e3 if p.get("power_mw") is not None else None
                                       for p in per]))
        tl["memory"].append((label, t, [(p.get("mem_used_bytes") or 0) / 2**30 for p in per]))
    return {"devices": out, "unsupported": unsupported}, tl


def disks(samples: list[dict]) -> tuple[dict, list]:
    samples = [s for s in samples if "t_ns" in s]
    out, series = {}, []
    for dev in sorted({d for s in samples for d in s.get("devices", {})}):
        def field(i):
            return lambda s: (s.get("devices", {}).get(dev) or [None] * 6)[i]
        rd = counters.rate_series(samples, field(1), scale=SECTOR)
        wr = counters.rate_series(samples, field(3), scale=SECTOR)
        ops = counters.rate_series(samples, field(0))
        busy = counters.rate_series(samples, field(4), scale=1e-3)  # ms doing I/O per s -> utilization
        out[dev] = {"read_bytes_per_s_mean": counters.mean_rate(rd), "write_bytes_per_s_mean": counters.mean_rate(wr),
                    "reads_per_s_mean": counters.mean_rate(ops), "busy_share_mean": counters.mean_rate(busy),
                    "read_bytes_per_s_max": max(rd["rate"], default=None)}
        series += [(f"{dev} read", rd), (f"{dev} write", wr)]
    return out, series


def membw(samples: list[dict]) -> tuple[dict, list]:
    samples = [s for s in samples if "t_ns" in s]
    rd = counters.rate_series(samples, lambda s: s.get("read_bytes"))
    wr = counters.rate_series(samples, lambda s: s.get("write_bytes"))
    if not rd["rate"]:
        return {}, []
    return ({"read_bytes_per_s_mean": counters.mean_rate(rd), "write_bytes_per_s_mean": counters.mean_rate(wr),
             "total_bytes_per_s_max": max((a + b for a, b in zip(rd["rate"], wr["rate"])), default=None)},
            [("memory read", rd), ("memory write", wr)])
