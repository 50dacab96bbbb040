"""The hardware collectors the side sampler hosts, and what `haiprof doctor` reports about them.

Wiring only: each entry is (collector class, factory for a training process pid). Availability checks are the
classes' own `available()`; each names why it is off and `enable_hint` says how to turn it on.
"""
from __future__ import annotations


def hardware_classes() -> list:
    from haiprof.collectors.gpu_nvml import NvmlSampler
    from haiprof.collectors.infiniband import InfinibandSampler, NicSampler
    from haiprof.collectors.membw import MemBandwidthSampler
    from haiprof.collectors.numa import NumaSampler
    from haiprof.collectors.rapl import RaplSampler
    from haiprof.collectors.storage import DiskstatsSampler
    from haiprof.collectors.tcp_queues import TcpQueueSampler
    return [NvmlSampler, InfinibandSampler, NicSampler, NumaSampler, MemBandwidthSampler, RaplSampler,
            DiskstatsSampler, TcpQueueSampler]


def hardware_collectors(root_pid: int) -> list:
    """(name, available, factory) like sidecar._collectors; collectors that watch the process tree get its pid."""
    out = []
    for cls in hardware_classes():
        factory = (lambda c: lambda: c(root_pid))(cls) if getattr(cls, "needs_pid", False) else cls
        out.append((cls.name, cls.available, factory))
    return out
