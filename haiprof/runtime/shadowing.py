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

import contextlib
import importlib.machinery
import os
import sys


def evict_shadowed(folder: str) -> dict:
    """Take the cached standard modules that a module in `folder` (the script's sys.path[0]) shadows out of
    sys.modules, submodules too; returns them for `restore`. Never raises: at worst nothing is taken out.
    The folder is looked up through the import system's own finder (one listing, cached for the script's own
    imports after), a candidate at a time: a folder of a million data files costs what python's import does."""
    folder = os.path.abspath(folder or ".")
    if not os.path.isdir(folder):   # a zip archive's path: nothing beside the script to shadow with
        return {}
    taken: dict = {}
    # recorded when the haiprof package was first imported (read from it, not imported: it sits above this layer)
    startup = getattr(sys.modules.get("haiprof"), "STARTUP_MODULES", None)
    if startup is None:
        return {}
    for name in [n for n in sys.modules if "." not in n and n in sys.stdlib_module_names
                 and n not in startup and n not in sys.builtin_module_names]:
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, [folder])
        except Exception:
            continue
        if spec is None or spec.origin is None:   # not there, or a namespace folder: later entries win
            continue
        current = getattr(sys.modules.get(name), "__file__", None)
        if current and os.path.realpath(current) == os.path.realpath(spec.origin):
            continue   # already the user's (python -m haiprof from the script's folder imported it)
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            taken[key] = sys.modules.pop(key)
    return taken


@contextlib.contextmanager
def folder_hidden(folder: str | None, taken: dict):
    """haiprof's own imports while the script runs (at its `import torch`: runtime/torch_import.py) with `folder`
    off sys.path, so they get the standard modules; after, the standard ones they cached that the folder shadows
    leave the cache again, into `taken` (restored at the end)."""
    path = sys.path[:]
    real = os.path.realpath(folder) if folder else None
    if real is not None:
        sys.path[:] = [p for p in path if os.path.realpath(p or os.curdir) != real]
    try:
        yield
    finally:
        sys.path[:] = path
        if real is not None:
            for name, module in evict_shadowed(real).items():
                taken.setdefault(name, module)


def restore(taken: dict) -> None:
    """The standard modules back in the cache, over the user's (haiprof's report imports them by name)."""
    sys.modules.update(taken)
