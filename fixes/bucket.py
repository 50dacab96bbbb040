"""bucket: DDP's gradient bucket size matched to the model's gradient size.

DDP all-reduces gradients in buckets while backward still runs. One bucket for the whole model (a small model
under the 25 MB default) means no overlap at all; hundreds of tiny ones pay per-collective latency. The fix aims at
TARGET_BUCKETS buckets, within [MIN_BUCKET_MB, MAX_BUCKET_MB]. An explicit bucket_cap_mb in the script wins.
"""
from __future__ import annotations

from .base import FixContext
from . import _ddp

ID = "bucket"
VARIANTS: tuple = ()   # takes no ID=VARIANT (checked by parse_spec before the run)
NOT_TRIGGERED = "the script constructed no DistributedDataParallel model"
TARGET_BUCKETS = 4
MIN_BUCKET_MB = 1.0
MAX_BUCKET_MB = 256.0
DDP_DEFAULT_MB = 25.0


def choose_bucket_mb(grad_bytes: int) -> float:
    mb = grad_bytes / 2**20 / TARGET_BUCKETS
    return round(min(MAX_BUCKET_MB, max(MIN_BUCKET_MB, mb)), 2)


def install(ctx: FixContext) -> None:
    state = ctx.state

    def before(a: dict) -> None:
        target = "DistributedDataParallel"
        if a.get("bucket_cap_mb") is not None or a.get("bucket_cap_mb_list") is not None:
            state.skipped("the script sets bucket_cap_mb explicitly", target)
            return
        grad = _ddp.gradient_bytes(a["module"])
        mb = choose_bucket_mb(grad)
        a["bucket_cap_mb"] = mb
        state.applied(target, f"bucket_cap_mb={mb} for {grad / 2**20:.1f} MiB of gradients "
                      f"(~{TARGET_BUCKETS} buckets; default {DDP_DEFAULT_MB:g})",
                      bucket_cap_mb=mb, gradient_mib=round(grad / 2**20, 3))

    _ddp.wrap_init(ctx, before=before)
