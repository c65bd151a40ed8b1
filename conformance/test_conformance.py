"""The suite's tests, collected by ``pytest --pyargs conformance --ortcore-provider NAME``.

Parametrized by :mod:`conformance.pytest_plugin`: one test per contract check
and case of the provider under test.
"""

from __future__ import annotations

from .pytest_plugin import ConformanceSession


def test_conformance(ortcore_case: str, ortcore_conformance: ConformanceSession) -> None:
    """One contract check or case."""
    ortcore_conformance.check(ortcore_case)
