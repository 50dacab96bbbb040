"""haiprof: a profiler and bottleneck doctor for PyTorch training. `haiprof run train.py`, no code change.

From Python: `haiprof.load(RUN_DIR)` reads a run into pandas DataFrames; `with haiprof.profile(): ...` profiles a
region. Both live in haiprof.api and are imported on first use, so `import haiprof` (paid by every `haiprof run`)
stays cheap and does not import pandas.
"""
import sys as _sys

# What the interpreter imported before haiprof (python's own start-up): a user's json.py beside the script loses
# to these under python too; the standard modules haiprof imported after are the user's again while the script
# runs (runtime/shadowing.py)
STARTUP_MODULES = frozenset(_sys.modules)

from .version import __version__  # noqa: E402

__all__ = ["load", "profile", "Run", "__version__"]


def __getattr__(name):
    if name in ("load", "profile", "Run"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'haiprof' has no attribute {name!r}")
