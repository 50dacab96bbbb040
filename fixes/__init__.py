"""Fixes: the only code that changes how training runs, each behind `haiprof run --fix ID`.

One module per fix, each with ID, VARIANTS (what ID=VARIANT may name; checked before the run), NOT_TRIGGERED (the
reason reported when the script never reached what the fix hooks) and install(ctx), which checks its preconditions
and patches torch entry points inside the launched process.
Nothing here edits user files, and nothing here imports collectors, analyzers or renderers.

    fixes = install_fixes(parse_spec("prefetch,amp"), diagnosis=summary_or_None)
    ... run the script ...
    results = fixes.finish()   # [{id, status: applied|skipped, reason, events, details}]
"""
from __future__ import annotations

import importlib

from .base import FixContext, FixState

# In install order. Order matters where fixes stack on the same entry point (compile after amp, so the autocast
# hooks stay outside the compiled forward).
FIX_MODULES = {
    "prefetch": "prefetch",
    "fused-optim": "fused_optim",
    "amp": "amp",
    "compile": "compile",
    "cuda-graphs": "cuda_graphs",
    "compress": "compress",
    "bucket": "bucket",
}
FIX_IDS = tuple(FIX_MODULES)
AUTO = "auto"


class FixSpecError(ValueError):
    """A --fix value that names no known fix."""


def parse_spec(spec: str) -> dict:
    """'prefetch,compress=powersgd' -> {'prefetch': None, 'compress': 'powersgd'} (install order kept)."""
    wanted: dict = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        fix_id, _, variant = part.partition("=")
        fix_id = fix_id.strip().lower()
        if fix_id not in FIX_MODULES:
            raise FixSpecError(f"unknown fix {fix_id!r} (known: {', '.join(FIX_IDS)}, or auto)")
        variant = variant.strip() or None
        if variant is not None:
            _check_variant(fix_id, variant)
        wanted[fix_id] = variant
    if not wanted:
        raise FixSpecError("--fix needs at least one fix id")
    return {k: wanted[k] for k in FIX_IDS if k in wanted}


def _check_variant(fix_id: str, variant: str) -> None:
    # Each fix module declares VARIANTS (none imports torch at import time, so this is cheap).
    known = getattr(importlib.import_module(f"{__name__}.{FIX_MODULES[fix_id]}"), "VARIANTS", ())
    if variant not in known:
        raise FixSpecError(f"fix {fix_id!r} has no variant {variant!r}" + (
            f" (known: {', '.join(known)})" if known else " (it takes none)"))


def format_spec(requested: dict) -> str:
    return ",".join(k if v is None else f"{k}={v}" for k, v in requested.items())


class InstalledFixes:
    def __init__(self, contexts: list):
        self._contexts = contexts
        self._results: list | None = None

    def finish(self) -> list[dict]:
        """Undo every patch (last installed first) and return each fix's result."""
        if self._results is None:
            for ctx in reversed(self._contexts):
                ctx.undo()
            self._results = [ctx.state.result() for ctx in self._contexts]
        return self._results

    def snapshot(self) -> list[dict]:
        return [ctx.state.result() for ctx in self._contexts]


def install_fixes(requested: dict, diagnosis: dict | None = None) -> InstalledFixes:
    """Install each requested fix; a fix that fails to install is reported skipped with the error, never raised."""
    contexts = []
    for fix_id, variant in requested.items():
        module = importlib.import_module(f"{__name__}.{FIX_MODULES[fix_id]}")
        state = FixState(fix_id, variant, module.NOT_TRIGGERED)
        ctx = FixContext(state, requested, diagnosis)
        try:
            module.install(ctx)
        except Exception as e:
            ctx.undo()
            state.skipped(f"could not be installed: {type(e).__name__}: {e}")
        contexts.append(ctx)
    return InstalledFixes(contexts)
