"""The integer enums of onnxruntime's API, printed as onnxruntime prints them."""

from __future__ import annotations

import enum

__all__ = ["OrtIntEnum"]


class OrtIntEnum(enum.IntEnum):
    """An ``IntEnum`` whose ``str()`` and ``f"{x}"`` give ``"Class.MEMBER"``.

    onnxruntime's enums (pybind11's) print their name; Python 3.11's ``IntEnum``
    prints the number, so a program that logs or compares
    ``str(ExecutionMode.ORT_PARALLEL)`` would see ``"1"``. Comparison, hashing
    and arithmetic stay the integer's; a format spec (``f"{x:d}"``) formats
    the integer.
    """

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)
