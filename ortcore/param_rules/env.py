"""The view of one node that the rules' expressions and checks read: its
inputs' shapes (as far as known), values and attributes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Dims = tuple[int | None, ...]
"""A shape as far as it is known: ``None`` for a dim not known."""


class Env:
    """What one node offers its checks.

    Args:
        names: the op's input names, in order (as its table entry gives them).
        shapes: each input's shape (``None`` for an unknown rank); an input
            the node omits is absent from ``present``.
        present: for each input, whether the node has it.
        attrs: the node's attributes, the schema's defaults applied.
        value: an input's contents as an array where known (a constant, or
            at run time the array itself), else ``None``.
        outputs: how many outputs the node has.
    """

    __slots__ = ("names", "attrs", "outputs", "_shapes", "_value")

    def __init__(
        self,
        names: Sequence[str],
        shapes: Sequence[Dims | None],
        present: Sequence[bool],
        attrs: Mapping[str, Any],
        value: Callable[[int], np.ndarray | None],
        outputs: int = 1,
    ) -> None:
        self.names = tuple(names)
        self.attrs = attrs
        self.outputs = outputs
        # only the inputs the node has (zip stops at the shorter: trailing
        # optional inputs a node leaves out are absent)
        self._shapes = {n: s for n, s, p in zip(self.names, shapes, present) if p}
        self._value = value

    def has(self, name: str) -> bool:
        """Whether the node has input ``name``."""
        return name in self._shapes

    def shape(self, name: str) -> Dims | None:
        """Input ``name``'s shape as far as known (``None``: absent or rank unknown)."""
        return self._shapes.get(name)

    def value(self, name: str) -> np.ndarray | None:
        """Input ``name``'s contents where known."""
        if name not in self._shapes:
            return None
        return self._value(self.names.index(name))
