"""A script with a syntax error: python's caret display, exit 1.
no_report: the target cannot start, so haiprof creates no run directory (as it fails before anything runs)
"""
for i in range(3)
    print(i)
