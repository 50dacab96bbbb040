"""`-m pkg` whose __main__ trains.

module: trainpkg2
args: --x 1
"""
print("the probe file itself is not run")
