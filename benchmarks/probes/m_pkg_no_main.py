"""`-m pkg` where the package has no __main__: python's one line, exit 1 (issue 29.9).

module: trainpkg
"""
print("the probe file itself is not run")
