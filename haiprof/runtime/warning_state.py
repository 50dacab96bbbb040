"""Keep the script's "shown once" warnings shown once while haiprof's own code runs in its process.

Python's default filter shows a warning once per location: the location is remembered in the calling module's
`__warningregistry__`, stamped with the filters' version. Every `warnings.filterwarnings`, `simplefilter` or
`catch_warnings` bumps that version, and the next warning from a module whose stamp is older clears its
registry, so a warning already shown is shown again. haiprof's report (pandas alone enters `catch_warnings`
dozens of times) runs before the script's atexit handlers, and `haiprof.profile()` before the rest of the script:
`registries_kept()` restamps the registries that were current before our code, as if it had not run.
"""
from __future__ import annotations

import contextlib
import re
import sys
import warnings

_PROBE = "haiprof: warnings filters version probe"


def filters_version() -> int | None:
    """The filters' current version, read without changing it: an "ignore" entry put straight into the list
    (filterwarnings would bump the version) and one warning issued into a fresh registry, which gets the stamp."""
    try:
        filters = warnings.filters
        entry = ("ignore", re.compile(re.escape(_PROBE)), Warning, None, 0)
        registry: dict = {}
        filters.insert(0, entry)
        try:
            warnings.warn_explicit(_PROBE, UserWarning, "<haiprof>", 0, registry=registry)
        finally:
            filters.remove(entry)
    except Exception:   # another warnings implementation: leave the registries as they are
        return None
    version = registry.get("version")
    return version if isinstance(version, int) else None


def restamp(before: int | None, after: int | None) -> None:
    """Registries stamped `before` get `after`: what they remember stays valid."""
    if before is None or after is None or before == after:
        return
    for module in list(sys.modules.values()):
        try:
            registry = module.__dict__.get("__warningregistry__")
        except Exception:   # an odd sys.modules entry (a lazy proxy)
            continue
        if isinstance(registry, dict) and registry.get("version") == before:
            registry["version"] = after


@contextlib.contextmanager
def registries_kept():
    """Around haiprof's own code in the script's process (see the module's docstring)."""
    before = filters_version()
    try:
        yield
    finally:
        restamp(before, filters_version())
