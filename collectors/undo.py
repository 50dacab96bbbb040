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


class StepHooked:
    """An in-process collector that acts after each optimizer step and undoes everything it installed on
    uninstall and in a forked child (a child never records). Subclasses set self._undo and self._owner_pid and
    define _after_step."""

    _undo: list
    _owner_pid: int

    def _hook_steps_and_fork(self, optim_mod) -> None:
        import os
        h = optim_mod.register_optimizer_step_post_hook(self._after_step)
        self._undo.append(h.remove)
        os.register_at_fork(after_in_child=self._in_child)

    def _in_child(self) -> None:
        import os
        if os.getpid() != self._owner_pid:
            self.uninstall()

    def uninstall(self) -> None:
        undo_all(self._undo)
