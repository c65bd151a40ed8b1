"""Cases built from each operator's ONNX schema: the space a provider claims, explored.

Each generator module of :data:`GENERATORS` has a function
``cases(depth: str) -> Iterator[Case]`` whose cases are of kind ``explore``,
named ``<Op>/<dimension>/<detail>`` and carry the dimension they vary
(:attr:`conformance.cases.Case.dimension`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from ..case import Case

__all__ = ["GENERATORS", "explore_cases"]

GENERATORS: tuple[str, ...] = (
    "attributes",
    "shapes",
    "dtypes",
    "values",
    "controls",
    "opsets",
    "dynamic",
    "accumulate",
    "contrib",
)
"""Modules of this package, each with ``cases(depth)``."""


def explore_cases(depth: str) -> Iterator[Case]:
    """Every explored case at ``depth`` (``quick`` or ``full``), names unique."""
    seen: set[str] = set()
    for name in GENERATORS:
        module = importlib.import_module(f"{__name__}.{name}")
        for case in module.cases(depth):
            if case.name not in seen:
                seen.add(case.name)
                yield case
