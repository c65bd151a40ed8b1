"""Faulty providers of classes the suite was never told about, each caught.

Every provider of :mod:`tests.conformance.faulty_unseen` carries one realistic
bug (its docstring says which); the suite, at quick depth, run on the cases
of the ops the bug lives in (and the contract checks, where the bug is one of
ownership, memory or initializers), must fail some case. The healthy kernel
and compile-path counterparts, with the same ops, must fail none.

Before the schema-driven exploration (kind ``explore``) none of these bugs
was caught: those tests are xfailed (not strict) with the reason until the
explorer names the case that catches each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ortcore.plugins import default_manager

from . import faulty_unseen
from .unseen_runs import PLUGIN, failures, op_pattern, run

OPERATORS = ("node", "generated", "explore")

CONTRACT_BUGS = {
    "unseen-transpose-plan-cache",
    "unseen-constant-kept",
    "unseen-matmul-packed-init",
    "unseen-fused-baked-init",
    "unseen-fused-identity-alias",
}
"""Providers whose bug a contract check is for (memory over shapes, ownership,
overridable initializers): their runs include the contract checks."""

CHEAP_CONTRACT = r"^contract/(?!threads$|resources$|close$|repeatable$|input_layouts$)"
"""The contract checks these runs take: all but the slow ones no bug here is
about (threads, resources, close, repeatable, input layouts)."""

NEEDS_EXPLORE = "needs the explore kind: today's node, generated and contract cases miss it"

CAUGHT_TODAY: dict[str, str] = {}
"""Provider -> the case that catches it already (none: every bug here is of a
class the suite did not catch before issue 52)."""


@pytest.fixture(scope="module")
def unseen() -> Iterator[str]:
    """Register the providers of :mod:`faulty_unseen` for this module."""
    default_manager().register_plugin(faulty_unseen, name=PLUGIN)
    yield PLUGIN
    default_manager().unregister_plugin(PLUGIN)


def _selection(cls: Any) -> tuple[tuple[str, ...], str | None]:
    """The kinds and the case pattern a provider's bug is looked for in."""
    alias = cls.aliases[0]
    ops = op_pattern(cls.ops, contract=False)
    if alias in CONTRACT_BUGS:
        pattern = CHEAP_CONTRACT if ops is None else f"{CHEAP_CONTRACT}|{ops}"
        return ("contract", *OPERATORS), pattern
    return OPERATORS, ops


def _param(cls: Any) -> Any:
    alias = cls.aliases[0]
    if alias in CAUGHT_TODAY:
        return pytest.param(alias, id=alias)
    return pytest.param(
        alias, id=alias, marks=pytest.mark.xfail(strict=False, reason=NEEDS_EXPLORE)
    )


BY_ALIAS = {cls.aliases[0]: cls for cls in faulty_unseen.PROVIDERS}


@pytest.mark.parametrize("provider", [_param(cls) for cls in faulty_unseen.FAULTY])
def test_unseen_fault_is_caught(unseen: str, provider: str) -> None:
    cls = BY_ALIAS[provider]
    kinds, pattern = _selection(cls)
    results = run(provider, kinds, pattern)
    failed = failures(results)
    assert failed, f"{provider} ({cls.bug}) passed all {len(results)} cases it was given"
    if provider in CAUGHT_TODAY:
        assert CAUGHT_TODAY[provider] in failed, sorted(failed)


@pytest.mark.parametrize("provider", ["unseen-healthy", "unseen-fused"])
def test_healthy_counterpart_fails_nothing(unseen: str, provider: str) -> None:
    """No false alarm: the same ops without a bug pass every case of every
    op a faulty provider is tested on, and the contract checks."""
    ops = sorted({op for cls in faulty_unseen.FAULTY for op in cls.ops})
    pattern = f"{CHEAP_CONTRACT}|{op_pattern(ops, contract=False)}"
    results = run(provider, ("contract", *OPERATORS), pattern)
    failed = failures(results)
    assert not failed, {i: (r.outcome, r.detail) for i, r in failed.items()}
    ran = {i for i, r in results.items() if r.outcome == "passed"}
    for op in ops:  # each op of the bugs is exercised, not declined
        assert any(re.search(op_pattern([op], contract=False) or "", i) for i in ran), op


def test_every_fault_is_documented_and_distinct() -> None:
    """Each faulty provider says its bug, names the ops it lives in (or runs
    every op), and is a different class from the others."""
    faulty = faulty_unseen.FAULTY
    assert len(faulty) >= 18
    for cls in faulty:
        doc = cls.__doc__ or ""
        assert doc.startswith("Bug"), cls
        assert cls.bug, cls
    assert len({cls.bug for cls in faulty}) == len(faulty)
    kernel_ops = set(faulty_unseen.KERNELS)
    for cls in faulty:
        assert set(cls.ops) <= kernel_ops, cls
