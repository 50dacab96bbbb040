"""`-m pkg` where the package has no __main__: python's one line, exit 1 (issue 29.9).

module: trainpkg
no_report: the target cannot start, so haiprof creates no run directory (as it fails before anything runs)
"""
print("the probe file itself is not run")
