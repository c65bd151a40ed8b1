"""How many explored cases each dimension built, and how many the oracle could not judge."""

from __future__ import annotations

from collections import Counter

from ..outcomes import CaseSkipped
from . import explore_cases
from .rules import DROPPED
from .spec import REJECTED

__all__ = ["tally"]


def tally(depth: str) -> dict[str, dict[str, int]]:
    """Per dimension: ``cases`` listed, ``skipped`` by the oracle at load, and
    ``illegal`` candidates shape inference or the checker refused when listing;
    under ``"dropped"``, candidates not generated, by reason
    (:data:`conformance.explore.rules.UNJUDGED` and the schema rules).

    Every case is built (the oracle runs): seconds at ``quick``, a minute or
    two at ``full``.
    """
    REJECTED.clear()
    DROPPED.clear()
    listed: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for case in explore_cases(depth):
        listed[case.dimension] += 1
        try:
            case.load()
        except CaseSkipped:
            skipped[case.dimension] += 1
    out: dict[str, dict[str, int]] = {
        dim: {"cases": listed[dim], "skipped": skipped[dim], "illegal": REJECTED[dim]}
        for dim in sorted(set(listed) | {d for d, n in REJECTED.items() if n})
    }
    out["dropped"] = dict(DROPPED)
    return out
