"""The shape of an entry of the parameter table (:class:`OpRules`, its
:class:`Example`), the domains' names, and small array makers for examples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..param_rules import Check

__all__ = ["FUSED", "ML", "MS", "Example", "OpRules"]

MS = "com.microsoft"
ML = "ai.onnx.ml"
FUSED = "com.ortcore"


@dataclass(frozen=True)
class Example:
    """A valid instance of an op: each input a shape (random float32 data),
    or an array; the attributes; the opset to build it at (default: the
    entry's first)."""

    inputs: Mapping[str, tuple[int, ...] | np.ndarray | None]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    opset: int | None = None
    outputs: int = 1


@dataclass(frozen=True)
class OpRules:
    """The checks of one op over a range of opsets (``until`` inclusive)."""

    op: str
    inputs: tuple[str, ...]
    checks: tuple[Check, ...]
    example: Example
    since: int = 1
    until: int | None = None
    domain: str = ""
    variants: tuple[Example, ...] = ()
    """More valid instances, for checks the first does not reach (a ``when``
    that holds only for other attributes)."""

    @property
    def examples(self) -> tuple[Example, ...]:
        """``example`` and its ``variants``."""
        return (self.example, *self.variants)

    def covers(self, opset: int) -> bool:
        """Whether the entry applies at ``opset`` of its domain."""
        return self.since <= opset and (self.until is None or opset <= self.until)


def _u8(*shape: int) -> np.ndarray:
    return np.asarray(np.arange(int(np.prod(shape)), dtype=np.uint8).reshape(shape) % 7 + 1)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _s(value: int) -> np.ndarray:
    return np.array(value, dtype=np.int64)


def _f(*shape: int, value: float = 0.5) -> np.ndarray:
    return np.full(shape, value, dtype=np.float32)
