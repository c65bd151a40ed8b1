"""What a case is: :class:`Case`, its data sets, and the kinds of cases.

A leaf of the package: the case sources (:mod:`conformance.cases`,
:mod:`conformance.generated`, :mod:`conformance.explore`) build on it, and
:mod:`conformance.cases` gathers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import onnx

from .precision import Tolerance

__all__ = ["DEPTHS", "KINDS", "MODEL_KINDS", "Case", "DataSet"]

MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator", "light")
KINDS = ("node", "generated", "explore", *MODEL_KINDS)
DEPTHS = ("quick", "full")
"""How far ``explore`` goes: ``quick`` (CI) or ``full``."""

DataSet = tuple[list[Any], list[Any]]


@dataclass
class Case:
    """One case: a model and (inputs, expected outputs) pairs.

    ``load`` builds the model and data sets on first use, so listing cases
    stays cheap; ``tolerance`` is the case's own (``None``: dtype defaults).
    A ``large`` case (hundreds of MB of weights) is built again on each use
    instead of being kept, and the session gets it as a file whose weights
    are external data, so that they are not serialized and parsed again.
    ``layout`` names how the inputs are laid out in memory when they are fed
    (:data:`conformance.layout.LAYOUTS`; ``""``: C-contiguous arrays).
    ``dimension`` names what an explored case varies (``attribute``, ``rank``,
    ``dtype``, ``empty``, ``dynamic``, ...; ``""`` for the other kinds);
    ``seed`` the seed its values were drawn with (``None``: values are fixed).
    """

    name: str
    kind: str
    load: Callable[[], tuple[onnx.ModelProto, list[DataSet]]]
    tolerance: Tolerance | None = None
    large: bool = False
    layout: str = ""
    dimension: str = ""
    seed: int | None = None
    _loaded: tuple[onnx.ModelProto, list[DataSet]] | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        """``<kind>/<name>``."""
        return f"{self.kind}/{self.name}"

    @property
    def mixed(self) -> bool:
        """Model-level case: the CPU provider may take nodes the provider declines."""
        return self.kind in MODEL_KINDS

    def materialize(self) -> tuple[onnx.ModelProto, list[DataSet]]:
        """The model and its data sets (built once, unless the case is ``large``)."""
        if self._loaded is not None:
            return self._loaded
        loaded = self.load()
        if not self.large:
            self._loaded = loaded
        return loaded
