"""`-m` a module that does not exist: python's one line and exit 1.

module: no_such_module_here
"""
print("the probe file itself is not run")
