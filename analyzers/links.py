"""InfiniBand/RoCE ports and Ethernet NICs: bytes/s per port and the share of link capacity used."""
from __future__ import annotations

from . import counters
from .findings import Finding

IB_WORD = 4  # port_xmit_data / port_rcv_data count 4-byte words


def _port_rates(samples: list[dict], group: str, key: str, tx: str, rx: str, scale: float, width_key=None):
    per = [{"t_ns": s["t_ns"], **(s.get(group, {}).get(key) or {})} for s in samples if "t_ns" in s]
    per = [p for p in per if tx in p]
    width = (lambda p: p.get(width_key, 64)) if width_key else None
    t = counters.rate_series(per, lambda p: p.get(tx), width_of=width, scale=scale)
    r = counters.rate_series(per, lambda p: p.get(rx), width_of=width, scale=scale)
    return per, t, r


def _summary(per, t, r, capacity_bps) -> dict:
    peak = max(t["rate"] + r["rate"], default=0.0)
    out = {"tx_bytes_per_s_mean": counters.mean_rate(t), "rx_bytes_per_s_mean": counters.mean_rate(r),
           "peak_bytes_per_s": peak, "capacity_bytes_per_s": capacity_bps,
           "peak_share_of_capacity": (peak / capacity_bps) if capacity_bps else None,
           "counter_notes": {k: t["notes"][k] + r["notes"][k] for k in t["notes"]}}
    return out


def analyze(ib_samples: list[dict], nic_samples: list[dict]) -> tuple[dict, dict]:
    """({"infiniband": {port: summary}, "nic": {...}}, timelines {"links": [(label, t_ns list, bytes/s)]})."""
    summary: dict = {"infiniband": {}, "nic": {}}
    series = []
    for key in sorted({k for s in ib_samples for k in s.get("ports", {})}):
        per, t, r = _port_rates(ib_samples, "ports", key, "xmit_words", "rcv_words", IB_WORD, "width")
        gbps = next((p.get("rate_gbps") for p in reversed(per) if p.get("rate_gbps")), None)
        s = _summary(per, t, r, gbps * 1e9 / 8 if gbps else None)
        s.update(rate_gbps=gbps, state=per[-1].get("state") if per else None,
                 link_layer=per[-1].get("link_layer") if per else None)
        summary["infiniband"][key] = s
        series += [(f"{key} tx", t), (f"{key} rx", r)]
    for key in sorted({k for s in nic_samples for k in s.get("nics", {})}):
        per, t, r = _port_rates(nic_samples, "nics", key, "tx_bytes", "rx_bytes", 1.0)
        mbps = next((p.get("speed_mbps") for p in reversed(per) if p.get("speed_mbps")), None)
        s = _summary(per, t, r, mbps * 1e6 / 8 if mbps else None)
        s.update(speed_mbps=mbps, operstate=per[-1].get("operstate") if per else None)
        summary["nic"][key] = s
        series += [(f"{key} tx", t), (f"{key} rx", r)]
    return summary, {"links": series}


def _link(severity: str, message: str, evidence: dict, fixes=()) -> dict:
    """The link finding (a busy port, or one whose counters saturated): one builder for both."""
    return Finding(kind="link", severity=severity, message=message, evidence=evidence, fixes=list(fixes)).as_dict()


def findings(summary: dict, busy: float) -> list[dict]:
    out = []
    for group, label in (("infiniband", "InfiniBand port"), ("nic", "NIC")):
        for key, s in summary.get(group, {}).items():
            share = s.get("peak_share_of_capacity")
            if share is not None and share >= busy:
                cap = s["capacity_bytes_per_s"] * 8 / 1e9
                out.append(_link("moderate", f"{label} {key} peaked at {100 * share:.0f}% of its {cap:.0f} Gb/s "
                                             f"link ({s['peak_bytes_per_s'] / 1e9:.2f} GB/s)",
                                 {"port": key, **{k: s[k] for k in ("peak_bytes_per_s", "capacity_bytes_per_s",
                                                                    "tx_bytes_per_s_mean", "rx_bytes_per_s_mean")}},
                                 ["compress", "bucket"]))
            if s["counter_notes"].get("saturated"):
                out.append(_link("info", f"{label} {key}: 32-bit data counters saturated at 0xFFFFFFFF, so its rates "
                                         f"are lower bounds (the HCA lacks extended 64-bit counters)",
                                 {"port": key, "notes": s["counter_notes"]}))
    return out
