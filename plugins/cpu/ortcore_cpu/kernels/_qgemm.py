"""Integer matrix products shared by the quantized kernels.

Every quantized kernel of the CPU provider (QLinearMatMul, MatMulInteger,
QLinearConv and ConvInteger, and the com.microsoft ops onnxruntime's
quantization tool emits) reduces to the functions here:

- :func:`int_matmul`: ``(a - a_zero) @ (b - b_zero)`` exactly, as int32;
- :func:`int_matmul_to_float`: the same product scaled to float32
  (``* a_scale * b_scale + bias``), the epilogue of dynamic quantization;
- :func:`requantize`: an int32 accumulator scaled in float32 (as
  onnxruntime does), rounded half to even,
  shifted by the output zero point and saturated into 8 bits;
- :func:`int_matmul_requantize`: the product and its requantization in one
  pass, never writing the int32 accumulator;
- :func:`dynamic_quantize`: DynamicQuantizeLinear (float32 to uint8 with
  the scale and zero point of its range), native (:mod:`._qlinear`).

uint8/int8 operands with per-tensor or per-row (A) / per-column (B) zero
points run on the native 8-bit GEMM (``_ext/qgemm.pyx``, the build this CPU
runs fastest: AVX-512 VNNI, AVX-VNNI, AVX2 or portable C); anything else
falls back on the numpy reference (:mod:`._qgemm_ref`), whose results the
native ones equal bit for bit. A constant B (a weight) is packed once:
:func:`pack_b` returns a :class:`PackedWeight` the products take as
``packed=``, and :class:`WeightCache` keeps one for a node's constant input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _qgemm_ref as ref
from ._isa import best_build
from ._qlinear import dynamic_quantize

__all__ = [
    "PackedWeight",
    "WeightCache",
    "dynamic_quantize",
    "int_matmul",
    "int_matmul_requantize",
    "int_matmul_to_float",
    "pack_b",
    "requantize",
]

ext = best_build("qgemm")

_SIGNED = {np.dtype(np.uint8): False, np.dtype(np.int8): True}

EXACT_K = 33025
"""Most terms a product may sum for its int32 accumulator to hold the exact
sum (``33025 * 255 * 255 < 2**31``): beyond it, the results that are
computed from the exact sum (requantized ones) fall back on numpy."""

requantize = ref.requantize


def _zero_vector(zero: Any, n: int) -> np.ndarray | None:
    """A zero point (None, one value, or ``n`` values) as int32 (n,); None
    for any other shape or a non-integer type."""
    if zero is None:
        return np.zeros(n, np.int32)
    z = np.asarray(zero)
    if z.dtype.kind not in "iub":
        return None
    if z.size == 1:
        return np.full(n, int(z.reshape(())), np.int32)
    if z.ndim == 1 and z.size == n:
        return z.astype(np.int32)
    return None


class PackedWeight:
    """A B (K, N) of uint8 or int8 and its zero points, packed once for the
    native GEMM (:func:`pack_b`); products take it as ``packed=``."""

    __slots__ = ("b", "b_zero", "k", "n", "data")

    def __init__(self, b: np.ndarray, b_zero: Any, data: Any) -> None:
        self.b = b
        self.b_zero = b_zero
        self.k, self.n = b.shape
        self.data = data


def pack_b(b: np.ndarray, b_zero: Any, threads: int = 1) -> PackedWeight | None:
    """``b`` (K, N) and its zero points (None, one, or one per column)
    packed for the native GEMM; None where it does not run them (other
    types or shapes: the products then use numpy)."""
    if b.dtype not in _SIGNED or b.ndim != 2:
        return None
    zb = _zero_vector(b_zero, b.shape[1])
    if zb is None:
        return None
    data = ext.pack_b(b.view(np.uint8), _SIGNED[b.dtype], zb, False, True, threads)
    return PackedWeight(b, b_zero, data)


class WeightCache:
    """The :class:`PackedWeight` of a node's constant B, packed at its first
    run and kept while the node is handed the same arrays (a constant
    initializer is the same array at every run)."""

    __slots__ = ("_key", "_packed", "threads")

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._key: tuple[Any, Any] | None = None
        self._packed: PackedWeight | None = None

    def get(self, b: np.ndarray, b_zero: Any) -> PackedWeight | None:
        """The packed ``b``, packed now if it is another array than last time."""
        key = (b, b_zero)
        if self._key is None or self._key[0] is not b or self._key[1] is not b_zero:
            self._packed = pack_b(b, b_zero, self.threads)
            self._key = key
        return self._packed


def _gemm_rows(
    a2: np.ndarray,
    za: np.ndarray,
    b2: np.ndarray | None,
    zb: np.ndarray | None,
    packed: Any,
    out: np.ndarray,
    threads: int,
    **epi: Any,
) -> None:
    """``out = epilogue((a2 - za) @ (b2 - zb))`` for 2-D ``a2`` and either
    ``b2`` with ``zb`` or an already packed B (``packed``)."""
    if out.size == 0:
        return
    sa = _SIGNED[a2.dtype]
    if packed is None:
        assert b2 is not None
        sb = _SIGNED[b2.dtype]
        flip = ext.MIXED_SIGNS and sa == sb
        packed = ext.pack_b(b2.view(np.uint8), sb, zb, False, flip or bool(za.any()), threads)
    else:
        flip = ext.MIXED_SIGNS and sa == packed.signed
    pa = ext.pack_a(a2.view(np.uint8), sa, za, flip, packed.zero_any, threads)
    ext.gemm(pa, packed, out, nthreads=threads, **epi)


def _native(
    a: np.ndarray,
    a_zero: Any,
    b: np.ndarray,
    b_zero: Any,
    dtype: Any,
    threads: int,
    packed: PackedWeight | None,
    **epi: Any,
) -> np.ndarray | None:
    """The product with ``dtype``'s epilogue on the native GEMM, batch axes
    broadcast as ``np.matmul`` does; None where it does not run it."""
    if a.dtype not in _SIGNED or a.ndim == 0:
        return None
    if packed is not None and (packed.b is not b or packed.b_zero is not b_zero):
        packed = None
    if packed is None and (b.dtype not in _SIGNED or b.ndim == 0):
        return None
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    a2 = a[None] if a_vec else a
    b2 = b[:, None] if b_vec else b
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    if b2.shape[-2] != k:
        return None
    za = _zero_vector(a_zero, m)
    zb = _zero_vector(b_zero, n)
    if za is None or zb is None:
        return None
    if b2.ndim == 2:
        batch = a2.shape[:-2]
        count = math.prod(batch)
        out = np.empty((count * m, n), dtype)
        rows = np.ascontiguousarray(a2).reshape(count * m, k)
        data = packed.data if packed is not None and not b_vec else None
        _gemm_rows(rows, np.tile(za, count), b2, zb, data, out, threads, **epi)
        y = out.reshape(*batch, m, n)
    else:
        try:
            batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        except ValueError:
            return None
        ab = np.broadcast_to(a2, (*batch, m, k))
        bb = np.broadcast_to(b2, (*batch, k, n))
        y = np.empty((*batch, m, n), dtype)
        for idx in np.ndindex(*batch):
            _gemm_rows(ab[idx], za, bb[idx], zb, None, y[idx], threads, **epi)
    if a_vec:
        y = y[..., 0, :]
    if b_vec:
        y = y[..., 0]
    return y


def int_matmul(
    a: np.ndarray,
    a_zero: np.ndarray | int | None,
    b: np.ndarray,
    b_zero: np.ndarray | int | None,
    *,
    threads: int = 1,
    packed: PackedWeight | None = None,
) -> np.ndarray:
    """``(a - a_zero) @ (b - b_zero)`` as int32, batch dimensions broadcast
    as ``np.matmul`` does.

    Args:
        a: uint8 or int8, shape ``(..., M, K)`` (or ``(K,)``).
        a_zero: None, a scalar, or one zero point per row of ``a`` (``(M,)``).
        b: uint8 or int8, shape ``(..., K, N)`` (or ``(K,)``).
        b_zero: None, a scalar, or one zero point per column of ``b`` (``(N,)``).
        threads: threads the native GEMM may use.
        packed: ``pack_b(b, b_zero)``, used when it was packed from these
            very arrays.
    """
    y = _native(a, a_zero, b, b_zero, np.int32, threads, packed)
    return ref.int_matmul(a, a_zero, b, b_zero) if y is None else y


def int_matmul_to_float(
    a: np.ndarray,
    a_zero: np.ndarray | int | None,
    a_scale: np.ndarray | float,
    b: np.ndarray,
    b_zero: np.ndarray | int | None,
    b_scale: np.ndarray | float,
    bias: np.ndarray | None = None,
    *,
    threads: int = 1,
    packed: PackedWeight | None = None,
) -> np.ndarray:
    """``int_matmul(a, a_zero, b, b_zero) * a_scale * b_scale (+ bias)`` in
    float32; ``b_scale`` is a scalar or one scale per column (``(N,)``),
    ``bias`` broadcasts against the last axis. ``threads`` and ``packed``
    as :func:`int_matmul`'s."""
    a_s = np.asarray(a_scale, dtype=np.float32)
    scale = (np.float32(a_s.reshape(())) * np.asarray(b_scale, dtype=np.float32)).reshape(-1)
    fbias = None if bias is None else np.asarray(bias, dtype=np.float32)
    late_bias = fbias is not None and fbias.ndim > 1
    if fbias is not None and not late_bias and fbias.size != scale.size:
        # the native epilogue takes scale and bias both per tensor or both per
        # column: a per-tensor one is repeated (the same products, the same sums)
        n = max(fbias.size, scale.size)
        scale = np.broadcast_to(scale, (n,)).copy() if scale.size == 1 else scale
        fbias = np.broadcast_to(fbias.reshape(-1), (n,)).copy() if fbias.size == 1 else fbias
    y = None
    if a_s.size == 1:
        y = _native(
            a, a_zero, b, b_zero, np.float32, threads, packed,
            scale=scale, fbias=None if late_bias or fbias is None else fbias.reshape(-1),
        )  # fmt: skip
    if y is None:
        return ref.int_matmul_to_float(a, a_zero, a_scale, b, b_zero, b_scale, bias)
    if late_bias:
        y = (y + fbias).astype(np.float32, copy=False)
    return y


def int_matmul_requantize(
    a: np.ndarray,
    a_zero: np.ndarray | int | None,
    b: np.ndarray,
    b_zero: np.ndarray | int | None,
    multiplier: np.ndarray | float,
    y_zero: np.ndarray | int | None,
    dtype: np.dtype | type,
    *,
    bias: np.ndarray | None = None,
    threads: int = 1,
    packed: PackedWeight | None = None,
) -> np.ndarray:
    """``requantize(int_matmul(a, a_zero, b, b_zero) + bias, multiplier,
    y_zero, dtype)`` in one pass (the sum with ``bias``, int32 per column,
    wrapping as onnxruntime's), with ``multiplier`` (float32, computed in
    float32 arithmetic from float32 scales) a scalar or one per column;
    ``threads`` and ``packed`` as :func:`int_matmul`'s."""
    out_dtype = np.dtype(dtype)
    mult = np.asarray(multiplier)
    if mult.dtype != np.float32:
        mult = mult.astype(np.float32)  # a Python float holding a float32
    mult = mult.reshape(-1)
    yz = 0 if y_zero is None else int(np.asarray(y_zero).reshape(()))
    ibias = None if bias is None else np.asarray(bias).astype(np.int32).reshape(-1)
    k = a.shape[-1]
    y = None
    if out_dtype in _SIGNED and k <= EXACT_K:
        y = _native(
            a, a_zero, b, b_zero, out_dtype, threads, packed, mult=mult, ibias=ibias, yzp=yz
        )  # fmt: skip
    if y is not None:
        return y
    acc = ref.int_matmul(a, a_zero, b, b_zero)
    if bias is not None:
        acc = acc + ibias
    return ref.requantize(acc, mult, yz, dtype)
