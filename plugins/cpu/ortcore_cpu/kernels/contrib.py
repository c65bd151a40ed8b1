"""Activations of onnxruntime's contrib domain ``com.microsoft`` that model
exporters and onnxruntime's transformer optimizer write: Gelu, BiasGelu,
FastGelu (the tanh Gelu, bias optional) and QuickGelu
(``x * sigmoid(alpha * x)``). Float32 runs in Cython (a bias in the same
pass), float16 and float64 in numpy. And SparseToDenseMatMul: a sparse
tensor input (COO or CSR, fed as ``OrtValue.ort_value_from_sparse_tensor``)
times a dense matrix, in numpy without forming the dense A.

onnx has no schemas for this domain: types are constrained per input, and
attributes default as onnxruntime's contrib schemas say.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import DT, FLOATS
from ._paths import NATIVE, float32_path
from .activations import swish_numpy
from .unary import Act, gelu_numpy, native_activation, native_activation_with_bias

MS_DOMAIN = "com.microsoft"
"""onnxruntime's contrib operator domain."""

_X: dict[str | int, frozenset[DT]] = {0: FLOATS}
_X_BIAS: dict[str | int, frozenset[DT]] = {0: FLOATS, 1: FLOATS}


@registry.kernel("Gelu", domain=MS_DOMAIN, types=_X)
@float32_path(NATIVE)
def gelu(info: NodeInfo) -> Compute:
    """Gelu, exact (erf) form."""
    return native_activation(info, Act.GELU, gelu_numpy("none"))


@registry.kernel("BiasGelu", domain=MS_DOMAIN, types=_X_BIAS)
@float32_path(NATIVE)
def bias_gelu(info: NodeInfo) -> Compute:
    """``Gelu(A + B)``, exact form; B is a bias along A's last axis."""
    return native_activation_with_bias(info, Act.GELU, gelu_numpy("none"))


@registry.kernel("FastGelu", domain=MS_DOMAIN, types=_X_BIAS)
@float32_path(NATIVE)
def fast_gelu(info: NodeInfo) -> Compute:
    """Gelu's tanh form of ``X + bias`` (bias optional)."""
    return native_activation_with_bias(info, Act.GELU_TANH, gelu_numpy("tanh"))


@registry.kernel("QuickGelu", domain=MS_DOMAIN, types=_X)
@float32_path(NATIVE)
def quick_gelu(info: NodeInfo) -> Compute:
    """``x * sigmoid(alpha * x)``, ``alpha`` 1.702 by default."""
    alpha = float(info.attrs.get("alpha", 1.702))
    return native_activation(info, Act.SWISH, swish_numpy(alpha), alpha)


_SPMM_TYPES = frozenset({DT.FLOAT, DT.DOUBLE, DT.INT32, DT.INT64, DT.UINT32, DT.UINT64})
_COO, _CSR = 1, 2  # OrtSparseFormat numbers


@registry.kernel("SparseToDenseMatMul", domain=MS_DOMAIN, types={0: _SPMM_TYPES, 1: _SPMM_TYPES})
def sparse_to_dense_matmul(info: NodeInfo) -> Compute:
    """``Y = alpha * op(A) @ op(B)``: A a 2-D sparse tensor (COO, coordinates or
    linear indices, or CSR), B and Y dense; ``transA``/``transB`` transpose.

    As onnxruntime 1.32 computes it, ``alpha`` scales float32 results only
    (double and integer results are ``op(A) @ op(B)``).
    """
    alpha = float(info.attrs.get("alpha", 1.0))
    trans_a = bool(info.attrs.get("transA", 0))
    trans_b = bool(info.attrs.get("transB", 0))

    def compute(a: Any, b: np.ndarray) -> tuple[np.ndarray]:
        rows, cols, vals, (m, k) = _sparse_2d(a, info)
        if trans_a:
            rows, cols, m, k = cols, rows, k, m
        bm = b.T if trans_b else b
        if bm.ndim != 2 or bm.shape[0] != k:
            raise ValueError(
                f"{info.describe()}: op(A) is {m}x{k} but op(B) has shape {bm.shape}: "
                "the inner dimensions must match"
            )
        if vals.dtype != b.dtype:
            raise ValueError(f"{info.describe()}: A is {vals.dtype} but B is {b.dtype}")
        y = np.zeros((m, bm.shape[1]), dtype=b.dtype)
        if vals.size:
            # one term per non-zero, summed per output row (rows sorted, reduceat)
            order = np.argsort(rows, kind="stable")
            r = rows[order]
            terms = vals[order, None] * bm[cols[order]]
            starts = np.flatnonzero(np.concatenate(([True], r[1:] != r[:-1])))
            y[r[starts]] = np.add.reduceat(terms, starts, axis=0)
        if alpha != 1.0 and y.dtype == np.float32:
            y *= np.float32(alpha)
        return (y,)

    return compute


def _sparse_2d(
    a: Any, info: NodeInfo
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """Row and column index and value of each non-zero of a 2-D sparse tensor,
    and its dense shape (read through the SparseTensor API, not its class)."""
    if not hasattr(a, "as_coo_view"):
        raise TypeError(
            f"{info.describe()}: input A must be a sparse tensor, got {type(a).__name__}"
        )
    shape = [int(d) for d in a.dense_shape()]
    if len(shape) != 2:
        raise ValueError(f"{info.describe()}: A must be 2-D, its dense shape is {shape}")
    m, k = shape
    vals = np.asarray(a.values()).reshape(-1)
    if int(a.format()) == _CSR:
        view = a.as_csrc_view()
        outer = np.asarray(view.outer(), np.int64)
        rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(outer))
        cols = np.asarray(view.inner(), np.int64)
    elif int(a.format()) == _COO:
        idx = np.asarray(a.as_coo_view().indices(), np.int64)
        if idx.ndim == 1:  # linear indices
            rows, cols = np.divmod(idx, max(k, 1))
        else:
            rows, cols = idx.reshape(-1, 2)[:, 0], idx.reshape(-1, 2)[:, 1]
    else:
        raise ValueError(f"{info.describe()}: A's sparse format {a.format()!r} is not COO or CSR")
    if rows.shape != vals.shape or cols.shape != vals.shape:
        raise ValueError(f"{info.describe()}: A has {vals.size} values but not as many indices")
    if vals.size and (rows.min() < 0 or rows.max() >= m or cols.min() < 0 or cols.max() >= k):
        raise ValueError(f"{info.describe()}: an index of A lies outside its shape {shape}")
    return rows, cols, vals, (m, k)


__all__ = ["MS_DOMAIN", "bias_gelu", "fast_gelu", "gelu", "quick_gelu", "sparse_to_dense_matmul"]
