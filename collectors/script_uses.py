"""What the script already does, seen by the phase recorder's hooks during its first steps: mixed precision
(autocast, or bf16/fp16 weights), a compiled root module, a fused or foreach optimizer. The advice leaves those
fixes out. Each probe only adds to `uses` and never raises: a hint, never a failed forward or step.
"""
from __future__ import annotations


def probe_module(module, uses: dict) -> None:
    try:
        import torch
        if type(module).__name__ == "OptimizedModule" or getattr(module, "_compiled_call_impl", None):
            uses["compile"] = type(module).__name__
        kinds = [k for k in ("cuda", "cpu") if torch.is_autocast_enabled(k)]
        if kinds:
            uses["amp"] = "autocast (" + ", ".join(kinds) + ")"
        p = next(module.parameters(), None)
        if p is not None and p.dtype in (torch.bfloat16, torch.float16):
            uses.setdefault("amp", f"{str(p.dtype).replace('torch.', '')} weights")
    except Exception:   # noqa: BLE001
        pass


def probe_optimizer(optimizer, uses: dict) -> None:
    try:
        d = getattr(optimizer, "defaults", {}) or {}
        if d.get("fused"):
            uses["fused-optim"] = f"{type(optimizer).__name__}(fused=True)"
        elif d.get("foreach"):
            uses.setdefault("fused-optim", f"{type(optimizer).__name__}(foreach=True)")
    except Exception:   # noqa: BLE001
        pass
