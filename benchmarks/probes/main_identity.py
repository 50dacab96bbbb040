"""__file__, __name__, __spec__, __package__, __loader__, sys.path[0] and sys.argv[0] as python sets them.
"""
import os
import sys

print(__name__, __spec__, __package__, type(__loader__).__name__)
print(__file__ == os.path.abspath(sys.argv[0]), os.path.basename(__file__), sys.argv[0])
print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
print(sorted(k for k in globals() if k.startswith("__")))
print(sys.modules["__main__"] is sys.modules[__name__], __builtins__.__name__)
