"""What every fix shares: its report (applied / skipped, with the reason) and reversible patches.

A fix never edits the user's files. It patches torch entry points in the launched process (DataLoader.__init__,
optimizer constructors, DDP construction, global module hooks) before the script runs, and each patch is undone
when the script ends, so the process looks exactly as before to whatever runs afterwards.
"""
from __future__ import annotations

import os
from typing import Any, Callable


class FixState:
    """The record of one fix: every time it acted (applied) or declined (skipped), and why."""

    def __init__(self, fix_id: str, variant: str | None, not_triggered: str):
        self.id = fix_id
        self.variant = variant
        self.not_triggered = not_triggered   # reason used when the script never reached what the fix hooks
        self.events: list[dict] = []
        self.details: dict = {}

    def applied(self, target: str, how: str, **details: Any) -> None:
        self.events.append({"status": "applied", "target": target, "reason": how, **details})

    def skipped(self, reason: str, target: str | None = None, **details: Any) -> None:
        self.events.append({"status": "skipped", "target": target, "reason": reason, **details})

    def result(self) -> dict:
        applied = [e for e in self.events if e["status"] == "applied"]
        skipped = [e for e in self.events if e["status"] == "skipped"]
        if applied:
            status, reason = "applied", "; ".join(dict.fromkeys(f"{e['target']}: {e['reason']}" for e in applied))
        elif skipped:
            status, reason = "skipped", "; ".join(dict.fromkeys(e["reason"] for e in skipped))
        else:
            status, reason = "skipped", self.not_triggered
        out = {"id": self.id, "status": status, "reason": reason, "events": self.events[:50]}
        if self.variant:
            out["variant"] = self.variant
        if self.details:
            out["details"] = self.details
        return out


class FixContext:
    """Handed to each fix's install(): its state, the diagnosis, the other requested fixes, and patch helpers."""

    def __init__(self, state: FixState, requested: dict, diagnosis: dict | None):
        self.state = state
        self.requested = requested          # fix id -> variant (None for the default), all fixes of this run
        self.diagnosis = diagnosis or {}    # summary.json of the run the fixes were chosen from, if any
        self._undo: list[Callable] = []
        self.owner_pid = os.getpid()

    @property
    def variant(self) -> str | None:
        return self.state.variant

    def patch(self, owner: Any, name: str, replacement: Callable) -> None:
        original = owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
        setattr(owner, name, replacement)
        self._undo.append(lambda: setattr(owner, name, original))

    def on_undo(self, fn: Callable) -> None:
        self._undo.append(fn)

    def safely(self, fn: Callable, default: Any = None) -> Callable:
        """fn, but an exception in the fix's own logic is recorded (fix skipped, with the error) instead of
        reaching the script: a fix must never be the reason a training run fails."""
        state = self.state

        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                state.skipped(f"internal error, left the script as it was: {type(e).__name__}: {e}")
                return default

        return call

    def in_main_process(self) -> bool:
        # DataLoader workers are forks of the training process: fixes act in the training process only.
        return os.getpid() == self.owner_pid

    def undo(self) -> None:
        while self._undo:
            fn = self._undo.pop()
            try:
                fn()
            except Exception as e:  # undo must never raise into the user's exit path; keep the reason
                self.state.details.setdefault("undo_errors", []).append(f"{type(e).__name__}: {e}")


def cuda_available(torch) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False
