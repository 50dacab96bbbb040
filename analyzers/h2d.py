"""Host-to-device copies from pageable memory: the CUDA driver stages them through a pinned bounce buffer, so they
are synchronous with the host and cannot overlap compute. Pure functions on recorded data.

Evidence, either is enough:
  - the trace: Kineto names each copy by its memory kinds, "Memcpy HtoD (Pageable -> Device)" against
    "Memcpy HtoD (Pinned -> Device)", and newer versions also put them in args ("src_kind"/"dst_kind");
  - the DataLoader: pin_memory=False (its constructor argument) for a run that copies batches to a GPU.
The fix for both is `prefetch`: pinned memory and non-blocking copies on a side stream, overlapped with compute.
"""
from __future__ import annotations

from . import thresholds as T
from .findings import Finding


def _kinds(ev: dict) -> tuple[str | None, str | None]:
    args = ev.get("args") or {}
    src, dst = args.get("src_kind") or args.get("Src Kind"), args.get("dst_kind") or args.get("Dst Kind")
    name = ev.get("name") or ""
    if (src is None or dst is None) and "(" in name and "->" in name:
        inner = name[name.rfind("(") + 1:name.rfind(")")]
        a, _, b = inner.partition("->")
        src, dst = src or a.strip(), dst or b.strip()
    return src, dst


def is_htod(ev: dict) -> bool:
    name = ev.get("name") or ""
    return ev.get("cat") in ("gpu_memcpy", "Memcpy") and ("HtoD" in name or "H2D" in name)


def pageable_copies(events) -> dict:
    """Host-to-device copies by source memory kind: counts, bytes and time (µs) for pageable and pinned."""
    out = {"copies": 0, "pageable": 0, "pinned": 0, "pageable_bytes": 0, "pinned_bytes": 0,
           "pageable_us": 0.0, "pinned_us": 0.0}
    for ev in events:
        if not isinstance(ev, dict) or not is_htod(ev):
            continue
        out["copies"] += 1
        src, _ = _kinds(ev)
        kind = "pageable" if (src or "").lower() == "pageable" else "pinned" if (src or "").lower() == "pinned" \
            else None
        if kind is None:
            continue
        out[kind] += 1
        out[f"{kind}_bytes"] += int((ev.get("args") or {}).get("bytes") or 0)
        out[f"{kind}_us"] += float(ev.get("dur") or 0.0)
    out["pageable_share"] = out["pageable"] / out["copies"] if out["copies"] else None
    return out


def loader_pin_memory(records) -> bool | None:
    """False when a DataLoader of the run had pin_memory off ("@loader" marks, field 5), True when all had it on,
    None for runs without the mark."""
    flags = [r[4] for r in records if isinstance(r, (list, tuple)) and len(r) >= 5 and r[0] == "@loader"
             and isinstance(r[4], bool)]
    return None if not flags else all(flags)


def pageable_finding(copies: dict, loader_pin_memory: bool | None, traced_us: float | None = None) -> dict | None:
    """A finding (fix: prefetch) when batches reach the GPU from pageable memory; None otherwise. From a trace it
    needs their share of the traced steps' time (`traced_us`) at PAGEABLE_MIN_SHARE or more: a count of copies
    says nothing of what they cost (launch_base's six take 5.5 µs of 90 ms), so copies that cannot be weighed
    (no traced step time) are no evidence either; the DataLoader's pin_memory=False stays one (info)."""
    share = None
    if traced_us and copies.get("copies"):
        share = copies.get("pageable_us", 0.0) / traced_us
        if share < T.PAGEABLE_MIN_SHARE:
            return None
    from_trace = copies.get("pageable", 0) > 0 and share is not None
    if not from_trace and loader_pin_memory is not False:
        return None
    size = [f"{copies['pageable_bytes'] / 2**20:.1f} MiB"] if copies.get("pageable_bytes") else []
    if share is not None:
        size += [f"{copies.get('pageable_us', 0.0) / 1e3:.3g} ms", f"{100 * share:.3g}% of the traced time"]
    why = (f"{copies['pageable']} of {copies['copies']} host-to-device copies in the traced steps came from "
           f"pageable memory ({', '.join(size)})" if from_trace else "the DataLoader has pin_memory=False")
    return Finding(kind="pageable-h2d", severity="moderate" if from_trace else "info",
                   share=share if from_trace else 0.0,
                   message=f"{why}: such copies are synchronous and cannot overlap compute; pinned memory and "
                           "non-blocking copies on a side stream can",
                   evidence={"copies": copies, "loader_pin_memory": loader_pin_memory, "traced_us": traced_us,
                             "threshold": T.PAGEABLE_MIN_SHARE}, fixes=["prefetch"]).as_dict()
