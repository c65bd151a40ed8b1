"""Spatial rearrangement ops: SpaceToDepth, DepthToSpace, CenterCropPad,
Col2Im, ReverseSequence.

All are index arithmetic over numpy views; none loops over elements.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from . import registry
from ._common import INDEX, int_list, normalize_axes, normalize_axis
from ._versions import per_schema_version


@per_schema_version("SpaceToDepth")
def space_to_depth(info: NodeInfo) -> Compute:
    """Move ``blocksize`` x ``blocksize`` spatial blocks of NCHW into channels,
    block-major (``DCR``, the default) or, from opset 28, channel-major (``CRD``)."""
    b = int(info.attrs["blocksize"])
    mode = info.attrs.get("mode", "DCR") if info.opset >= 28 else "DCR"
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"{info.describe()}: unknown mode {mode!r}")
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        n, c, h, w = x.shape
        if h % b or w % b:
            raise ValueError(f"{info.describe()}: {h}x{w} is not divisible by {b}")
        y = x.reshape(n, c, h // b, b, w // b, b).transpose(perm)
        return (np.ascontiguousarray(y).reshape(n, c * b * b, h // b, w // b),)

    return compute


@per_schema_version("DepthToSpace")
def depth_to_space(info: NodeInfo) -> Compute:
    """Move channels of NCHW into ``blocksize`` x ``blocksize`` spatial
    blocks, in ``DCR`` (depth-column-row, the default) or ``CRD`` order."""
    b = int(info.attrs["blocksize"])
    mode = info.attrs.get("mode", "DCR") if info.opset >= 11 else "DCR"
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"{info.describe()}: unknown mode {mode!r}")

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        n, c, h, w = x.shape
        if c % (b * b):
            raise ValueError(f"{info.describe()}: {c} channels not divisible by {b * b}")
        cc = c // (b * b)
        if mode == "DCR":
            y = x.reshape(n, b, b, cc, h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, cc, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return (np.ascontiguousarray(y).reshape(n, cc, h * b, w * b),)

    return compute


@registry.kernel("CenterCropPad", since=18, types={"Tind": INDEX}, input_memory={1: "host"})
def center_crop_pad(info: NodeInfo) -> Compute:
    """Crop or zero-pad each of ``axes`` (default all) to the given size,
    centred (an odd difference puts the extra element at the end)."""
    axes_attr = info.attrs.get("axes")

    def compute(x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray]:
        axes = normalize_axes(axes_attr, x.ndim) if axes_attr else tuple(range(x.ndim))
        sizes = int_list(shape)
        if len(sizes) != len(axes):
            raise ValueError(f"{info.describe()}: {len(sizes)} sizes for {len(axes)} axes")
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        out_shape = list(x.shape)
        for a, size in zip(axes, sizes, strict=True):
            dim = x.shape[a]
            out_shape[a] = size
            lo = abs(dim - size) // 2
            if size < dim:
                src[a] = slice(lo, lo + size)
            elif size > dim:
                dst[a] = slice(lo, lo + dim)
        check_tensor_size(out_shape, x.dtype, info.describe())
        out = np.zeros(out_shape, dtype=x.dtype)
        out[tuple(dst)] = x[tuple(src)]
        return (out,)

    return compute


@registry.kernel("Col2Im", since=18, input_memory={1: "host", 2: "host"})
def col2im(info: NodeInfo) -> Compute:
    """Sum columns of sliding blocks, (N, C * prod(block), L), back into an
    image (N, C, *image_shape) (the inverse of im2col)."""
    a = info.attrs

    def compute(
        x: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray
    ) -> tuple[np.ndarray]:
        img, blk = int_list(image_shape), int_list(block_shape)
        nd = len(img)
        dil = int_list(a.get("dilations")) or [1] * nd
        strides = int_list(a.get("strides")) or [1] * nd
        pads = int_list(a.get("pads")) or [0] * (2 * nd)
        if (
            len(blk) != nd
            or len(dil) != nd
            or len(strides) != nd
            or len(pads) != 2 * nd
            or min([*img, *blk, *dil, *strides, 1]) < 1
            or min([*pads, 0]) < 0
        ):
            raise ValueError(
                f"{info.describe()}: image_shape {img}, block_shape {blk}, dilations {dil}, "
                f"strides {strides} must be >= 1 and pads {pads} >= 0, one per spatial axis"
            )
        padded = [img[d] + pads[d] + pads[d + nd] for d in range(nd)]
        check_tensor_size((x.shape[0], x.shape[1], *padded), x.dtype, info.describe())
        counts = [(padded[d] - dil[d] * (blk[d] - 1) - 1) // strides[d] + 1 for d in range(nd)]
        n, ck, length = x.shape
        k = math.prod(blk)
        if ck % k or length != math.prod(counts):
            raise ValueError(f"{info.describe()}: input shape {x.shape} does not match blocks")
        c = ck // k
        # Flat index (into the padded image) of each block position's origin.
        grids = np.meshgrid(
            *[np.arange(m) * s for m, s in zip(counts, strides, strict=True)], indexing="ij"
        )
        pstrides = [math.prod(padded[d + 1 :]) for d in range(nd)]
        origin = sum(g.reshape(-1) * ps for g, ps in zip(grids, pstrides, strict=True))
        cols = x.reshape(n, c, k, length)
        out = np.zeros((n, c, math.prod(padded)), dtype=x.dtype)
        for j, offs in enumerate(itertools.product(*[range(b) for b in blk])):
            shift = sum(o * dl * ps for o, dl, ps in zip(offs, dil, pstrides, strict=True))
            # Positions of one kernel offset are distinct, so += does not drop updates.
            out[:, :, origin + shift] += cols[:, :, j]
        out = out.reshape(n, c, *padded)
        crop = tuple(slice(pads[d], pads[d] + img[d]) for d in range(nd))
        return (np.ascontiguousarray(out[(slice(None), slice(None), *crop)]),)

    return compute


@per_schema_version("ReverseSequence", input_memory={1: "host"})
def reverse_sequence(info: NodeInfo) -> Compute:
    """Reverse the first ``sequence_lens[b]`` entries along ``time_axis`` of
    each batch entry ``b`` (along ``batch_axis``); the rest stay."""
    batch_attr = int(info.attrs.get("batch_axis", 1))
    time_attr = int(info.attrs.get("time_axis", 0))

    def compute(x: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray]:
        ba, ta = normalize_axis(batch_attr, x.ndim), normalize_axis(time_attr, x.ndim)
        xt = np.moveaxis(x, (ba, ta), (0, 1))
        steps = np.arange(xt.shape[1])[None, :]
        n = lens.astype(np.int64).reshape(-1, 1)
        src = np.where(steps < n, n - 1 - steps, steps)
        idx = src.reshape(src.shape + (1,) * (xt.ndim - 2))
        y = np.take_along_axis(xt, idx, axis=1)
        return (np.ascontiguousarray(np.moveaxis(y, (0, 1), (ba, ta))),)

    return compute
