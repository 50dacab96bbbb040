"""`-m` a module that does not exist: python's one line and exit 1.

module: no_such_module_here
no_report: the target cannot start, so haiprof creates no run directory (as it fails before anything runs)
"""
print("the probe file itself is not run")
