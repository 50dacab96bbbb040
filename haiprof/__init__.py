"""haiprof: a profiler and bottleneck doctor for PyTorch training. `haiprof run train.py`, no code change.

From Python: `haiprof.load(RUN_DIR)` reads a run into pandas DataFrames; `with haiprof.profile(): ...` profiles a
region. Both live in haiprof.api and are imported on first use, so `import haiprof` (paid by every `haiprof run`)
stays cheap and does not import pandas.
"""
from .version import __version__

__all__ = ["load", "profile", "Run", "__version__"]


def __getattr__(name):
    if name in ("load", "profile", "Run"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'haiprof' has no attribute {name!r}")
