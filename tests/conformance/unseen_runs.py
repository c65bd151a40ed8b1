"""Running the suite on the providers of :mod:`tests.conformance.faulty_unseen`:
which cases each one fails, grouped by what they vary.

Shared by ``test_unseen_faults.py`` and ``benchmarks/conformance_faults.py``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from conformance.outcomes import CaseResult
from conformance.suite import Settings, run_suite

PLUGIN = "tests.conformance.faulty_unseen"
GOOD = ("passed", "unsupported")
"""Outcomes that are no failure."""


def snake(op: str) -> str:
    """``LayerNormalization`` -> ``layer_normalization`` (onnx's node test names)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def op_pattern(ops: Iterable[str], contract: bool = True) -> str | None:
    """A case-id pattern selecting the cases of ``ops`` (and every contract
    check when ``contract``); ``None`` (everything) for no ops."""
    names = sorted({n for op in ops for n in (op, op.lower(), snake(op))})
    if not names:
        return None
    either = "|".join(re.escape(n) for n in names)
    body = rf"(?i:[/_](?:{either})(?:[/_]|$))"
    return rf"^contract/|{body}" if contract else body


def run(
    provider: str,
    kinds: Sequence[str],
    pattern: str | None = None,
    depth: str = "quick",
    **settings: Any,
) -> dict[str, CaseResult]:
    """Run the suite in this process on one provider; results by case id."""
    out = run_suite(
        Settings(
            provider,
            tuple(kinds),
            pattern,
            progress=False,
            plugins=[PLUGIN],
            depth=depth,
            **settings,
        )
    )
    return {r.id: r for r in out.results}


def failures(results: dict[str, CaseResult]) -> dict[str, CaseResult]:
    """The results that are failures."""
    return {i: r for i, r in results.items() if r.failed}


def group(failed: dict[str, CaseResult]) -> dict[str, list[CaseResult]]:
    """Failures by kind and dimension (``explore/rank``, ``generated/negaxis``,
    ``contract/memory``)."""
    out: dict[str, list[CaseResult]] = defaultdict(list)
    for i, r in sorted(failed.items()):
        kind, _, name = i.partition("/")
        dimension = getattr(r, "dimension", None)
        if kind == "explore" and dimension:
            key = f"explore/{dimension}"
        elif kind == "generated":
            key = f"generated/{name.split('_')[0]}"
        elif kind == "contract":
            key = i
        else:
            key = kind
        out[key].append(r)
    return dict(out)
