"""Unary math and activation functions: Abs, Neg, Exp, Log, Sqrt, Reciprocal,
Floor, Ceil, Tanh, Sigmoid, Erf, Relu, LeakyRelu, Clip, HardSigmoid, Elu,
Selu, Softplus, Gelu.

Each keeps its input's dtype. Float32 Relu and Erf run in Cython.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from .._ext import elementwise as ext
from . import registry
from ._common import FLOATS, NUMERIC, SIGNED_NUMERIC, thread_count, threads_for

_Fn = Callable[[np.ndarray], np.ndarray]


def _unary(fn: _Fn) -> Compute:
    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        with np.errstate(all="ignore"):
            out = fn(x)
        if out.dtype != x.dtype:
            out = out.astype(x.dtype)
        return (out,)

    return compute


_MATH: dict[str, _Fn] = {
    "Abs": np.abs,
    "Neg": np.negative,
    "Exp": np.exp,
    "Log": np.log,
    "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Tanh": np.tanh,
}


@registry.kernel("Abs", since=6, until=12, types={"T": NUMERIC})
@registry.kernel("Abs", since=13, types={"T": NUMERIC})
@registry.kernel("Neg", since=6, until=12, types={"T": SIGNED_NUMERIC})
@registry.kernel("Neg", since=13, types={"T": SIGNED_NUMERIC})
@registry.kernel("Exp", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Exp", since=13, types={"T": FLOATS})
@registry.kernel("Log", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Log", since=13, types={"T": FLOATS})
@registry.kernel("Sqrt", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Sqrt", since=13, types={"T": FLOATS})
@registry.kernel("Reciprocal", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Reciprocal", since=13, types={"T": FLOATS})
@registry.kernel("Floor", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Floor", since=13, types={"T": FLOATS})
@registry.kernel("Ceil", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Ceil", since=13, types={"T": FLOATS})
@registry.kernel("Tanh", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Tanh", since=13, types={"T": FLOATS})
def math_unary(info: NodeInfo) -> Compute:
    """Elementwise math function of one input (opset 6+)."""
    return _unary(_MATH[info.op_type])


@registry.kernel("Sigmoid", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Sigmoid", since=13, types={"T": FLOATS})
def sigmoid(info: NodeInfo) -> Compute:
    """Sigmoid: 1 / (1 + exp(-x))."""
    return _unary(lambda x: 1 / (1 + np.exp(-x)))


@registry.kernel("Erf", since=9, until=12, types={"T": NUMERIC})
@registry.kernel("Erf", since=13, types={"T": NUMERIC})
def erf(info: NodeInfo) -> Compute:
    """Erf, computed with C's ``erf`` (float16 and integers through float32/64)."""
    threads = thread_count(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        work = np.float64 if x.dtype in (np.float64, np.int64, np.int32) else np.float32
        flat: np.ndarray = np.ascontiguousarray(x, dtype=work).reshape(-1)
        out = np.empty_like(flat)
        ext.erf(flat, out, threads_for(flat.size, threads))
        return (out.reshape(x.shape).astype(x.dtype, copy=False),)

    return compute


@registry.kernel("Relu", since=6, until=12, types={"T": FLOATS})
@registry.kernel("Relu", since=13, until=13, types={"T": FLOATS})
@registry.kernel("Relu", since=14, types={"T": SIGNED_NUMERIC})
def relu(info: NodeInfo) -> Compute:
    """Relu: max(x, 0) (opset 14 adds signed integers)."""
    threads = thread_count(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype == np.float32:
            out = np.empty(x.shape, np.float32)
            ext.relu(
                np.ascontiguousarray(x).reshape(-1), out.reshape(-1), threads_for(x.size, threads)
            )
            return (out,)
        return (np.maximum(x, np.zeros((), x.dtype)),)

    return compute


@registry.kernel("LeakyRelu", since=6, until=15, types={"T": FLOATS})
@registry.kernel("LeakyRelu", since=16, types={"T": FLOATS})
def leaky_relu(info: NodeInfo) -> Compute:
    """LeakyRelu: x if x >= 0 else alpha * x."""
    alpha = float(info.attrs.get("alpha", 0.01))
    return _unary(lambda x: np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)))


@registry.kernel("HardSigmoid", since=6, until=21, types={"T": FLOATS})
@registry.kernel("HardSigmoid", since=22, types={"T": FLOATS})
def hard_sigmoid(info: NodeInfo) -> Compute:
    """HardSigmoid: clip(alpha * x + beta, 0, 1)."""
    alpha = float(info.attrs.get("alpha", 0.2))
    beta = float(info.attrs.get("beta", 0.5))
    return _unary(lambda x: np.clip(x * alpha + beta, 0, 1))


@registry.kernel("Elu", since=6, until=21, types={"T": FLOATS})
@registry.kernel("Elu", since=22, types={"T": FLOATS})
def elu(info: NodeInfo) -> Compute:
    """Elu: x if x >= 0 else alpha * (exp(x) - 1)."""
    alpha = float(info.attrs.get("alpha", 1.0))
    return _unary(lambda x: np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0))))


@registry.kernel("Selu", since=6, until=21, types={"T": FLOATS})
@registry.kernel("Selu", since=22, types={"T": FLOATS})
def selu(info: NodeInfo) -> Compute:
    """Selu: gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    alpha = float(info.attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(info.attrs.get("gamma", 1.05070102214813232421875))
    return _unary(lambda x: gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))))


@registry.kernel("Softplus", since=1, until=21, types={"T": FLOATS})
@registry.kernel("Softplus", since=22, types={"T": FLOATS})
def softplus(info: NodeInfo) -> Compute:
    """Softplus: log(1 + exp(x)), computed without overflow."""
    return _unary(lambda x: np.logaddexp(np.zeros((), x.dtype), x))


@registry.kernel("Gelu", since=20, types={"T": FLOATS})
def gelu(info: NodeInfo) -> Compute:
    """Gelu with ``approximate`` ``none`` (erf) or ``tanh``."""
    approximate = info.attrs.get("approximate", "none")
    if approximate == "tanh":
        c = math.sqrt(2 / math.pi)
        return _unary(lambda x: 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3))))
    if approximate != "none":
        raise ValueError(f"{info.describe()}: unknown approximate={approximate!r}")
    erf_compute = erf(info)
    inv_sqrt2 = 1 / math.sqrt(2)

    def exact(x: np.ndarray) -> np.ndarray:
        e = erf_compute(x * np.asarray(inv_sqrt2, x.dtype))[0]
        return np.asarray(0.5 * x * (1 + e))

    return _unary(exact)


@registry.kernel("Clip", since=6, until=10, types={"T": FLOATS})
@registry.kernel("Clip", since=11, until=11, types={"T": FLOATS})
@registry.kernel("Clip", since=12, until=12, types={"T": NUMERIC})
@registry.kernel("Clip", since=13, types={"T": NUMERIC})
def clip(info: NodeInfo) -> Compute:
    """Clip to [min, max]: attributes before opset 11, optional inputs after."""
    if info.opset < 11:
        lo = float(info.attrs.get("min", -3.4028234663852886e38))
        hi = float(info.attrs.get("max", 3.4028234663852886e38))

        def by_attr(x: np.ndarray) -> tuple[np.ndarray]:
            return (np.minimum(np.maximum(x, np.asarray(lo, x.dtype)), np.asarray(hi, x.dtype)),)

        return by_attr

    def by_input(
        x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        out = x
        if lo is not None:
            out = np.maximum(out, lo.astype(x.dtype, copy=False))
        if hi is not None:
            out = np.minimum(out, hi.astype(x.dtype, copy=False))
        return (np.array(out, dtype=x.dtype, copy=out is x),)

    return by_input
