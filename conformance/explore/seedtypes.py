"""The records of a seed: one valid node of an op (:class:`Seed`) and its
inputs matched to the schema (:class:`InputSlot`). A leaf, so that the seed
cache (:mod:`conformance.explore.seedcache`) reads them back without making
seeds (:mod:`conformance.explore.seeds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["InputSlot", "Seed"]


@dataclass(frozen=True)
class InputSlot:
    """One actual input of a seed node, with its schema formal parameter.

    Attributes:
        name: the formal parameter's name.
        type_param: its type constraint (``T``) or a literal type (``tensor(int64)``).
        allowed: the tensor types it accepts (``tensor(float)``, ...).
        option: ``single``, ``optional`` or ``variadic``.
        data: computed on (redrawn) rather than steering (kept).
    """

    name: str
    type_param: str
    allowed: tuple[str, ...]
    option: str
    data: bool


@dataclass
class Seed:
    """A valid single node of one op, from an onnx node test."""

    test: str
    op: str
    domain: str
    opset: int
    attrs: dict[str, Any]
    inputs: list[np.ndarray | None]
    slots: list[InputSlot]
    outputs: int
    tolerance: tuple[float, float]
    graph_attrs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
