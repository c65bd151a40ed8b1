"""Inputs fed as views: the same values in memory that is not C-contiguous.

Users pass slices, transposes and reversed arrays to ``run``; the core hands
them to kernels as they are, so a kernel that reads the buffer as if it were
contiguous (ignoring strides) computes from the wrong elements. Generated
``layout_…`` cases feed their inputs through :func:`relayout`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LAYOUTS", "relayout"]

LAYOUTS = ("fortran", "strided", "reversed", "offset")
"""``fortran``: column-major order; ``strided``: every other element of a buffer
twice as wide along the last axis; ``reversed``: a negative stride along the
first axis (the view of a reversed copy); ``offset``: C-contiguous, but a view
that starts one row into a larger buffer (a kernel that reads ``x.base``, or
the buffer from its start, gets the wrong rows)."""


def relayout(x: np.ndarray, layout: str) -> np.ndarray:
    """A view with the values of ``x`` in the memory ``layout`` names.

    Arrays of fewer than one dimension (or ``fortran`` for fewer than two)
    cannot be laid out otherwise and are returned as a copy.

    Raises:
        ValueError: an unknown layout.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if x.ndim == 0 or x.size == 0:
        return x.copy()
    if layout == "fortran":
        return np.asfortranarray(x) if x.ndim >= 2 else x.copy()
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
        view = wide[..., ::2]
        view[...] = x
        return view
    if layout == "offset":
        padded = np.zeros((x.shape[0] + 2, *x.shape[1:]), x.dtype)
        padded[1:-1] = x
        return padded[1:-1]
    flipped = np.ascontiguousarray(x[::-1])
    return flipped[::-1]
