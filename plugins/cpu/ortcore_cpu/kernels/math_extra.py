"""Matrix and index helpers: Einsum, CumSum, CumProd, Det, EyeLike, Trilu,
NonZero, OneHot."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size, to_numpy
from onnx_ir import DataType

from ._common import normalize_axis, scalar
from ._versions import by_schema
from .unary import computes_in_float32


def _work(x: np.ndarray) -> np.ndarray:
    """``x`` in a dtype numpy computes with (float32 for float16 / bfloat16)."""
    if computes_in_float32(x.dtype) or x.dtype == np.float16:
        return x.astype(np.float32)
    return x


@by_schema("Einsum")
def einsum(info: NodeInfo) -> Compute:
    """Einstein summation given by ``equation``; float16 accumulates in float32."""
    equation = str(info.attrs["equation"]).replace(" ", "")

    def compute(*xs: np.ndarray) -> tuple[np.ndarray]:
        out = np.einsum(equation, *(_work(x) for x in xs), optimize=len(xs) > 2)
        return (np.asarray(out).astype(xs[0].dtype, copy=False),)

    return compute


def _cumulative(
    fn: Callable[..., np.ndarray], identity: int, exclusive: bool, reverse: bool
) -> Compute:
    def compute(x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray]:
        a = normalize_axis(int(scalar(axis)), x.ndim)
        work = _work(x)  # float16 too: a float16 running sum loses the terms it adds
        if reverse:
            work = np.flip(work, a)
        out = fn(work, axis=a, dtype=work.dtype)
        if exclusive and x.shape[a]:
            head = np.full((*out.shape[:a], 1, *out.shape[a + 1 :]), identity, out.dtype)
            out = np.concatenate([head, np.delete(out, -1, axis=a)], axis=a)
        if reverse:
            out = np.flip(out, a)
        return (np.ascontiguousarray(out).astype(x.dtype, copy=False),)

    return compute


@by_schema("CumSum", params=("T",))
def cum_sum(info: NodeInfo) -> Compute:
    """Cumulative sum along the ``axis`` input (``exclusive``, ``reverse``)."""
    return _cumulative(
        np.cumsum, 0, bool(info.attrs.get("exclusive", 0)), bool(info.attrs.get("reverse", 0))
    )


@by_schema("CumProd", params=("T",))
def cum_prod(info: NodeInfo) -> Compute:
    """Cumulative product along the ``axis`` input (``exclusive``, ``reverse``)."""
    return _cumulative(
        np.cumprod, 1, bool(info.attrs.get("exclusive", 0)), bool(info.attrs.get("reverse", 0))
    )


@by_schema("Det")
def det(info: NodeInfo) -> Compute:
    """Determinant of each square matrix in the last two dims."""

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
        return (np.asarray(np.linalg.det(work)).astype(x.dtype, copy=False),)

    return compute


@by_schema("EyeLike", params=("T1",))
def eye_like(info: NodeInfo) -> Compute:
    """A 2-D tensor shaped like the input with ones on diagonal ``k``."""
    k = int(info.attrs.get("k", 0))
    dtype_attr = info.attrs.get("dtype")
    target = None if dtype_attr is None else to_numpy(DataType(int(dtype_attr)))

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim != 2:
            raise ValueError(f"{info.describe()}: input must be 2-D, got shape {x.shape}")
        dtype = x.dtype if target is None else target
        return (np.eye(x.shape[0], x.shape[1], k=k).astype(dtype),)

    return compute


@by_schema("Trilu")
def trilu(info: NodeInfo) -> Compute:
    """Keep the upper (``upper=1``) or lower triangle of the last two dims,
    from diagonal ``k``; zero the rest."""
    upper = bool(info.attrs.get("upper", 1))

    def compute(x: np.ndarray, k: np.ndarray | None = None) -> tuple[np.ndarray]:
        diag = 0 if k is None else int(scalar(k))
        rows, cols = x.shape[-2:]
        r = np.arange(rows)[:, None]
        c = np.arange(cols)[None, :]
        keep = (c - r >= diag) if upper else (c - r <= diag)
        zero = np.zeros((), x.dtype) if x.dtype != object else np.array("", dtype=object)
        return (np.where(keep, x, zero).astype(x.dtype, copy=False),)

    return compute


@by_schema("NonZero")
def non_zero(info: NodeInfo) -> Compute:
    """Indices of the non-zero elements, shaped (rank, count), int64."""

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        mask = (x.astype(np.float32) if computes_in_float32(x.dtype) else x).astype(bool)
        if x.ndim == 0:
            return (np.zeros((0, int(mask)), np.int64),)
        return (np.array(np.nonzero(mask), dtype=np.int64).reshape(x.ndim, -1),)

    return compute


@by_schema("OneHot", params=())
def one_hot(info: NodeInfo) -> Compute:
    """One-hot encode ``indices`` with ``depth`` classes along ``axis``;
    values = [off, on]. Negative indices count from the end; others out of
    range give all-off rows."""
    axis = int(info.attrs.get("axis", -1))

    def compute(indices: np.ndarray, depth: np.ndarray, values: np.ndarray) -> tuple[np.ndarray]:
        n = int(scalar(depth))
        if n < 1:
            raise ValueError(f"{info.describe()}: depth must be >= 1, got {n}")
        a = normalize_axis(axis, indices.ndim + 1)
        check_tensor_size((*indices.shape, n), values.dtype, info.describe())
        idx = indices.astype(np.float64) if computes_in_float32(indices.dtype) else indices
        idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + n, idx)
        classes = np.arange(n).reshape((n,) + (1,) * (indices.ndim - a))
        hot = np.expand_dims(idx, a) == classes
        flat = values.reshape(-1)
        return (np.where(hot, flat[1], flat[0]).astype(values.dtype, copy=False),)

    return compute


__all__ = ["cum_prod", "cum_sum", "det", "einsum", "eye_like", "non_zero", "one_hot", "trilu"]
