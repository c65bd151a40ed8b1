"""Dimension-by-dimension cases of the quantized com.microsoft ops, which have
no ONNX schema to explore: built from :mod:`conformance.qcontrib`'s table."""

from __future__ import annotations

from collections.abc import Iterator

from ..case import Case

__all__ = ["cases"]


def cases(depth: str) -> Iterator[Case]:
    """The quantized contrib cases (:func:`conformance.qcontrib.cases`)."""
    from ..qcontrib import cases as contrib_cases

    yield from contrib_cases(depth)
