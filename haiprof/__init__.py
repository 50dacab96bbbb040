"""haiprof: a profiler and bottleneck doctor for PyTorch training. `haiprof run train.py`, no code change."""
__version__ = "0.1.0"
