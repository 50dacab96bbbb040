"""The user's own json.py: the standard library's json (which torch needs too), with a name of its own added."""
import os
import sys

_saved = sys.path[:]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
del sys.modules[__name__]
import json as _real  # noqa: E402  (the standard library's, now that this folder is off the path)

sys.path[:] = _saved
_real.WHO = "user json"
sys.modules[__name__] = _real
