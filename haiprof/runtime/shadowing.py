"""The user's own modules named like the standard library's (a `json.py` or `random.py` beside the script) win
under haiprof as under python.

Under python the script's folder is first on sys.path before anything but the interpreter's own start-up is
imported, so the script's `import json` (and torch's, if the script imports torch first) finds the user's file.
Under haiprof, haiprof and torch imported the standard `json` before the script's folder went on sys.path, and the
script would find that one in the module cache. So before the script runs, such modules are taken out of the
cache (the objects haiprof and torch hold keep working), and put back once it is over, for haiprof's report.

Only standard-library names are taken out: a user's `torch.py` or `numpy.py` would break haiprof itself (and the
script under python alike), and the interpreter's own start-up modules (`os`, `re`, `io` ...) stay, as python
keeps them.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys

import haiprof


def evict_shadowed(folder: str) -> dict:
    """Take the cached standard modules that a module in `folder` (the script's sys.path[0]) shadows out of
    sys.modules, submodules too; returns them for `restore`. Never raises: at worst nothing is taken out."""
    try:
        names = {_top_name(entry) for entry in os.listdir(folder or ".")}
    except (OSError, TypeError, ValueError):
        return {}
    taken: dict = {}
    for name in names:
        if (not name or name not in sys.stdlib_module_names or name not in sys.modules
                or name in haiprof.STARTUP_MODULES or name in sys.builtin_module_names):
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, [folder or "."])
        except Exception:
            continue
        if spec is None or spec.origin is None:   # not there, or a namespace folder: later entries win
            continue
        current = getattr(sys.modules.get(name), "__file__", None)
        if current and os.path.dirname(os.path.abspath(current)) in (os.path.abspath(folder or "."),
                                                                     os.path.abspath(os.path.join(folder or ".", name))):
            continue   # already the user's (python -m haiprof from the script's folder imported it)
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            taken[key] = sys.modules.pop(key)
    return taken


def restore(taken: dict) -> None:
    """The standard modules back in the cache, over the user's (haiprof's report imports them by name)."""
    sys.modules.update(taken)


def _top_name(entry: str) -> str:
    """`json.py` -> json, `json/` -> json, `_x.cpython-311-x86_64-linux-gnu.so` -> _x; '' for anything else."""
    for suffix in (*importlib.machinery.SOURCE_SUFFIXES, *importlib.machinery.BYTECODE_SUFFIXES,
                   *importlib.machinery.EXTENSION_SUFFIXES):
        if entry.endswith(suffix):
            return entry[:-len(suffix)]
    return entry if entry.isidentifier() else ""
