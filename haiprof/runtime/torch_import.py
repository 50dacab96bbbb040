"""A call made once the script's own `import torch` has run torch's `__init__` to its end (runtime/child_boot.py
starts the recorder there, not before the script).

Why not import torch before the script: loading torch loads its OpenMP and BLAS libraries, and they read
OMP_NUM_THREADS, MKL_NUM_THREADS, KMP_AFFINITY ... once, as they load. A script that sets them before its own
`import torch` (common in CPU and multi-process jobs) would get other thread counts under haiprof than under
python: a slower or faster run than the one it asked for. TORCH_LOGS and the like are read at import too. And a
script that never imports torch starts as fast as under python.

The finder sits first on sys.meta_path and answers only for `torch`: it finds torch's spec through the finders after
it, and wraps the loader so the call runs after the module's code, still inside the import statement (the
script's next line sees the collectors in place). Then it takes itself off the path and gives the module its own
loader back.
"""
from __future__ import annotations

import sys
from typing import Callable

NAME = "torch"


class _Loader:
    """The real loader, with `exec_module` followed by the call; anything else goes to the real one."""

    def __init__(self, loader, spec, on_loaded: Callable):
        self._loader, self._spec, self._on_loaded = loader, spec, on_loaded

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self._spec.loader = self._loader   # torch as python would have it, whatever follows
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)   # a failing import fails as under python, with no call
        self._on_loaded()


class AfterTorchImport:
    """`install(on_loaded)`: `on_loaded()` right after torch (`name`) is first imported in this process (never
    raises into the import: the call's own errors are its to handle)."""

    def __init__(self, on_loaded: Callable, name: str = NAME):
        self._on_loaded, self._name = on_loaded, name
        self._looking = False

    @classmethod
    def install(cls, on_loaded: Callable, name: str = NAME) -> "AfterTorchImport":
        finder = cls(on_loaded, name)
        sys.meta_path.insert(0, finder)
        return finder

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass

    def find_spec(self, name, path=None, target=None):
        if name != self._name or self._looking:
            return None
        self._looking = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        finally:
            self._looking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec   # not installed (the script's ImportError as python's), or a loader we do not wrap
        self.remove()
        spec.loader = _Loader(spec.loader, spec, self._call)
        return spec

    def _call(self) -> None:
        try:
            self._on_loaded()
        except Exception:   # the recorder's start says its own failures; the script's import never fails by us
            pass
