"""Reads /proc/self/cmdline.
"""
print(open("/proc/self/cmdline", "rb").read().split(b"\0")[1:2])
