"""Prints what python gives a script: __file__, argv, sys.path[0], the __main__ globals' kinds."""
import sys

print("file", __file__)
print("argv", sys.argv)
print("path0", sys.path[0])
print("builtins", type(__builtins__).__name__, "loader", type(__loader__).__name__, __loader__.name,
      __loader__.path, "spec", __spec__, "package", __package__, "cached", __cached__)
print("globals", sorted(k for k in globals() if k.startswith("__")))
print("main is me", sys.modules["__main__"].__dict__ is globals())
