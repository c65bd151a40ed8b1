"""Outcome categories and the result record of one case."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "FAILURES",
    "OUTCOMES",
    "CaseResult",
    "CaseSkipped",
]

PASSED = "passed"
MISMATCH = "mismatch"
WRONG_TYPE = "wrong_type"
LOAD_ERROR = "load_error"
RUN_ERROR = "run_error"
CRASH = "crash"
TIMEOUT = "timeout"
UNSUPPORTED = "unsupported"
WAIVED = "waived"
UNEXPECTED_PASS = "unexpected_pass"
SKIPPED = "skipped"

OUTCOMES: dict[str, str] = {
    PASSED: "passed",
    MISMATCH: "numeric mismatch",
    WRONG_TYPE: "wrong dtype or shape",
    LOAD_ERROR: "load error (session creation failed)",
    RUN_ERROR: "run error (run raised, or inputs were written)",
    CRASH: "crash (the worker process died)",
    TIMEOUT: "timeout",
    UNSUPPORTED: "unsupported (declined by the provider)",
    WAIVED: "waived (failed, covered by a waiver)",
    UNEXPECTED_PASS: "unexpected pass of a waived case",
    SKIPPED: "skipped (the oracle cannot judge the case; not counted in the rates)",
}
"""Every outcome, with its description, in report order."""

FAILURES = frozenset({MISMATCH, WRONG_TYPE, LOAD_ERROR, RUN_ERROR, CRASH, TIMEOUT})
"""Outcomes that count as failures."""


class CaseSkipped(Exception):
    """Raised by a case's ``load`` when the oracle cannot judge it: the case is
    ``skipped`` (counted on its own, left out of the pass rates), never guessed."""


@dataclass
class CaseResult:
    """What happened to one case (one entry of ``report.json``'s ``cases``).

    Attributes:
        id: ``<kind>/<name>``.
        suite: ``contract``, ``operators`` or ``models``.
        outcome: a key of :data:`OUTCOMES`.
        detail: failure message, or the reason a node was declined.
        seconds: wall time.
        op: the operator tested (single-node cases), for the op-by-dtype matrix.
        dtype: element type of its first input (``float``, ``int64``, ...).
        ops: every op type in the model.
        error: ``max_abs``, ``max_rel``, ``max_ulp`` (numeric cases only).
        tolerance: ``rtol``/``atol`` applied to the first numeric output.
        output_dtype: numpy name of the first numeric output's dtype.
        nodes: for model cases: ``total`` nodes and those on the ``provider``.
        dimension: what an explored case varies (``attribute``, ``rank``, ...).
        repro: a failed case's one-line reproducer (op, attributes, inputs, seed;
            :func:`conformance.repro.describe`).
        waiver: reason of the waiver that matched.
        original_outcome: the outcome before a waiver changed it.
    """

    id: str
    suite: str
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    op: str = ""
    dtype: str = ""
    ops: list[str] = field(default_factory=list)
    error: dict[str, float | None] | None = None
    tolerance: dict[str, float] | None = None
    output_dtype: str = ""
    nodes: dict[str, int] | None = None
    dimension: str = ""
    repro: str = ""
    waiver: str = ""
    original_outcome: str = ""

    @property
    def failed(self) -> bool:
        """A failure, or an unexpected pass of a waived case."""
        return self.outcome in FAILURES or self.outcome == UNEXPECTED_PASS

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)
