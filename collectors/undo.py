"""Undoing what an in-process collector installed (hooks, patched functions), newest first."""
from __future__ import annotations

from typing import Callable


def undo_all(stack: list[Callable[[], object]]) -> None:
    """Pop and call every undo action. Never raises: a hook that is already gone is fine, and uninstalling must
    not break the training it ran around."""
    while stack:
        undo = stack.pop()
        try:
            undo()
        except Exception:  # noqa: BLE001 (see docstring)
            pass
