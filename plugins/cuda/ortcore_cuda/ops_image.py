"""Image and window ops: Resize, Upsample, GridSample, ConvTranspose, LpPool, Col2Im.

Kernels: :mod:`ortcore_cuda.kernels.image`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

* Resize (opset 11 on) and Upsample (7 to 9): one launch of the one-axis
  resize kernel per resized axis, in the order of ``axes``; the sizes and
  scales (and roi) are read on the host, where the output shape is worked
  out as ONNX defines it (``keep_aspect_ratio_policy`` included).
* ConvTranspose: per image one strided-batched GEMM over the groups
  (``W[g]^T @ X[g]``, the columns of every kernel position), then the col2im
  kernel sums the columns into the output; the bias is added after.
* Col2Im: the col2im kernel alone.
* LpPool, GridSample: one thread an output element.

1 to 3 spatial dims (GridSample: 2 or 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import image as im
from .ops_common import FLOATS, device_of, suffix
from .ops_window import SAME_AUTO_PADS, pad3, pool_plan, win_args, window_args
from .tensor import CudaTensor

__all__ = ["decline", "pool_plan", "register", "window_args"]


def _host(value: Any) -> np.ndarray | None:
    """A host input as a flat numpy array, ``None`` when omitted or empty."""
    if value is None:
        return None
    arr = np.asarray(value).reshape(-1)
    return arr if arr.size else None


# -- Resize / Upsample ------------------------------------------------------------------


def resize_plan(
    shape: Sequence[int],
    *,
    scales: Sequence[float] | None,
    sizes: Sequence[int] | None,
    axes: Sequence[int] | None = None,
    roi: Sequence[float] | None = None,
    policy: str = "stretch",
) -> tuple[list[int], list[float], list[float] | None]:
    """Resize's output shape, per-axis scales and full roi (``[starts..., ends...]``,
    or ``None``) for an input of ``shape``, as ONNX defines them."""
    r = len(shape)
    ax = [int(a) + r if int(a) < 0 else int(a) for a in axes] if axes else list(range(r))
    out = [int(d) for d in shape]
    scale = [1.0] * r
    if sizes is not None:
        for i, a in enumerate(ax):
            out[a] = int(sizes[i])
        scale = [out[i] / shape[i] if shape[i] else 1.0 for i in range(r)]
        if policy != "stretch":
            chosen = [scale[a] for a in ax]
            s = min(chosen) if policy == "not_larger" else max(chosen)
            scale = [s if i in ax else 1.0 for i in range(r)]
            out = [int(s * shape[i] + 0.5) if i in ax else int(shape[i]) for i in range(r)]
    elif scales is not None:
        for i, a in enumerate(ax):
            scale[a] = float(scales[i])
        out = [int(scale[i] * shape[i]) for i in range(r)]
    else:
        raise ValueError("Resize needs scales or sizes")
    full_roi = None
    if roi is not None:
        full_roi = [0.0] * r + [1.0] * r
        n = len(ax)
        for i, a in enumerate(ax):
            full_roi[a] = float(roi[i])
            full_roi[r + a] = float(roi[n + i])
    return out, scale, full_roi


def _resize(info: NodeInfo) -> Any:
    cuda = device_of(info)
    upsample = info.op_type == "Upsample"
    mode = str(info.attr("mode", "nearest"))
    if upsample:
        coord, nearest, policy, axes = "asymmetric", "floor", "stretch", None
        cubic_a, exclude, antialias, extrapolation = -0.75, 0, 0, 0.0
    else:
        coord = str(info.attr("coordinate_transformation_mode", "half_pixel"))
        nearest = str(info.attr("nearest_mode", "round_prefer_floor"))
        policy = str(info.attr("keep_aspect_ratio_policy", "stretch"))
        axes = info.attr("axes")
        cubic_a = float(info.attr("cubic_coeff_a", -0.75))
        exclude = int(info.attr("exclude_outside", 0))
        antialias = int(info.attr("antialias", 0))
        extrapolation = float(info.attr("extrapolation_value", 0.0))
    codes = {
        "mode": im.RESIZE_MODES[mode],
        "coord": im.RESIZE_COORDS[coord],
        "nearest": im.RESIZE_NEAREST[nearest],
        "antialias": antialias,
        "exclude": exclude,
        "cubic_a": cubic_a,
        "extrapolation": extrapolation,
    }

    def compute(x: CudaTensor, *rest: Any) -> tuple[CudaTensor]:
        if upsample:
            scales = _host(rest[0]) if rest else _host(info.attr("scales"))
            sizes, roi = None, None
        else:
            more = [*rest, None, None, None]
            roi, scales, sizes = _host(more[0]), _host(more[1]), _host(more[2])
            if coord != "tf_crop_and_resize":
                roi = None
        out, scale, full_roi = resize_plan(
            x.shape,
            scales=None if scales is None else [float(s) for s in scales.astype(np.float64)],
            sizes=None if sizes is None else [int(s) for s in sizes],
            axes=axes,
            roi=None if roi is None else [float(v) for v in roi.astype(np.float64)],
            policy=policy,
        )
        r = x.ndim
        order = [int(a) + r if int(a) < 0 else int(a) for a in axes] if axes else list(range(r))
        if min(out, default=1) == 0:
            return (cuda.empty(out, x.dtype),)
        if any(x.shape[a] == 0 and out[a] for a in order):
            raise ValueError(f"Resize of an empty axis to {out}")
        passes = []
        for a in order:
            roi_a = (0.0, 1.0) if full_roi is None else (full_roi[a], full_roi[a + r])
            identity = (
                math.isclose(scale[a], 1.0)
                and out[a] == x.shape[a]
                and math.isclose(roi_a[0], 0.0)
                and math.isclose(roi_a[1], 1.0)
            )
            if not identity:
                passes.append((a, roi_a))
        if not passes:
            return (cuda.copy(x, x.shape),)
        cur = x
        for k, (a, roi_a) in enumerate(passes):
            last = k == len(passes) - 1
            dtype = x.dtype if last else np.dtype(np.float32)
            shape = list(cur.shape)
            shape[a] = out[a]
            y = cuda.empty(shape, dtype)
            args = im.RESIZE_ARGS.pack(
                in_len=cur.shape[a],
                out_len=out[a],
                inner=int(np.prod(cur.shape[a + 1 :], dtype=np.int64)),
                scale=scale[a],
                roi0=roi_a[0],
                roi1=roi_a[1],
                **codes,
            )
            kernel = im.resize_kernel(suffix(cur), suffix(y))
            cuda.launch_over(kernel, y.size, cur.ptr, y.ptr, y.size, args)
            cur = y
        return (cur,)

    return compute


# -- ConvTranspose and Col2Im -----------------------------------------------------------


def conv_transpose_plan(
    in_dims: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
) -> tuple[list[int], list[int]]:
    """ConvTranspose's output spatial dims and pads before, as ONNX's
    reference defines them (``output_shape`` wins; with explicit pads the
    output is cut or extended at the end)."""
    n = len(in_dims)
    s = list(strides or [1] * n)
    d = list(dilations or [1] * n)
    op = list(output_padding or [0] * n)
    op = op[-n:] if len(op) >= n else op + [0] * (n - len(op))
    target = list(output_shape)[-n:] if output_shape else None
    span = [(kernel[i] - 1) * d[i] + 1 for i in range(n)]
    if not pads and auto_pad in SAME_AUTO_PADS:
        target = target or [in_dims[i] * s[i] for i in range(n)]
        total = [s[i] * (in_dims[i] - 1) + op[i] + span[i] - target[i] for i in range(n)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        return target, begin
    p = list(pads or [0] * (2 * n))
    if auto_pad == "VALID":
        p = [0] * (2 * n)
    if target is None:
        target = [s[i] * (in_dims[i] - 1) + op[i] + span[i] - p[i] - p[i + n] for i in range(n)]
    return target, p[:n]


def _conv_transpose(info: NodeInfo) -> Any:
    cuda = device_of(info)
    groups = int(info.attr("group", 1))

    def compute(x: CudaTensor, w: CudaTensor, b: CudaTensor | None = None) -> tuple[CudaTensor]:
        n, c = x.shape[0], x.shape[1]
        kernel = list(w.shape[2:])
        mg = w.shape[1]
        m = mg * groups
        cg = c // groups
        out, begin = conv_transpose_plan(
            x.shape[2:],
            kernel,
            strides=info.attr("strides"),
            dilations=info.attr("dilations"),
            pads=info.attr("pads"),
            output_padding=info.attr("output_padding"),
            output_shape=info.attr("output_shape"),
            auto_pad=str(info.attr("auto_pad", "NOTSET")),
        )
        y = cuda.empty((n, m, *out), x.dtype)
        if y.size == 0:
            return (y,)
        k = int(np.prod(kernel, dtype=np.int64))
        length = int(np.prod(x.shape[2:], dtype=np.int64))
        cols = cuda.empty((n, m * k, length), x.dtype)
        item = x.dtype.itemsize
        if cols.size and cg:
            for i in range(n):
                cuda.backend.gemm(
                    x.dtype,
                    True,
                    False,
                    mg * k,
                    length,
                    cg,
                    1.0,
                    w.ptr,
                    cg * mg * k,
                    x.ptr + i * c * length * item,
                    cg * length,
                    0.0,
                    cols.ptr + i * m * k * length * item,
                    mg * k * length,
                    groups,
                    cuda.stream,
                )
        elif cols.size:
            cuda.backend.upload(cols.ptr, np.zeros(cols.size, x.dtype), cuda.stream)
        nd = x.ndim - 2
        args = win_args(
            x.shape[2:],
            out,
            kernel,
            info.attr("strides") or [1] * nd,
            begin,
            info.attr("dilations") or [1] * nd,
        )
        cuda.launch_over(im.col2im_kernel(suffix(x)), y.size, cols.ptr, y.ptr, y.size, args)
        if b is not None:
            cuda.add_inplace(y, b, (m, *[1] * nd))
        return (y,)

    return compute


def _col2im(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor, image: Any, block: Any) -> tuple[CudaTensor]:
        img = [int(v) for v in np.asarray(image).reshape(-1)]
        blk = [int(v) for v in np.asarray(block).reshape(-1)]
        nd = len(img)
        s = list(info.attr("strides") or [1] * nd)
        d = list(info.attr("dilations") or [1] * nd)
        p = list(info.attr("pads") or [0] * (2 * nd))
        blocks = [
            (img[i] + p[i] + p[i + nd] - (d[i] * (blk[i] - 1) + 1)) // s[i] + 1 for i in range(nd)
        ]
        k = int(np.prod(blk, dtype=np.int64))
        if x.shape[1] % k or x.shape[2] != int(np.prod(blocks, dtype=np.int64)):
            raise ValueError(f"Col2Im of {x.shape} into {img} with blocks {blk}")
        y = cuda.empty((x.shape[0], x.shape[1] // k, *img), x.dtype)
        if y.size:
            args = win_args(blocks, img, blk, s, p[:nd], d)
            kernel = im.col2im_kernel(suffix(x))
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, args)
        return (y,)

    return compute


# -- LpPool -----------------------------------------------------------------------------


def _lppool(info: NodeInfo) -> Any:
    cuda = device_of(info)
    power = float(info.attr("p", 2))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        kernel = list(info.attr("kernel_shape"))
        nd = len(kernel)
        strides = info.attr("strides") or [1] * nd
        dilations = info.attr("dilations") or [1] * nd
        out, pads = pool_plan(
            x.shape[2:],
            kernel,
            strides=strides,
            dilations=dilations,
            pads=info.attr("pads"),
            auto_pad=str(info.attr("auto_pad", "NOTSET")),
            ceil_mode=bool(info.attr("ceil_mode", 0)),
            partial=True,
        )
        y = cuda.empty((*x.shape[:2], *out), x.dtype)
        if y.size:
            args = win_args(x.shape[2:], out, kernel, strides, pads[:nd], dilations)
            kernel_ = im.lppool_kernel(suffix(x))
            cuda.launch_over(kernel_, y.size, x.ptr, y.ptr, y.size, args, power)
        return (y,)

    return compute


# -- GridSample -------------------------------------------------------------------------


def _gridsample(info: NodeInfo) -> Any:
    cuda = device_of(info)
    mode = im.GRID_MODES[str(info.attr("mode", "linear"))]
    padding = im.GRID_PADDING[str(info.attr("padding_mode", "zeros"))]
    align = int(info.attr("align_corners", 0))

    def compute(x: CudaTensor, grid: CudaTensor) -> tuple[CudaTensor]:
        nd = x.ndim - 2
        out = list(grid.shape[1:-1])
        y = cuda.empty((x.shape[0], x.shape[1], *out), x.dtype)
        if y.size:
            args = im.GRID_ARGS.pack(
                nd=nd,
                c=x.shape[1],
                mode=mode,
                padding=padding,
                align=align,
                inp=pad3(x.shape[2:], 1),
                out=pad3(out, 1),
            )
            kernel = im.gridsample_kernel(suffix(x))
            cuda.launch_over(kernel, y.size, x.ptr, grid.ptr, y.ptr, y.size, args)
        return (y,)

    return compute


# -- registry and declines --------------------------------------------------------------


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    floats: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS}
    host = {1: "host", 2: "host", 3: "host"}
    reg.kernel("Resize", since=11, types={0: FLOATS}, input_memory=host)(_resize)
    reg.kernel("Upsample", since=7, until=9, types=floats, input_memory={1: "host"})(_resize)
    reg.kernel("ConvTranspose", since=1, types=floats)(_conv_transpose)
    reg.kernel("Col2Im", since=18, types=floats, input_memory={1: "host", 2: "host"})(_col2im)
    reg.kernel("LpPool", since=2, types=floats)(_lppool)
    reg.kernel("GridSample", since=16, types={0: FLOATS, 1: FLOATS})(_gridsample)


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def _rank(node: ir.Node, index: int = 0) -> int | None:
    v = node.inputs[index] if index < len(node.inputs) else None
    return len(v.shape) if v is not None and v.shape is not None else None


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return None
    rank = _rank(node)
    if op in ("Resize", "Upsample"):
        mode = _attr(node, "mode", "nearest")
        if mode not in im.RESIZE_MODES or (op == "Upsample" and mode == "cubic"):
            return f"CUDA: {op} mode {mode}"
        if op == "Upsample":
            return None
        coord = _attr(node, "coordinate_transformation_mode", "half_pixel")
        if coord not in im.RESIZE_COORDS:
            return f"CUDA: Resize coordinate_transformation_mode {coord}"
        nearest = _attr(node, "nearest_mode", "round_prefer_floor")
        if nearest not in im.RESIZE_NEAREST:
            return f"CUDA: Resize nearest_mode {nearest}"
        policy = _attr(node, "keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            return f"CUDA: Resize keep_aspect_ratio_policy {policy}"
        if mode == "nearest" and _attr(node, "antialias", 0):
            return "CUDA: Resize nearest with antialias"
        return None
    if op == "ConvTranspose":
        if rank is None or not 3 <= rank <= 2 + im.WIN_DIMS:
            return f"CUDA: ConvTranspose of rank {rank} (1-D to 3-D only)"
        return None
    if op == "LpPool":
        if rank is None or not 3 <= rank <= 2 + im.WIN_DIMS:
            return f"CUDA: LpPool of rank {rank} (1-D to 3-D only)"
        return None
    if op == "Col2Im":
        shape = node.inputs[1].shape if len(node.inputs) > 1 and node.inputs[1] else None
        nd = shape[0] if shape is not None and len(shape) == 1 else None
        if not isinstance(nd, int) or not 1 <= nd <= im.WIN_DIMS:
            return "CUDA: Col2Im of an unknown number of spatial dims or more than 3"
        return None
    if op == "GridSample":
        if rank not in (4, 5):
            return f"CUDA: GridSample of rank {rank} (2-D and 3-D only)"
        x, grid = node.inputs[0], node.inputs[1]
        if x is None or grid is None or grid.dtype != x.dtype:
            return "CUDA: GridSample with a grid of another element type than X"
        if _attr(node, "mode", "linear") not in im.GRID_MODES:
            return f"CUDA: GridSample mode {_attr(node, 'mode', 'linear')}"
        if _attr(node, "padding_mode", "zeros") not in im.GRID_PADDING:
            return f"CUDA: GridSample padding_mode {_attr(node, 'padding_mode', 'zeros')}"
        return None
    return None
