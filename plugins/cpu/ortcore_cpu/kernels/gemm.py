"""Matrix products: MatMul and Gemm.

A float32 product whose B is a constant initializer (a layer's weight) runs
on the packed GEMM (``_ext/gemm.pyx``): B is packed once, when first seen,
and every run packs only A. The rest goes through numpy's BLAS, which packs
B at every call: for the 128-row products of a transformer layer that
packing is what the packed GEMM saves (15-20% of each product's time).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._common import (
    DT,
    FLOATS,
    NUMERIC,
    FilterCache,
    constant_input,
    thread_count,
    threads_for,
)
from ._isa import best_build
from ._versions import per_schema_version

_BF16 = frozenset({DT.BFLOAT16})

ext = best_build("gemm")

PACKED_MIN_ROWS = 16
"""Fewest rows of A (its leading axes together) for the packed GEMM: with
fewer, a product is mostly the reading of B, which BLAS's matrix-vector
path does as fast without tiles of padding rows."""

PACKED_MIN_COLUMNS = 64
"""Fewest columns of B for the packed GEMM: its tiles are 32 columns wide
(padded), and packing A costs as much as the product when B is narrow
(512x512 times 512x8 to 512x32 ran 1.4-5x slower than numpy's)."""

PackedProduct = Callable[[np.ndarray, np.ndarray, "np.ndarray | None"], "np.ndarray | None"]
"""``product(a, b, bias)``: ``a @ b (+ bias)`` on the packed GEMM, or None
where the operands are not for it (the caller falls back to numpy)."""


def packed_product(info: NodeInfo, trans_b: bool = False) -> PackedProduct | None:
    """The packed GEMM for ``info``, whose input 1 (B, transposed if
    ``trans_b``) is a constant initializer; None if it is not, or if this
    CPU's build of the GEMM is the SSE2 baseline (BLAS is faster there).

    ``product(a, b, bias)`` takes float32 ``a`` (..., M, K) of at least
    :data:`PACKED_MIN_ROWS` rows in all, 2-D float32 ``b`` of at least
    :data:`PACKED_MIN_COLUMNS` columns and a float32
    ``bias`` (N,) or None, and returns ``a @ b + bias``, shaped
    (..., M, N); for other operands it returns None.
    """
    if ext.VECTOR < 8 or not constant_input(info, 1):
        return None
    threads = thread_count(info)
    packs = FilterCache(lambda b: ext.pack_b(b.T if trans_b else b, threads))

    def product(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
        if a.dtype != np.float32 or b.dtype != np.float32 or a.ndim < 2 or b.ndim != 2:
            return None
        k, n = b.shape[::-1] if trans_b else b.shape
        rows = math.prod(a.shape[:-1])
        if a.shape[-1] != k or rows < PACKED_MIN_ROWS or k == 0 or n < PACKED_MIN_COLUMNS:
            return None
        if bias is not None and (bias.dtype != np.float32 or bias.shape != (n,)):
            return None
        out = np.empty((*a.shape[:-1], n), np.float32)
        nt = threads_for(rows * k * n, threads)
        ext.sgemm(a.reshape(rows, k), packs.transform(b), n, bias, out.reshape(rows, n), nt)
        return out

    return product


def batched_matmul(
    a: np.ndarray, b: np.ndarray, threads: int, out: np.ndarray | None = None
) -> np.ndarray | None:
    """``a @ b`` for float32 ``a`` (..., M, K) and ``b`` (..., K, N) of the
    same one or two leading axes, any strides, one product per thread at a
    time (``batched_sgemm``; on one thread for a small batch, and never on
    more than the run's share of the cores, :func:`threads_for`): the
    per-head products of attention, which BLAS runs one after the other,
    each split over the threads. The result goes
    into ``out`` if given (any strides but along its rows). None for other
    operands (and on the SSE2 build), where the caller uses numpy."""
    if (
        ext.VECTOR < 8
        or a.dtype != np.float32
        or b.dtype != np.float32
        or not 3 <= a.ndim <= 4
        or a.shape[:-2] != b.shape[:-2]
        or a.shape[-1] != b.shape[-2]
        or a.shape[-1] == 0
    ):
        return None
    shape = (*a.shape[:-1], b.shape[-1])
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.shape != shape or out.dtype != np.float32 or out.strides[-1] != 4:
        return None
    nt = threads_for(math.prod(shape) * a.shape[-1], threads)
    if a.ndim == 3:
        ext.batched_sgemm(a[None], b[None], out[None], nt)
    else:
        ext.batched_sgemm(a, b, out, nt)
    return out


@per_schema_version("MatMul", params=("T",))
def matmul(info: NodeInfo) -> Compute:
    """MatMul with numpy semantics (batch broadcasting, 1-D operands); the
    packed GEMM for a float32 product with a constant 2-D B."""
    packed = packed_product(info)

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if packed is not None:
            y = packed(a, b, None)
            if y is not None:
                return (y,)
        if a.dtype.itemsize < 4 and a.dtype.kind not in "iub":  # float16, bfloat16
            out = np.matmul(a.astype(np.float32), b.astype(np.float32))
            return (out.astype(a.dtype),)
        return (np.matmul(a, b),)

    return compute


@per_schema_version("Gemm", until=8, types={"T": FLOATS})
@per_schema_version("Gemm", since=9, until=12, types={"T": NUMERIC})
@per_schema_version("Gemm", since=13, types={"T": NUMERIC | _BF16})
def gemm(info: NodeInfo) -> Compute:
    """Y = alpha * A' B' + beta * C.

    C is broadcast to Y's shape (opset 6 only with ``broadcast=1``, where
    otherwise it must already match, which broadcasting also accepts); it is
    optional from opset 11. A float32 product with a constant B and
    ``alpha`` 1 runs on the packed GEMM, C added there when it is a row
    (N,) and ``beta`` is 1.
    """
    alpha = float(info.attrs.get("alpha", 1.0))
    beta = float(info.attrs.get("beta", 1.0))
    trans_a = bool(info.attrs.get("transA", 0))
    trans_b = bool(info.attrs.get("transB", 0))
    packed = packed_product(info, trans_b) if alpha == 1.0 else None

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple[np.ndarray]:
        dtype = a.dtype
        if trans_a:
            a = a.T
        y = None
        if packed is not None:
            row = c is not None and beta == 1.0 and c.shape == (b.shape[0 if trans_b else 1],)
            y = packed(a, b, c if row else None)
            if y is not None and (row or c is None or beta == 0.0):
                return (y,)
        if trans_b:
            b = b.T
        if dtype.itemsize < 4 and dtype.kind not in "iub":  # float16, bfloat16
            a, b = a.astype(np.float32), b.astype(np.float32)
        if y is None:
            y = np.dot(a, b)
        if alpha != 1.0:
            y *= np.asarray(alpha, y.dtype)
        if c is not None and beta != 0.0:
            cc = c.astype(y.dtype, copy=False)
            if beta != 1.0:
                cc = cc * np.asarray(beta, y.dtype)
            y += cc
        return (y.astype(dtype, copy=False),)

    return compute
