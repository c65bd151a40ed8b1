"""Unary math and activation functions: Abs, Neg, Exp, Log, Sqrt, Reciprocal,
Floor, Ceil, Tanh, Sigmoid, Erf, Relu, LeakyRelu, Clip, HardSigmoid, Elu,
Selu, Softplus, Gelu, Round, Sign, IsInf, IsNaN.

Every schema version from opset 1 is registered (the ``consumed_inputs``
attribute of opset 1 is ignored). Each keeps its input's dtype; bfloat16 and
float8 compute in float32. Float32 Relu, Erf and (erf) Gelu run in Cython.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from .._ext import elementwise as ext
from ._common import thread_count, threads_for
from ._versions import by_schema

_Fn = Callable[[np.ndarray], np.ndarray]


def computes_in_float32(dtype: np.dtype) -> bool:
    """Whether numpy lacks arithmetic for ``dtype`` (bfloat16, float8, ...)
    so kernels compute in float32 and round back."""
    return dtype.kind == "V" or (dtype.kind == "f" and dtype.itemsize == 1)


def float_unary(fn: _Fn) -> Compute:
    """Return a compute function applying ``fn`` elementwise, keeping the dtype."""

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        work = x.astype(np.float32) if computes_in_float32(x.dtype) else x
        with np.errstate(all="ignore"):
            out = np.asarray(fn(work))
        if out.dtype != x.dtype:
            out = out.astype(x.dtype)
        return (out,)

    return compute


_unary = float_unary


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


@by_schema("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Tanh")
def math_unary(info: NodeInfo) -> Compute:
    """Elementwise math function of one input."""
    return _unary(_MATH[info.op_type])


@by_schema("Sigmoid")
def sigmoid(info: NodeInfo) -> Compute:
    """Sigmoid: 1 / (1 + exp(-x))."""
    return _unary(lambda x: 1 / (1 + np.exp(-x)))


@by_schema("Erf")
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


_relu_generic = float_unary(lambda v: np.maximum(v, np.zeros((), v.dtype)))


@by_schema("Relu")
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
        return (_relu_generic(x)[0],)

    return compute


@by_schema("LeakyRelu")
def leaky_relu(info: NodeInfo) -> Compute:
    """LeakyRelu: x if x >= 0 else alpha * x."""
    alpha = float(info.attrs.get("alpha", 0.01))
    return _unary(lambda x: np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)))


@by_schema("HardSigmoid")
def hard_sigmoid(info: NodeInfo) -> Compute:
    """HardSigmoid: clip(alpha * x + beta, 0, 1)."""
    alpha = float(info.attrs.get("alpha", 0.2))
    beta = float(info.attrs.get("beta", 0.5))
    return _unary(lambda x: np.clip(x * alpha + beta, 0, 1))


@by_schema("Elu")
def elu(info: NodeInfo) -> Compute:
    """Elu: x if x >= 0 else alpha * (exp(x) - 1)."""
    alpha = float(info.attrs.get("alpha", 1.0))
    return _unary(lambda x: np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0))))


@by_schema("Selu")
def selu(info: NodeInfo) -> Compute:
    """Selu: gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    alpha = float(info.attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(info.attrs.get("gamma", 1.05070102214813232421875))
    return _unary(lambda x: gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))))


@by_schema("Softplus")
def softplus(info: NodeInfo) -> Compute:
    """Softplus: log(1 + exp(x)), computed without overflow."""
    return _unary(lambda x: np.logaddexp(np.zeros((), x.dtype), x))


@by_schema("Gelu")
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
    threads = thread_count(info)

    def exact(x: np.ndarray) -> np.ndarray:
        e = erf_compute(x * np.asarray(inv_sqrt2, x.dtype))[0]
        return np.asarray(0.5 * x * (1 + e))

    generic = _unary(exact)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype == np.float32 and x.size:
            return (gelu_f32(x, None, threads),)
        return (generic(x)[0],)

    return compute


def gelu_f32(x: np.ndarray, bias: np.ndarray | None, threads: int) -> np.ndarray:
    """Exact (erf) Gelu of float32 ``x`` (``+ bias`` along the last axis) in
    one Cython pass; erf's absolute error is below 3e-7 (see
    ``_ext/elementwise.pyx``)."""
    cols = x.shape[-1] if x.ndim else 1
    rows2d = np.ascontiguousarray(x).reshape(-1, cols)
    out = np.empty(x.shape, np.float32)
    b = np.zeros(0, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32)
    ext.gelu_f32(rows2d, b, out.reshape(-1, cols), threads_for(x.size * 8, threads))
    return out


@by_schema("Clip")
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
        if out is x:
            return (x.copy(),)
        return (np.asarray(out).astype(x.dtype, copy=False),)

    return by_input


@by_schema("Round")
def round_(info: NodeInfo) -> Compute:
    """Round to the nearest integer, halves to even."""
    return float_unary(np.round)


@by_schema("Sign")
def sign(info: NodeInfo) -> Compute:
    """Sign: -1, 0 or 1 (NaN stays NaN)."""
    return float_unary(np.sign)


@by_schema("IsNaN", params=("T1",))
def is_nan(info: NodeInfo) -> Compute:
    """Whether each element is NaN."""

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        work = x.astype(np.float32) if computes_in_float32(x.dtype) else x
        return (np.isnan(work),)

    return compute


@by_schema("IsInf", params=("T1",))
def is_inf(info: NodeInfo) -> Compute:
    """Whether each element is infinite, optionally only +inf or -inf."""
    positive = bool(info.attrs.get("detect_positive", 1))
    negative = bool(info.attrs.get("detect_negative", 1))

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        work = x.astype(np.float32) if computes_in_float32(x.dtype) else x
        if positive and negative:
            return (np.isinf(work),)
        if positive:
            return (np.isposinf(work),)
        if negative:
            return (np.isneginf(work),)
        return (np.zeros(x.shape, np.bool_),)

    return compute
