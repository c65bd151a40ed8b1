"""Winograd F(2x2, 3x3) (Lavin & Gray 2015) for 2-D 3x3 Convs with stride 1,
dilation 1 and one group: Cython input and output transforms around 16
matmuls (BLAS, or the provider's packed GEMM: :data:`WINOGRAD_BATCHED_MAX_WORK`),
which do 16 multiplies per 2x2 output tile and channel pair where im2col's
matmul does 36. The filter transform of a constant weight is computed once
per kernel (:class:`WinogradFilters`).
"""

from __future__ import annotations

import numpy as np

from ..._ext import winograd as wino
from .. import gemm
from .._common import FilterCache, f32_contiguous, threads_for
from .._window import Window
from . import selection
from .common import Clamp, _epilogue, _scratch

# Winograd F(2x2, 3x3): Y = A^T [(G g G^T) * (B^T d B)] A per 2x2 output tile.
_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
_WINOGRAD_GG = np.kron(_WINOGRAD_G, _WINOGRAD_G)
"""(16, 9): row 4*i + j maps a row-major 3x3 filter to element (i, j) of G g G^T."""


_WINOGRAD_BLOCK_BYTES = 8 << 20
"""Bytes of transformed input and output (V and M) per step: bigger images
go through in bands of tile rows, smaller ones several at a time."""


def winograd_filter(w: np.ndarray) -> np.ndarray:
    """Winograd filter transform ``U = G g G^T`` of 3x3 filters.

    Args:
        w: (M, C, 3, 3) filters, any float dtype.

    Returns:
        float32 (16, M, C): ``U[4*i + j, m, c]`` is element (i, j) of the 4x4
        transform of ``w[m, c]``.
    """
    m, c = w.shape[:2]
    g = f32_contiguous(w).reshape(m * c, 9)
    return np.matmul(_WINOGRAD_GG, g.T).reshape(16, m, c)


class WinogradFilters(FilterCache):
    """The Winograd filter transform (:func:`winograd_filter`) of a Conv
    node's last weight, kept (see :class:`FilterCache`)."""

    def __init__(self) -> None:
        super().__init__(lambda w: winograd_filter(w))
        self.packed = FilterCache(lambda u: gemm.ext.pack_a_batch(u))
        """The transform packed for the packed GEMM (see
        :data:`WINOGRAD_BATCHED_MAX_WORK`), kept for the last transform."""


def _plane_size(n: int) -> int:
    """``n`` rounded up to a multiple of 16 floats that is an odd number of
    64-byte lines: the 16 planes of V and M then fall in 16 different cache
    sets (planes 4 KiB apart would evict each other in the transforms)."""
    size = -(-n // 16) * 16
    return size if (size // 16) % 2 else size + 16


def _conv_winograd(
    x: np.ndarray,
    u: np.ndarray,
    win: Window,
    threads: int,
    packed: FilterCache | None = None,
    bias: np.ndarray | None = None,
    clamp: Clamp | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Winograd F(2x2, 3x3) convolution of contiguous float32 ``x`` (N, C,
    H, W) with filter transform ``u`` (16, M, C); stride 1. ``packed``
    keeps ``u`` packed for the packed GEMM (packed at each call that needs
    it without). The output transform adds ``bias`` (M values, or None) and
    clamps to ``clamp`` as it writes the output: into ``out`` if given (the
    output's shape, rows contiguous: a FusedConvConcat's channels too)."""
    n, c = x.shape[:2]
    m = u.shape[1]
    oh, ow = win.out
    ph, pw = win.pads_begin
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    y = np.empty((n, m, oh, ow), np.float32) if out is None else out
    checked, _, lo, hi = _epilogue(bias, None, y.shape, clamp)
    bias = None if bias is None else checked
    # images per step and tile rows per step, within the V + M byte budget
    row_bytes = 64 * (c + m) * tw
    if row_bytes * th <= _WINOGRAD_BLOCK_BYTES:
        images, band = max(1, _WINOGRAD_BLOCK_BYTES // (row_bytes * th)), th
    else:
        images, band = 1, max(1, _WINOGRAD_BLOCK_BYTES // row_bytes)
    images = min(images, n)
    tiles = images * min(band, th) * tw
    v_size, m_size = 16 * _plane_size(c * tiles), 16 * _plane_size(m * tiles)
    buf = _scratch.get(v_size + m_size)
    v_buf = buf[:v_size].reshape(16, -1)
    m_buf = buf[v_size:].reshape(16, -1)
    for i in range(0, n, images):
        xi, yi = x[i : i + images], y[i : i + images]
        for ty0 in range(0, th, band):
            ty1 = min(th, ty0 + band)
            t = len(xi) * (ty1 - ty0) * tw
            work = 16 * t * max(c, m)
            wino.input_transform(xi, v_buf, ph, pw, ty0, ty1, tw, threads_for(work, threads))
            vv = v_buf[:, : c * t].reshape(16, c, t)
            mm = m_buf[:, : m * t].reshape(16, m, t)
            if selection._winograd_batched(t, m, c, threads):
                ap = packed.transform(u) if packed is not None else gemm.ext.pack_a_batch(u)
                nt = threads_for(16 * m * c * t, threads)
                gemm.ext.batched_sgemm_packed_a(ap, m, vv, mm, nt)
            else:
                np.matmul(u, vv, out=mm)
            share = threads_for(work, threads)
            wino.output_transform(m_buf, yi, ty0, ty1, tw, share, bias, lo, hi)
    return y


def _winograd_operands(
    w: np.ndarray, filters: WinogradFilters | None
) -> tuple[np.ndarray, FilterCache | None]:
    """The Winograd filter transform of ``w`` and the cache of its packed
    form: kept by ``filters`` for a constant weight; without, computed (and
    packed where needed) at each call."""
    if filters is None:
        return winograd_filter(w), None
    return filters.transform(w), filters.packed
