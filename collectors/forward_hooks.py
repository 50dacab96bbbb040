"""The phase recorder's module forward hooks: global until the root modules are known, then on those roots alone.

Global module hooks push every nn.Module call onto torch's slow path (~5 us each). They are only needed until we
know which modules are called from outside any other module (the roots); after NARROW_AFTER_STEPS optimizer
steps the global hooks are swapped for hooks on those roots alone. A root first called later is then not timed
(its time shows as "other"); the report says how many roots were found.
"""
from __future__ import annotations

import re
import warnings
import weakref
from typing import Callable

from .phase_patches import hide_hooks_from_copies

NARROW_AFTER_STEPS = 2
COMPILE_HOOK_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks on modules"


class ForwardHooks:
    """`pre`/`post` on every module call, then on the roots; each removal goes on the recorder's `undo` list."""

    def __init__(self, pre: Callable, post: Callable, undo: list):
        self._pre, self._post, self._undo = pre, post, undo
        self._global: list = []
        self._warning_filter = None
        self.roots: weakref.WeakSet = weakref.WeakSet()   # filled by the recorder's pre hook until narrowed
        self.narrowed_to: int | None = None   # number of root modules once narrowed
        self.kept_global = ""                 # why the global hooks stayed (a root that takes no hooks of its own)

    @property
    def is_global(self) -> bool:
        return bool(self._global)

    def install(self) -> None:
        import torch.nn.modules.module as nn_module
        self._global = [nn_module.register_module_forward_pre_hook(self._pre),
                        nn_module.register_module_forward_hook(self._post, always_call=True)]
        # torch.compile(module) warns that global hooks fire twice (for the OptimizedModule and the module): ours
        # count nesting, so the warning is about haiprof, not the script; kept quiet while they are installed.
        # Put in the list directly: filterwarnings (and _filters_mutated) would bump the filters' version, after
        # which python shows again a warning the script had already shown once.
        self._warning_filter = (warnings.filters, ("ignore", re.compile(COMPILE_HOOK_WARNING, re.I), UserWarning,
                                                   None, 0))
        warnings.filters.insert(0, self._warning_filter[1])
        self._undo.append(self.remove_global)

    def remove_global(self) -> None:
        while self._global:
            self._global.pop().remove()
        if self._warning_filter is not None:   # the list it went in, and the one in use (a catch_warnings copy)
            into, entry = self._warning_filter
            for filters in (into, warnings.filters):
                if entry in filters:
                    filters.remove(entry)
            self._warning_filter = None

    def narrow(self) -> None:
        """Swap the global hooks for hooks on the root modules seen so far."""
        roots = list(self.roots)
        if not roots:
            return  # no forward seen yet: keep looking
        handles = []
        try:
            for root in roots:
                handles.append(root.register_forward_pre_hook(self._pre))
                handles.append(root.register_forward_hook(self._post, always_call=True))
        except Exception as e:   # a torch.jit ScriptModule takes no module hooks: its calls stay on the global ones
            for handle in handles:
                handle.remove()
            self.kept_global = f"{type(roots[len(handles) // 2]).__name__}: {e}".splitlines()[0]
            return
        self.remove_global()
        self._undo += [h.remove for h in handles]
        self._undo.append(hide_hooks_from_copies({h.id for h in handles}))
        self.narrowed_to = len(roots)
