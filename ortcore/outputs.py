"""Outputs as the user gets them: never sharing memory with a feed or a constant.

Kernels may return views (Reshape, Identity); handing the user a view of
their own input, or of one of the model's initializers, would let a write
into the output corrupt the input or the session. Such an output is copied;
any other is handed back as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["as_output", "roots_of"]


def roots_of(values: Iterable[Any]) -> set[int]:
    """Ids of the arrays owning the memory of the arrays among ``values``
    (a plan's constants, a run's feeds)."""
    return {id(_root(v)) for v in values if isinstance(v, np.ndarray)}


def as_output(value: Any, guarded: tuple[set[int], set[int]]) -> Any:
    """``value`` as the user gets it: a copy if it shares memory with what ``guarded``
    holds (the root ids of the constants and of this run's feeds, from
    :func:`roots_of`); numpy scalars become 0-d arrays."""
    if isinstance(value, np.ndarray):
        root = id(_root(value))
        if root in guarded[0] or root in guarded[1]:
            return value.copy()
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _root(array: np.ndarray) -> Any:
    """The array that owns the memory ``array`` views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array
