"""Unary math and activation functions: Abs, Neg, Exp, Log, Sqrt, Reciprocal,
Floor, Ceil, Tanh, Sigmoid, Erf, Relu, LeakyRelu, Clip, HardSigmoid, Elu,
Selu, Softplus, Gelu, Round, Sign, IsInf, IsNaN.

Every schema version from opset 1 is registered (the ``consumed_inputs``
attribute of opset 1 is ignored). Each keeps its input's dtype; bfloat16 and
float8 compute in float32. Float32 Erf and the activations (Relu, LeakyRelu,
Clip, Sigmoid, HardSigmoid, Tanh, Elu, Selu, Softplus, Gelu in both forms)
run in Cython, through :func:`activation_f32` (which ``activations.py``,
``contrib.py`` and the fused ops use too); the other dtypes run numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable

import numpy as np
from ep_sdk import Compute, NodeInfo

from .._ext import elementwise as ext
from ._common import is_tail, thread_count, threads_for
from ._isa import activation_module
from ._paths import NATIVE, float32_path
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


native = activation_module()
"""The build of the Cython activation kernel this CPU runs fastest (``_isa.py``)."""
Act = native.Activation
"""The activations of the Cython kernel (its ``op`` codes)."""

_HEAVY = frozenset({Act.SIGMOID, Act.TANH, Act.ELU, Act.SELU, Act.CELU, Act.SOFTPLUS,
                    Act.MISH, Act.SWISH, Act.GELU, Act.GELU_TANH})  # fmt: skip
"""Activations of exp, log or erf: worth a thread on fewer elements."""
_NO_BIAS = np.zeros(0, np.float32)


def activation_f32(
    op: int,
    x: np.ndarray,
    *,
    threads: int,
    alpha: float = 0.0,
    beta: float = 0.0,
    bias: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``op(x + bias)`` of float32 ``x`` in one Cython pass (see
    ``_ext/activation.pyx`` for ``op``, ``alpha``, ``beta`` and the accuracy).

    Args:
        bias: added along the last axis (its length divides ``x.size``).
        out: a C-contiguous float32 array of ``x``'s size to write (``x``
            itself for in place); a new one by default.
        threads: the most threads to split the work over.

    Raises:
        ValueError: ``out`` is not C-contiguous float32 (the kernel would
            write a copy), or the bias's length does not divide ``x.size``.
    """
    if out is None:
        out = np.empty(x.shape, np.float32)
    elif out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError("activation_f32: out must be a C-contiguous float32 array")
    b = _NO_BIAS if bias is None else np.ascontiguousarray(bias, np.float32).reshape(-1)
    flat = np.ascontiguousarray(x, np.float32).reshape(-1)
    work = x.size * (8 if op in _HEAVY else 1)
    native.activation_f32(op, flat, b, out.reshape(-1), alpha, beta, threads_for(work, threads))
    return out


_SHARED: dict[Hashable, Compute] = {}
"""Stateless compute functions, by what they do (:func:`shared_compute`)."""

_SHARED_MAX = 1024


def shared_compute(key: Hashable, make: Callable[[], Compute]) -> Compute:
    """The compute function ``key`` names, made by ``make`` the first time:
    kernels that hold no state and do the same thing share one, so that a
    graph of many of them (an unrolled network has hundreds of thousands)
    does not hold a closure for each."""
    shared = _SHARED.get(key)
    if shared is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()  # many distinct keys (alphas): keep the table small
        shared = _SHARED[key] = make()
    return shared


def native_activation(info: NodeInfo, op: int, fn: _Fn, alpha: float = 0.0,
                      beta: float = 0.0) -> Compute:  # fmt: skip
    """A compute function: ``op`` in Cython for float32 (:func:`activation_f32`),
    ``fn`` through numpy (:func:`float_unary`) for the other dtypes.

    ``fn`` must do what ``op``, ``alpha`` and ``beta`` say: nodes with the
    same three and the same thread count share one compute function
    (:func:`shared_compute`).
    """
    threads = thread_count(info)
    key = (op, float(alpha).hex(), float(beta).hex(), threads)  # hex: -0.0 is not 0.0
    return shared_compute(key, lambda: _native_activation(op, fn, alpha, beta, threads))


def _native_activation(op: int, fn: _Fn, alpha: float, beta: float, threads: int) -> Compute:
    """:func:`native_activation`'s compute function, made anew."""
    generic = float_unary(fn)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype == np.float32:
            return (activation_f32(op, x, alpha=alpha, beta=beta, threads=threads),)
        return (generic(x)[0],)

    return compute


def native_activation_with_bias(info: NodeInfo, op: int, fn: _Fn,
                                alpha: float = 0.0) -> Compute:  # fmt: skip
    """A compute function of ``(X, bias=None)``: ``op(X + bias)`` for float32
    in Cython (one pass with a bias along X's last axes, else on numpy's
    sum), ``fn`` of numpy's sum for the other dtypes."""
    generic = float_unary(fn)
    threads = thread_count(info)

    def compute(x: np.ndarray, bias: np.ndarray | None = None) -> tuple[np.ndarray]:
        if x.dtype != np.float32 or (bias is not None and bias.dtype != np.float32):
            return (generic(x if bias is None else x + bias)[0],)
        if bias is None or is_tail(bias.shape, x.shape):
            return (activation_f32(op, x, alpha=alpha, bias=bias, threads=threads),)
        s = x + bias  # another broadcast: a fresh sum, activated in place
        return (activation_f32(op, s, alpha=alpha, out=s, threads=threads),)

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
}


@by_schema("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil")
def math_unary(info: NodeInfo) -> Compute:
    """Elementwise math function of one input (one compute function for
    every node of an op type)."""
    return shared_compute(info.op_type, lambda: float_unary(_MATH[info.op_type]))


@by_schema("Tanh")
@float32_path(NATIVE)
def tanh(info: NodeInfo) -> Compute:
    """Tanh."""
    return native_activation(info, Act.TANH, np.tanh)


@by_schema("Sigmoid")
@float32_path(NATIVE)
def sigmoid(info: NodeInfo) -> Compute:
    """Sigmoid: 1 / (1 + exp(-x))."""
    return native_activation(info, Act.SIGMOID, lambda x: 1 / (1 + np.exp(-x)))


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
@float32_path(NATIVE)
def relu(info: NodeInfo) -> Compute:
    """Relu: max(x, 0) (opset 14 adds signed integers); one compute function
    for every Relu of a thread count."""
    threads = thread_count(info)
    return shared_compute(("Relu", threads), lambda: _relu(threads))


def _relu(threads: int) -> Compute:
    """:func:`relu`'s compute function, made anew."""

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
@float32_path(NATIVE)
def leaky_relu(info: NodeInfo) -> Compute:
    """LeakyRelu: x if x >= 0 else alpha * x."""
    alpha = float(info.attrs.get("alpha", 0.01))
    return native_activation(
        info, Act.LEAKY_RELU, lambda x: np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)), alpha
    )


@by_schema("HardSigmoid")
@float32_path(NATIVE)
def hard_sigmoid(info: NodeInfo) -> Compute:
    """HardSigmoid: clip(alpha * x + beta, 0, 1)."""
    alpha = float(info.attrs.get("alpha", 0.2))
    beta = float(info.attrs.get("beta", 0.5))
    return native_activation(
        info, Act.HARD_SIGMOID, lambda x: np.clip(x * alpha + beta, 0, 1), alpha, beta
    )


@by_schema("Elu")
@float32_path(NATIVE)
def elu(info: NodeInfo) -> Compute:
    """Elu: x if x >= 0 else alpha * (exp(x) - 1)."""
    alpha = float(info.attrs.get("alpha", 1.0))
    return native_activation(
        info, Act.ELU, lambda x: np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0))), alpha
    )


@by_schema("Selu")
@float32_path(NATIVE)
def selu(info: NodeInfo) -> Compute:
    """Selu: gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    alpha = float(info.attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(info.attrs.get("gamma", 1.05070102214813232421875))
    return native_activation(
        info, Act.SELU,
        lambda x: gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))), alpha, gamma,
    )  # fmt: skip


@by_schema("Softplus")
@float32_path(NATIVE)
def softplus(info: NodeInfo) -> Compute:
    """Softplus: log(1 + exp(x)), computed without overflow."""
    return native_activation(info, Act.SOFTPLUS, lambda x: np.logaddexp(np.zeros((), x.dtype), x))


def gelu_numpy(approximate: str) -> _Fn:
    """Gelu's formula in numpy, ``approximate`` ``none`` (erf) or ``tanh``.

    Raises:
        ValueError: another ``approximate``.
    """
    if approximate == "tanh":
        c = math.sqrt(2 / math.pi)
        return lambda x: 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3)))
    if approximate != "none":
        raise ValueError(f"unknown approximate={approximate!r}")
    inv_sqrt2 = 1 / math.sqrt(2)

    def exact(x: np.ndarray) -> np.ndarray:
        work = np.float64 if x.dtype == np.float64 else np.float32
        flat: np.ndarray = np.ascontiguousarray(x * np.asarray(inv_sqrt2, x.dtype), work)
        flat = flat.reshape(-1)
        e = np.empty_like(flat)
        ext.erf(flat, e, 1)
        return np.asarray(0.5 * x * (1 + e.reshape(x.shape).astype(x.dtype, copy=False)))

    return exact


def gelu_op(info: NodeInfo) -> int:
    """The Cython activation of ``info``'s Gelu (its ``approximate``).

    Raises:
        ValueError: ``approximate`` is neither ``none`` nor ``tanh``.
    """
    approximate = info.attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"{info.describe()}: unknown approximate={approximate!r}")
    return Act.GELU if approximate == "none" else Act.GELU_TANH


@by_schema("Gelu")
@float32_path(NATIVE)
def gelu(info: NodeInfo) -> Compute:
    """Gelu with ``approximate`` ``none`` (erf) or ``tanh``; the exact form
    within 5e-7 absolute (see ``_ext/activation.pyx``)."""
    op = gelu_op(info)
    return native_activation(info, op, gelu_numpy("none" if op == Act.GELU else "tanh"))


@by_schema("Clip")
@float32_path(NATIVE)
def clip(info: NodeInfo) -> Compute:
    """Clip to [min, max]: attributes before opset 11, optional inputs after."""
    threads = thread_count(info)
    if info.opset < 11:
        lo = float(info.attrs.get("min", -3.4028234663852886e38))
        hi = float(info.attrs.get("max", 3.4028234663852886e38))

        def by_attr(x: np.ndarray) -> tuple[np.ndarray]:
            if x.dtype == np.float32:
                return (activation_f32(Act.CLIP, x, alpha=lo, beta=hi, threads=threads),)
            return (np.minimum(np.maximum(x, np.asarray(lo, x.dtype)), np.asarray(hi, x.dtype)),)

        return by_attr

    def by_input(
        x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        if x.dtype == np.float32 and all(b is None or b.size == 1 for b in (lo, hi)):
            a = -np.inf if lo is None else float(lo.reshape(-1)[0])
            b = np.inf if hi is None else float(hi.reshape(-1)[0])
            if not (math.isnan(a) or math.isnan(b)):  # numpy's NaN bounds: all NaN
                return (activation_f32(Act.CLIP, x, alpha=a, beta=b, threads=threads),)
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
