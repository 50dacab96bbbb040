"""Findings and actions as typed records: the one definition of their keys, severities and fix ids.

Every analyzer builds a `Finding` (one constructor call per kind) and hands on `Finding.as_dict()`: summary.json,
the console and the pages read plain dicts, with the keys they have always had. `checked()` re-validates those
dicts where a summary is assembled, since later stages (the verdict, the fix filter) still edit them in place.

Shares are fractions of the step (0..1) on the clock the evidence names (`evidence.timeline`: "device", else the
host); times in evidence are seconds (`*_s`), sizes bytes or the unit in their name.
"""
from __future__ import annotations

from typing import Literal, get_args

import msgspec

Severity = Literal["info", "low", "moderate", "high"]
# the fix ids fixes/ registers (fixes.FIX_IDS; a test keeps the two equal: analyzers may not import fixes)
FixId = Literal["prefetch", "fused-optim", "amp", "compile", "cuda-graphs", "compress", "bucket"]
SEVERITIES: tuple[str, ...] = get_args(Severity)
FIX_IDS: tuple[str, ...] = get_args(FixId)
# the fixes that act on each bound class, best first
FIXES_FOR = {
    "io": ["prefetch"],
    "communication": ["compress", "bucket"],
    "compute": ["amp", "compile"],
    "launch": ["compile", "cuda-graphs", "fused-optim"],
    "optimizer": ["fused-optim"],
}


def _check(what: str, severity: str | None, fixes: list) -> None:
    if severity is not None and severity not in SEVERITIES:
        raise ValueError(f"{what}: unknown severity {severity!r} (known: {', '.join(SEVERITIES)})")
    bad = [x for x in fixes if x not in FIX_IDS]
    if bad:
        raise ValueError(f"{what}: unknown fix id(s) {bad} (known: {', '.join(FIX_IDS)})")


class Finding(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One finding: `share` of the step, a one-line `message`, the numbers behind it in `evidence`, and the fix
    ids that act on it (best first)."""
    kind: str
    severity: Severity
    share: float = 0.0
    message: str
    evidence: dict = {}
    fixes: list[FixId] = []
    recommendation: str | None = None     # the input split's advice, a sentence of its own (io only)
    removable_share: float | None = None  # the verdict's finding: what its fix can remove at most

    def __post_init__(self):   # msgspec validates types on decode only: check the constructor's too
        _check(f"finding {self.kind!r}", self.severity, self.fixes)

    def as_dict(self) -> dict:
        """The summary.json form: the contract keys in their order, the optional ones only when set. Shallow:
        evidence stays the same dict."""
        d = {"kind": self.kind, "severity": self.severity, "share": self.share, "message": self.message,
             "evidence": self.evidence, "fixes": list(self.fixes)}
        if self.recommendation is not None:
            d["recommendation"] = self.recommendation
        if self.removable_share is not None:
            d["removable_share"] = self.removable_share
        return d


def bound(kind: str, severity: str, share: float, message: str, evidence: dict, fixes: list | None = None) -> dict:
    """A bound-class finding (io, communication, compute, launch): one builder for the host clock, the device
    clock and the trace, its fixes FIXES_FOR[kind] unless the caller ordered them for the run."""
    return Finding(kind=kind, severity=severity, share=share, message=message, evidence=evidence,
                   fixes=list(FIXES_FOR[kind] if fixes is None else fixes)).as_dict()


def checked(findings: list[dict]) -> list[dict]:
    """The findings, each rebuilt as a Finding: a key, severity or fix id outside the contract raises ValueError.
    Values pass through as they are (no float coercion), so summary.json does not change by being checked."""
    return [edited(f) for f in findings]


def edited(finding: dict, **changes) -> dict:
    """A finding dict with some fields replaced, checked as a Finding."""
    try:
        return Finding(**{**finding, **changes}).as_dict()
    except TypeError as e:   # an unknown or missing key
        raise ValueError(f"finding {finding.get('kind')!r}: {e}") from None


class Action(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One "do this next" entry: the fix to apply, the most it can remove (`gain_share` of the step, `gain_s`
    seconds of the steady step), and the reason in the run's own numbers."""
    title: str
    reason: str
    gain_share: float
    fix: FixId | None
    kind: str
    other_fixes: list[FixId] = []
    gain_s: float | None = None
    predicted: dict | None = None   # analyzers/whatif.py's prediction for `fix`: point, range, what it assumed

    def __post_init__(self):
        _check(f"action {self.kind!r}", None, ([self.fix] if self.fix else []) + list(self.other_fixes))

    def as_dict(self) -> dict:
        return {"title": self.title, "reason": self.reason, "gain_share": self.gain_share, "fix": self.fix,
                "kind": self.kind, "other_fixes": list(self.other_fixes), "gain_s": self.gain_s,
                "predicted": self.predicted}
