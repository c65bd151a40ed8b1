"""Unique: the distinct elements (or slices along an axis) of a tensor."""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._common import normalize_axis
from ._versions import per_schema_version


def _unique(
    x: np.ndarray, axis: int | None, sorted_: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (values, first indices, inverse indices, counts), int64 indices.

    Sorted order is numpy's; unsorted order is that of first occurrence.
    """
    data = x.reshape(-1) if axis is None else x
    # ml_dtypes types (bfloat16, float8, int4: kind "V") compare exactly as float32.
    key = data.astype(np.float32) if data.dtype.kind == "V" else data
    _, first, inverse, counts = np.unique(
        key, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    values = np.take(data, first, axis=0 if axis is None else axis)
    i64 = np.int64
    return values, first.astype(i64), inverse.astype(i64), counts.astype(i64)


@per_schema_version("Unique")
def unique(info: NodeInfo) -> Compute:
    """Distinct elements of the flattened input, or distinct slices along
    ``axis``: outputs (Y, indices of first occurrence, inverse indices,
    counts), sorted ascending if ``sorted`` (default) else in order of
    first occurrence."""
    axis_attr = info.attrs.get("axis")
    sorted_ = bool(info.attrs.get("sorted", 1))
    n_out = info.num_outputs

    def compute(x: np.ndarray) -> tuple[np.ndarray, ...]:
        axis = None if axis_attr is None else normalize_axis(int(axis_attr), x.ndim)
        return _unique(x, axis, sorted_)[:n_out]

    return compute
