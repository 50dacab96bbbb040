"""`-m pkg.train` whose package __init__ prints and writes a file: it runs once, as under python.

module: initpkg.train
args: --x 1
"""
print("the probe file itself is not run")
