"""Selection and odd ops: NonMaxSuppression, Unique, NonZero, IsInf, IsNaN, BitCast,
CenterCropPad, AffineGrid, MaxUnpool, Det, DeformConv.

Kernels: :mod:`ortcore_cuda.kernels.misc`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

* NonZero, Unique and NonMaxSuppression select on the device (a flags or
  select kernel, a one-block scan of the counts, a compaction kernel); the
  host reads back only the total, to size the output.
* BitCast copies the bytes on the device under the new element type (types
  of the same size only); CenterCropPad fills the padding with zeros and
  copies the kept window with one strided copy.
* Det: one thread per matrix, LU with partial pivoting. MaxUnpool: zeros,
  then one scatter kernel. AffineGrid: one kernel over the output points.
  DeformConv (2-D): one thread per output element, the input sampled
  bilinearly at each tap's offset position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import elementwise as ew
from .kernels import misc as km
from .ops_common import FLOATS64, MOVABLE, SUFFIX, device_of

if TYPE_CHECKING:
    from .device import CudaDevice
    from .tensor import CudaTensor

__all__ = ["decline", "register"]

_ITEM_SUFFIX = {dt: s for s, (_, _, dt) in km.ITEM_TYPES.items() if s != "bf16"}
_OPS = (
    "NonMaxSuppression",
    "Unique",
    "NonZero",
    "IsInf",
    "IsNaN",
    "BitCast",
    "CenterCropPad",
    "AffineGrid",
    "MaxUnpool",
    "Det",
    "DeformConv",
)


def _item_suffix(dtype: np.dtype) -> str:
    if dtype.name == "bfloat16":
        return "bf16"
    return _ITEM_SUFFIX[np.dtype(dtype)]


def _strides(shape: Sequence[int]) -> list[int]:
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * int(shape[k + 1])
    return out


def _zeros(cuda: CudaDevice, shape: Sequence[int], dtype: Any) -> CudaTensor:
    y = cuda.empty(shape, dtype)
    if y.size:
        kernel = ew.fill_word_kernel(y.dtype.itemsize)
        cuda.launch_over(kernel, y.size, y.ptr, y.size, 0)
    return y


def _scan(cuda: CudaDevice, counts: CudaTensor) -> tuple[CudaTensor, int]:
    """The exclusive scan of ``counts`` (int64, ``n + 1`` offsets) and its
    total, read back to the host (the one number the output's size needs)."""
    n = counts.size
    offsets = cuda.empty([n + 1], np.int64)
    total = cuda.empty([1], np.int64)
    threads = 32
    while threads < n and threads < km.SCAN_THREADS:
        threads *= 2
    cuda.launch(km.scan_kernel(), 1, threads, counts.ptr, offsets.ptr, total.ptr, n)
    return offsets, int(cuda.to_host(total)[0])


def _isinfnan(op: str) -> Any:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        if op == "IsNaN":
            mode = 0
        else:
            pos = bool(info.attr("detect_positive", 1))
            neg = bool(info.attr("detect_negative", 1))
            mode = {(True, True): 3, (True, False): 1, (False, True): 2}.get((pos, neg), -1)

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            if mode < 0:
                return (_zeros(cuda, x.shape, np.bool_),)
            y = cuda.empty(x.shape, np.bool_)
            if x.size:
                kernel = km.isinfnan_kernel(SUFFIX[x.dtype])
                cuda.launch_over(kernel, x.size, x.ptr, y.ptr, x.size, mode)
            return (y,)

        return compute

    return build


def _bitcast(info: NodeInfo) -> Any:
    cuda = device_of(info)
    to = np.dtype(info.output_dtype(0))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        if x.dtype.itemsize != to.itemsize:
            raise TypeError(f"{info.describe()}: BitCast of {x.dtype} to {to}: sizes differ")
        y = cuda.empty(x.shape, to)
        if x.nbytes:
            cuda.backend.copy(y.ptr, x.ptr, x.nbytes, cuda.stream)
        return (y,)

    return compute


def _nonzero(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        if x.ndim == 0 or x.ndim > ew.MAX_RANK:
            raise ValueError(f"{info.describe()}: NonZero of rank {x.ndim}")
        n = x.size
        if n == 0:
            return (cuda.empty([x.ndim, 0], np.int64),)
        flags = cuda.empty([n], np.int64)
        kernel = km.nonzero_flags_kernel(_item_suffix(x.dtype))
        cuda.launch_over(kernel, n, x.ptr, flags.ptr, n)
        offsets, total = _scan(cuda, flags)
        y = cuda.empty([x.ndim, total], np.int64)
        if total:
            dims = ew.copy_args(x.shape, [0] * x.ndim, [0] * x.ndim)
            cuda.launch_over(
                km.nonzero_write_kernel(), n, offsets.ptr, y.ptr, n, total, x.ndim, dims
            )
        return (y,)

    return compute


def _unique(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = info.attr("axis")
    is_sorted = int(bool(info.attr("sorted", 1)))
    outputs = info.num_outputs

    def compute(x: CudaTensor) -> tuple[CudaTensor, ...]:
        if axis_attr is None:
            items, n, rest, perm = x, x.size, [], None
        else:
            a = int(axis_attr) + (x.ndim if int(axis_attr) < 0 else 0)
            if not 0 <= a < x.ndim:
                raise ValueError(f"{info.describe()}: axis {axis_attr} of rank {x.ndim}")
            perm = [a] + [k for k in range(x.ndim) if k != a]
            items = cuda.transpose(x, perm) if a else x
            n, rest = x.shape[a], [x.shape[k] for k in perm[1:]]
        length = int(np.prod(rest, dtype=np.int64))
        suffix = _item_suffix(x.dtype)
        if n and not length:
            raise ValueError(f"{info.describe()}: Unique of items of no elements")
        first = cuda.empty([n], np.int64)
        flags = cuda.empty([n], np.int64)
        total = 0
        if n:
            cuda.launch_over(
                km.unique_first_kernel(suffix), n, items.ptr, first.ptr, flags.ptr, n, length
            )
            _, total = _scan(cuda, flags)
        y = cuda.empty([total, *rest], x.dtype)
        indices = cuda.empty([total], np.int64)
        inverse = cuda.empty([n], np.int64)
        counts = cuda.empty([total], np.int64)
        if n:
            pos = cuda.empty([n], np.int64)
            cuda.launch_over(
                km.unique_rank_kernel(suffix),
                n,
                items.ptr,
                first.ptr,
                pos.ptr,
                n,
                length,
                is_sorted,
            )
            cuda.launch_over(
                km.unique_write_kernel(x.dtype.itemsize),
                n,
                items.ptr,
                first.ptr,
                pos.ptr,
                y.ptr,
                indices.ptr,
                inverse.ptr,
                counts.ptr,
                n,
                length,
            )
        if perm is not None and perm[0] != 0 and y.size:
            y = cuda.transpose(y, list(np.argsort(perm)))
        elif perm is not None and perm[0] != 0:
            y = cuda.empty([y.shape[k] for k in np.argsort(perm)], x.dtype)
        return (y, indices, inverse, counts)[:outputs]

    return compute


def _host_scalar(v: Any) -> Any:
    if v is None:
        return None
    a = np.asarray(v).reshape(-1)
    return a[0] if a.size else None


def _nms(info: NodeInfo) -> Any:
    cuda = device_of(info)
    center = int(info.attr("center_point_box", 0))

    def compute(
        boxes: CudaTensor,
        scores: CudaTensor,
        max_out: Any = None,
        iou: Any = None,
        score_thr: Any = None,
    ) -> tuple[CudaTensor]:
        batches, nboxes = boxes.shape[0], boxes.shape[1]
        classes = scores.shape[1]
        if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.shape != (batches, classes, nboxes):
            raise ValueError(
                f"{info.describe()}: boxes {boxes.shape} and scores {scores.shape} do not match"
            )
        m = _host_scalar(max_out)
        limit = min(max(int(m), 0), nboxes) if m is not None else 0
        th = _host_scalar(iou)
        iou_v = float(np.float32(th)) if th is not None else 0.0
        st = _host_scalar(score_thr)
        has_thr = int(st is not None)
        st_v = float(np.float32(st)) if st is not None else 0.0
        pairs = batches * classes
        if limit == 0 or pairs * nboxes == 0:
            return (cuda.empty([0, 3], np.int64),)
        order = cuda.empty([pairs * nboxes], np.int64)
        sel = cuda.empty([pairs * nboxes], np.int64)
        counts = cuda.empty([pairs], np.int64)
        grid = max(1, min(pairs, cuda.max_grid))
        threads = 32 if nboxes <= 32 else 128
        cuda.launch(
            km.nms_select_kernel(),
            grid,
            threads,
            boxes.ptr,
            scores.ptr,
            order.ptr,
            sel.ptr,
            counts.ptr,
            classes,
            nboxes,
            pairs,
            limit,
            iou_v,
            st_v,
            has_thr,
            center,
        )
        offsets, total = _scan(cuda, counts)
        y = cuda.empty([total, 3], np.int64)
        if total:
            n = pairs * nboxes
            cuda.launch_over(
                km.nms_write_kernel(), n, sel.ptr, offsets.ptr, y.ptr, classes, nboxes, n
            )
        return (y,)

    return compute


def _center_crop_pad(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axes_attr = info.attr("axes")

    def compute(x: CudaTensor, shape: Any) -> tuple[CudaTensor]:
        target = [int(v) for v in np.asarray(shape).reshape(-1)]
        rank = x.ndim
        axes = list(range(rank)) if axes_attr is None else [int(a) for a in axes_attr]
        axes = [a + rank if a < 0 else a for a in axes]
        if len(axes) != len(target) or any(not 0 <= a < rank for a in axes):
            raise ValueError(f"{info.describe()}: shape {target} for axes {axes} of rank {rank}")
        out = list(x.shape)
        src_start, dst_start, count = [0] * rank, [0] * rank, list(x.shape)
        for a, size in zip(axes, target):
            dim = x.shape[a]
            out[a] = size
            if size < dim:
                src_start[a], count[a] = (dim - size) // 2, size
            elif size > dim:
                dst_start[a] = (size - dim) // 2
        padded = out != [min(o, c) for o, c in zip(out, count)]
        y = _zeros(cuda, out, x.dtype) if padded else cuda.empty(out, x.dtype)
        xs, ys = _strides(x.shape), _strides(out)
        item = x.dtype.itemsize
        src = x.ptr + sum(s * t for s, t in zip(src_start, xs)) * item
        dst = y.ptr + sum(s * t for s, t in zip(dst_start, ys)) * item
        cuda.strided_copy(src, dst, count, xs, ys, item)
        return (y,)

    return compute


def _det(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"{info.describe()}: Det of shape {x.shape}")
        m = x.shape[-1]
        batch = x.size // (m * m) if m else int(np.prod(x.shape[:-2], dtype=np.int64))
        y = cuda.empty(x.shape[:-2], x.dtype)
        if batch and m:
            wide = np.float64 if x.dtype == np.float64 else np.float32
            work = cuda.empty([batch * m * m], wide)
            kernel = km.det_kernel(SUFFIX[x.dtype])
            cuda.launch_over(kernel, batch, x.ptr, work.ptr, y.ptr, batch, m, threads=32)
        elif batch:  # the determinant of a 0x0 matrix
            ew_fill = ew.fill_kernel(SUFFIX[x.dtype])
            cuda.launch_over(ew_fill, batch, y.ptr, batch, 1.0)
        return (y,)

    return compute


def _maxunpool(info: NodeInfo) -> Any:
    cuda = device_of(info)
    kernel_shape = [int(k) for k in info.attr("kernel_shape")]
    spatial = len(kernel_shape)
    strides = [int(s) for s in info.attr("strides", None) or [1] * spatial]
    pads = [int(p) for p in info.attr("pads", None) or [0] * (2 * spatial)]

    def compute(x: CudaTensor, indices: CudaTensor, output_shape: Any = None) -> tuple[CudaTensor]:
        if x.ndim != spatial + 2 or indices.shape != x.shape:
            raise ValueError(f"{info.describe()}: X {x.shape}, indices {indices.shape}")
        inferred = [x.shape[0], x.shape[1]] + [
            (x.shape[d + 2] - 1) * strides[d] - (pads[d] + pads[spatial + d]) + kernel_shape[d]
            for d in range(spatial)
        ]
        y = _zeros(cuda, inferred, x.dtype)
        if x.size:
            kernel = km.maxunpool_kernel(SUFFIX[x.dtype])
            cuda.launch_over(kernel, x.size, x.ptr, indices.ptr, y.ptr, x.size, y.size)
        if output_shape is None:
            return (y,)
        out = [int(v) for v in np.asarray(output_shape).reshape(-1)]
        if out == inferred:
            return (y,)
        if len(out) != len(inferred) or any(o < i for o, i in zip(out, inferred)):
            raise ValueError(f"{info.describe()}: output_shape {out} smaller than {inferred}")
        res = _zeros(cuda, out, x.dtype)
        item = x.dtype.itemsize
        cuda.strided_copy(y.ptr, res.ptr, inferred, _strides(inferred), _strides(out), item)
        return (res,)

    return compute


def _affine_grid(info: NodeInfo) -> Any:
    cuda = device_of(info)
    align = int(bool(info.attr("align_corners", 0)))

    def compute(theta: CudaTensor, size: Any) -> tuple[CudaTensor]:
        dims_ = [int(v) for v in np.asarray(size).reshape(-1)]
        if len(dims_) == 4:
            n_, _, h, w = dims_
            d, k, out = 1, 2, [n_, h, w, 2]
        elif len(dims_) == 5:
            n_, _, d, h, w = dims_
            k, out = 3, [n_, d, h, w, 3]
        else:
            raise ValueError(f"{info.describe()}: size {dims_}")
        if theta.shape != (n_, k, k + 1):
            raise ValueError(f"{info.describe()}: theta {theta.shape} for size {dims_}")
        y = cuda.empty(out, theta.dtype)
        points = y.size // k
        if points:
            kernel = km.affine_grid_kernel(SUFFIX[theta.dtype])
            cuda.launch_over(kernel, points, theta.ptr, y.ptr, points, d, h, w, k, align)
        return (y,)

    return compute


def _deform_conv(info: NodeInfo) -> Any:
    cuda = device_of(info)
    group = int(info.attr("group", 1))
    offset_group = int(info.attr("offset_group", 1))
    dil = [int(d) for d in info.attr("dilations", None) or [1, 1]]
    strides = [int(s) for s in info.attr("strides", None) or [1, 1]]
    pads = [int(p) for p in info.attr("pads", None) or [0, 0, 0, 0]]

    def compute(
        x: CudaTensor,
        w: CudaTensor,
        offset: CudaTensor,
        b: CudaTensor | None = None,
        mask: CudaTensor | None = None,
    ) -> tuple[CudaTensor]:
        n, ic, ih, iw = x.shape
        oc, icpg, kh, kw = w.shape
        oh, ow = offset.shape[2:]
        if (
            ic != icpg * group
            or oc % group
            or ic % offset_group
            or offset.shape != (n, offset_group * kh * kw * 2, oh, ow)
            or (mask is not None and mask.shape != (n, offset_group * kh * kw, oh, ow))
            or (b is not None and b.size != oc)
        ):
            raise ValueError(
                f"{info.describe()}: X {x.shape}, W {w.shape}, offset {offset.shape}, "
                f"group {group}, offset_group {offset_group}"
            )
        y = cuda.empty([n, oc, oh, ow], x.dtype)
        if y.size:
            args = km.deform_args(
                n, ic, ih, iw, oc, oh, ow, kh, kw, strides[0], strides[1], pads[0], pads[1],
                dil[0], dil[1], group, offset_group,
            )  # fmt: skip
            kernel = km.deform_conv_kernel(SUFFIX[x.dtype])
            cuda.launch_over(
                kernel, y.size, x.ptr, w.ptr, offset.ptr, b.ptr if b is not None else 0,
                mask.ptr if mask is not None else 0, y.ptr, y.size, args, int(b is not None),
                int(mask is not None),
            )  # fmt: skip
        return (y,)

    return compute


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    floats: dict[str | int, tuple[ir.DataType, ...]] = {"T1": FLOATS64}
    reg.kernel("IsNaN", since=9, types=floats)(_isinfnan("IsNaN"))
    reg.kernel("IsInf", since=10, types=floats)(_isinfnan("IsInf"))
    reg.kernel("BitCast", since=26, types={"T1": MOVABLE, "T2": MOVABLE})(_bitcast)
    reg.kernel("NonZero", since=9, types={"T": MOVABLE})(_nonzero)
    reg.kernel("Unique", since=11, types={"T": MOVABLE})(_unique)
    reg.kernel(
        "NonMaxSuppression",
        since=10,
        types={0: (ir.DataType.FLOAT,), 1: (ir.DataType.FLOAT,)},
        input_memory={2: "host", 3: "host", 4: "host"},
    )(_nms)
    reg.kernel("CenterCropPad", since=18, types={"T": MOVABLE}, input_memory={1: "host"})(
        _center_crop_pad
    )
    reg.kernel("Det", since=11, types={"T": FLOATS64})(_det)
    reg.kernel("MaxUnpool", since=9, types={"T1": FLOATS64}, input_memory={2: "host"})(_maxunpool)
    reg.kernel("DeformConv", since=19, types={"T": FLOATS64})(_deform_conv)
    reg.kernel("AffineGrid", since=20, types={"T1": FLOATS64}, input_memory={1: "host"})(
        _affine_grid
    )


def _rank(v: ir.Value | None) -> int | None:
    return len(v.shape) if v is not None and v.shape is not None else None


def _size(dtype: ir.DataType | None) -> int | None:
    if dtype is None:
        return None
    try:
        return int(np.dtype(dtype.numpy()).itemsize)
    except (TypeError, ValueError, NotImplementedError):
        return None


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    if op not in _OPS or node.domain not in ("", "ai.onnx"):
        return None
    x = node.inputs[0] if node.inputs else None
    rank = _rank(x)
    if op == "BitCast":
        to = node.attributes.get("to")
        src = _size(x.dtype if x is not None else None)
        dst = _size(ir.DataType(to.as_int())) if to is not None else None
        if src is None or dst is None or src != dst:
            return "CUDA: BitCast between element types of different sizes"
    if op in ("NonZero", "CenterCropPad") and rank is not None and not 0 < rank <= ew.MAX_RANK:
        return f"CUDA: {op} of rank {rank}"
    if op == "Unique" and node.attributes.get("axis") is not None:
        if rank is not None and rank > ew.MAX_RANK:
            return f"CUDA: Unique along an axis of rank {rank}"
    if op == "NonMaxSuppression":
        center = node.attributes.get("center_point_box")
        if center is not None and center.as_int() not in (0, 1):
            return f"CUDA: NonMaxSuppression with center_point_box={center.as_int()}"
    if op == "MaxUnpool":
        ks = node.attributes.get("kernel_shape")
        if ks is None or len(ks.as_ints()) > 3:
            return "CUDA: MaxUnpool without kernel_shape or over more than 3 dims"
    if op == "DeformConv" and rank != 4:
        return f"CUDA: DeformConv of rank {rank} (2-D only)"
    if op == "Det" and rank is not None and rank < 2:
        return f"CUDA: Det of rank {rank}"
    return None
