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

The weight is dequantized once per constant B (kept with the kernel) and the
product runs in float32 whatever ``accuracy_level`` asks: the attribute sets
the lowest accuracy onnxruntime may use (level 4 lets it quantize A to
int8), and float32 meets every level.
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
    """The float32 ``(K, N)`` weight that packed ``b`` holds.

    Raises:
        ValueError: a shape does not agree with ``n``, ``k``, ``bits`` and
            ``block_size``.
    """
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
            f"{where}: scales must hold N * k_blocks = {n * k_blocks} values, got shape {s.shape}"
        )
    s = s.reshape(n, k_blocks, 1)
    q = unpack_bits(b.reshape(n, k_blocks, blob), bits, block_size).astype(np.float32)
    if zero_points is None:
        z: np.ndarray = np.full((n, k_blocks, 1), 2 ** (bits - 1), np.float32)
    elif zero_points.dtype == np.uint8:
        row = -(-k_blocks * bits // 8)
        if zero_points.size != n * row:
            raise ValueError(
                f"{where}: packed zero_points must be uint8 of N * ceil(k_blocks * bits / 8) = "
                f"{n * row} bytes, got shape {zero_points.shape}"
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
    w = ((q - z) * s).reshape(n, k_blocks * block_size)[:, :k]
    return np.ascontiguousarray(w.T)


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
    kept: list[np.ndarray] = []

    def weight(b: np.ndarray, scales: np.ndarray, zeros: np.ndarray | None) -> np.ndarray:
        if kept:
            return kept[0]
        w = dequantize_nbits(b, scales, zeros, n=n, k=k, bits=bits, block_size=block, where=where)
        if keep:
            kept.append(w)
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
            y = np.matmul(a.astype(np.float32, copy=False), weight(b, scales, zero_points))
        if bias is not None:
            y = y + bias.astype(np.float32).reshape(n)
        return (y.astype(a.dtype, copy=False),)

    return compute


__all__ = ["dequantize_nbits", "matmul_nbits", "unpack_bits"]
