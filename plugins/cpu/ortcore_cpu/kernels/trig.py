"""Trigonometric and hyperbolic functions: Sin, Cos, Tan, Asin, Acos, Atan,
Sinh, Cosh, Asinh, Acosh, Atanh. Each keeps its input's dtype."""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._versions import by_schema
from .unary import float_unary

_FUNCS = {
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
}


@by_schema(*_FUNCS)
def trig(info: NodeInfo) -> Compute:
    """Elementwise trigonometric or hyperbolic function (opset 7 / 9 and 22)."""
    return float_unary(_FUNCS[info.op_type])


__all__ = ["trig"]
