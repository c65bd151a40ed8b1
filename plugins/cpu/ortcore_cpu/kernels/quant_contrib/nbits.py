"""MatMulNBits: ``Y = A @ dequantize(B) + bias`` with B block-quantized to
2, 4 or 8 bits along K, in onnxruntime's packing.

B is uint8 ``(N, k_blocks, blob_size)``: row n of the logical ``(N, K)``
weight (B transposed), cut into ``k_blocks = ceil(K / block_size)`` blocks of
``block_size`` values, each block packed into ``blob_size = block_size * bits
/ 8`` bytes, the first value in the lowest bits of a byte. ``scales`` holds
one scale per (n, block); ``zero_points`` either packs one ``bits``-bit zero
point per block the same way (uint8, ``(N, ceil(k_blocks * bits / 8))``) or
holds them unpacked in A's type (``(N, k_blocks)``); without them the zero
point is ``2 ** (bits - 1)``. Dequantized weights are ``(q - zero) * scale``.

B stays packed (a 4-bit weight takes an eighth of its float32 size): each
run dequantizes it a tile of about 1 MiB at a time, just before the float32
product reads the tile (the unpacked scales and zero points of a constant B
are kept). The product runs in float32 whatever ``accuracy_level`` asks: the
attribute sets the lowest accuracy onnxruntime may use (level 4 lets it
quantize A to int8), and float32 meets every level.
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import DT, constant_input
from ..contrib import MS_DOMAIN


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` ``bits``-bit values along the last axis of uint8
    ``packed``, lowest bits first, as uint8."""
    per_byte = 8 // bits
    shifts = (np.arange(per_byte, dtype=np.uint8) * bits).astype(np.uint8)
    mask = np.uint8((1 << bits) - 1)
    vals = (packed[..., None] >> shifts) & mask
    vals = vals.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)
    return vals[..., :count]


class NBitsWeight:
    """A packed ``bits``-bit B checked against ``n``, ``k``, ``bits`` and
    ``block_size``, dequantized a few rows (output columns) at a time: the
    weight stays as small as onnxruntime packed it, a float32 tile of it
    exists only while the product uses it.

    Each value is ``(q - zero) * scale`` in float32, as onnxruntime
    dequantizes.

    Raises:
        ValueError: a shape does not agree with ``n``, ``k``, ``bits`` and
            ``block_size``.
    """

    __slots__ = ("n", "k", "bits", "block", "k_blocks", "packed", "scales", "zeros")

    def __init__(
        self,
        b: np.ndarray,
        scales: np.ndarray,
        zero_points: np.ndarray | None,
        *,
        n: int,
        k: int,
        bits: int,
        block_size: int,
        where: str = "MatMulNBits",
    ) -> None:
        k_blocks = -(-k // block_size)
        blob = block_size * bits // 8
        if b.dtype != np.uint8 or b.size != n * k_blocks * blob:
            raise ValueError(
                f"{where}: B must be uint8 of shape ({n}, {k_blocks}, {blob}) "
                f"(N, k_blocks, blob_size), got {b.dtype} {b.shape}"
            )
        s = np.asarray(scales, dtype=np.float32)
        if s.size != n * k_blocks:
            raise ValueError(
                f"{where}: scales must hold N * k_blocks = {n * k_blocks} values, "
                f"got shape {s.shape}"
            )
        s = s.reshape(n, k_blocks, 1)
        if zero_points is None:
            z: np.ndarray = np.full((n, k_blocks, 1), 2 ** (bits - 1), np.float32)
        elif zero_points.dtype == np.uint8:
            row = -(-k_blocks * bits // 8)
            if zero_points.size != n * row:
                raise ValueError(
                    f"{where}: packed zero_points must be uint8 of N * ceil(k_blocks * bits / 8)"
                    f" = {n * row} bytes, got shape {zero_points.shape}"
                )
            z = unpack_bits(zero_points.reshape(n, row), bits, k_blocks).astype(np.float32)
            z = z.reshape(n, k_blocks, 1)
        else:
            if zero_points.size != n * k_blocks:
                raise ValueError(
                    f"{where}: zero_points in A's type must hold N * k_blocks = {n * k_blocks} "
                    f"values, got shape {zero_points.shape}"
                )
            z = zero_points.astype(np.float32).reshape(n, k_blocks, 1)
        self.n, self.k, self.bits, self.block, self.k_blocks = n, k, bits, block_size, k_blocks
        self.packed = b.reshape(n, k_blocks, blob)
        self.scales = s
        self.zeros = z

    def rows(
        self, lo: int, hi: int, qbuf: np.ndarray | None = None, wbuf: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows ``lo:hi`` of the float32 ``(N, K)`` weight (B transposed),
        written into ``wbuf`` (``(hi - lo, k_blocks, block_size)`` float32)
        through ``qbuf`` (``(hi - lo, k_blocks, blob_size, 8 // bits)``
        uint8) when given: a shift and a mask per value in a byte, the zero
        point subtracted, the scale applied, in place."""
        count = hi - lo
        src = self.packed[lo:hi]
        per_byte = 8 // self.bits
        if qbuf is None:
            qbuf = np.empty((*src.shape, per_byte), np.uint8)
        if wbuf is None:
            wbuf = np.empty((count, self.k_blocks, self.block), np.float32)
        mask = np.uint8((1 << self.bits) - 1)
        for i in range(per_byte):  # the first value in the lowest bits
            if i == 0 and per_byte > 1:
                np.bitwise_and(src, mask, out=qbuf[..., 0])
            elif i == per_byte - 1:
                np.right_shift(src, np.uint8(i * self.bits), out=qbuf[..., i])
            else:
                np.right_shift(src, np.uint8(i * self.bits), out=qbuf[..., i])
                qbuf[..., i] &= mask
        np.subtract(qbuf.reshape(wbuf.shape), self.zeros[lo:hi], out=wbuf)
        wbuf *= self.scales[lo:hi]
        return wbuf.reshape(count, self.k_blocks * self.block)[:, : self.k]

    def tile_rows(self, m: int) -> int:
        """Rows per tile for a product of ``m`` rows of A: about
        ``TILE_VALUES`` float32 values (``WIDE_TILE_VALUES`` past
        ``NARROW_ROWS`` rows of A, where BLAS wants wide products)."""
        values = TILE_VALUES if m <= NARROW_ROWS else WIDE_TILE_VALUES
        return max(16, values // max(1, self.k))

    def matmul(self, a: np.ndarray) -> np.ndarray:
        """``a (..., K) @ dequantize(B)`` in float32, tile by tile."""
        a2 = a.reshape(-1, self.k)
        y = np.empty((a2.shape[0], self.n), np.float32)
        step = min(self.n, self.tile_rows(a2.shape[0]))
        blob = self.packed.shape[2]
        qbuf = np.empty((step, self.k_blocks, blob, 8 // self.bits), np.uint8)
        wbuf = np.empty((step, self.k_blocks, self.block), np.float32)
        for lo in range(0, self.n, step):
            hi = min(self.n, lo + step)
            c = hi - lo
            w = self.rows(lo, hi, qbuf[:c], wbuf[:c])
            y[:, lo:hi] = a2 @ w.T  # a contiguous product (BLAS), then the copy
        return y.reshape(*a.shape[:-1], self.n)


TILE_VALUES = 1 << 18
"""Float32 values of one dequantized tile of B for a product of a few rows
(decoding: 1 MiB, in the cache while the product reads it; on a 4096 x 4096
4-bit weight 64 rows a tile beat 16 and 256)."""

NARROW_ROWS = 8
"""Rows of A up to which a product takes ``TILE_VALUES`` tiles."""

WIDE_TILE_VALUES = 1 << 22
"""Float32 values of a tile for longer A (prefill: 16 MiB, alive only
during the call): BLAS runs narrow products several times slower."""


def dequantize_nbits(
    b: np.ndarray,
    scales: np.ndarray,
    zero_points: np.ndarray | None,
    *,
    n: int,
    k: int,
    bits: int,
    block_size: int,
    where: str = "MatMulNBits",
) -> np.ndarray:
    """The float32 ``(K, N)`` weight that packed ``b`` holds (whole: the
    kernel itself uses :class:`NBitsWeight` a tile at a time).

    Raises:
        ValueError: a shape does not agree with ``n``, ``k``, ``bits`` and
            ``block_size``.
    """
    w = NBitsWeight(b, scales, zero_points, n=n, k=k, bits=bits, block_size=block_size, where=where)
    return np.ascontiguousarray(w.rows(0, n).T)


_FLOAT = frozenset({DT.FLOAT, DT.FLOAT16})


@registry.kernel("MatMulNBits", domain=MS_DOMAIN, types={0: _FLOAT, 1: {DT.UINT8}})
def matmul_nbits(info: NodeInfo) -> Compute:
    """``Y = A @ dequantize(B) + bias``: A ``(..., K)`` float32 or float16,
    B packed as onnxruntime packs it (see the module docstring)."""
    a_ = info.attrs
    missing = [name for name in ("K", "N", "block_size") if name not in a_]
    if missing:
        raise ValueError(f"{info.describe()}: missing required attribute(s) {missing}")
    k, n, block = int(a_["K"]), int(a_["N"]), int(a_["block_size"])
    bits = int(a_.get("bits", 4))
    if bits not in (2, 4, 8):
        raise ValueError(f"{info.describe()}: bits must be 2, 4 or 8, got {bits}")
    if block < 16 or block & (block - 1):
        raise ValueError(f"{info.describe()}: block_size must be a power of 2 >= 16, got {block}")
    if int(a_.get("weight_prepacked", 0) or 0):
        raise ValueError(
            f"{info.describe()}: weight_prepacked B (a GPU layout) is not supported on CPU"
        )
    where = info.describe()
    keep = (
        constant_input(info, 1)
        and constant_input(info, 2)
        and (info.num_inputs < 4 or info.input_types[3] is None or constant_input(info, 3))
    )
    kept: list[tuple[np.ndarray, NBitsWeight]] = []

    def weight(b: np.ndarray, scales: np.ndarray, zeros: np.ndarray | None) -> NBitsWeight:
        if kept and kept[0][0] is b:
            return kept[0][1]
        w = NBitsWeight(b, scales, zeros, n=n, k=k, bits=bits, block_size=block, where=where)
        if keep:
            kept[:] = [(b, w)]
        return w

    def compute(
        a: np.ndarray,
        b: np.ndarray,
        scales: np.ndarray,
        zero_points: np.ndarray | None = None,
        g_idx: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        if a.ndim < 1 or a.shape[-1] != k:
            raise ValueError(f"{where}: A's last dimension must be K = {k}, got shape {a.shape}")
        if g_idx is not None and g_idx.size:
            raise ValueError(f"{where}: g_idx (deprecated) is not supported")
        if bias is not None and bias.size != n:
            raise ValueError(f"{where}: bias must have N = {n} elements, got shape {bias.shape}")
        if b.size == 0:  # an omitted projection: zeros, plus the bias
            y = np.zeros((*a.shape[:-1], n), np.float32)
        else:
            y = weight(b, scales, zero_points).matmul(a.astype(np.float32, copy=False))
        if bias is not None:
            y = y + bias.astype(np.float32).reshape(n)
        return (y.astype(a.dtype, copy=False),)

    return compute


__all__ = ["NBitsWeight", "dequantize_nbits", "matmul_nbits", "unpack_bits"]
