"""Reads /proc/self/cmdline.

expected_diff: the script runs inside haiprof's process, so /proc/self/cmdline is `python -m haiprof run ...
    probe.py`, not `python probe.py` (sys.argv is the script's); a kernel-level rename is out of reach
"""
print(open("/proc/self/cmdline", "rb").read().split(b"\0")[1:2])
