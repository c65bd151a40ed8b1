"""Data-movement and shape ops: Transpose, Reshape, Flatten, Squeeze, Unsqueeze,
Identity, Concat, Slice, Split, Expand, Pad, Gather, Trilu, Shape, Size,
Constant, ConstantOfShape and Range.

Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) copy the
buffer device to device under the new shape; their shape and axes inputs
are read on the host, as are Shape's and Size's outputs (metadata: no copy).
:func:`register` adds this family's kernels to the provider's registry;
:func:`decline` says why a node of this family is not covered (or ``None``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .device import CudaDevice
from .kernels import elementwise as ew
from .ops_common import MOVABLE, device_of, input_rank
from .tensor import CudaTensor

__all__ = ["decline", "register"]


def _transpose(info: NodeInfo) -> Any:
    cuda = device_of(info)
    perm_attr = info.attr("perm")

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        perm = list(perm_attr) if perm_attr is not None else list(reversed(range(x.ndim)))
        return (cuda.transpose(x, perm),)

    return compute


def _trilu(info: NodeInfo) -> Any:
    cuda = device_of(info)
    upper = int(info.attr("upper", 1))

    def compute(x: CudaTensor, k: Any = None) -> tuple[CudaTensor]:
        shift = int(np.asarray(k).reshape(-1)[0]) if k is not None else 0
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            kernel = ew.trilu_kernel(x.dtype.itemsize)
            rows_, cols = x.shape[-2], x.shape[-1]
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, rows_, cols, shift, upper)
        return (y,)

    return compute


def _shape(info: NodeInfo) -> Any:
    start, end = info.attr("start", 0), info.attr("end")

    def compute(x: CudaTensor) -> tuple[np.ndarray]:
        return (np.array(x.shape[slice(start, end)], np.int64),)  # metadata: no copy

    return compute


def _reshaped(shape_of: Callable[[CudaTensor, Sequence[Any]], Sequence[int]]) -> Any:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)

        def compute(x: CudaTensor, *rest: Any) -> tuple[CudaTensor]:
            shape = tuple(int(d) for d in shape_of(x, (info, *rest)))
            if int(np.prod(shape, dtype=np.int64)) != x.size:
                raise ValueError(f"{info.describe()}: cannot make {x.shape} into {shape}")
            return (cuda.copy(x, shape),)

        return compute

    return build


def _reshape_shape(x: CudaTensor, args: Sequence[Any]) -> list[int]:
    info, shape = args[0], [int(d) for d in np.asarray(args[1]).reshape(-1)]
    allow_zero = bool(info.attr("allowzero", 0))
    out = [x.shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(shape)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        out[out.index(-1)] = x.size // known if known else 0
    return out


def _flatten_shape(x: CudaTensor, args: Sequence[Any]) -> list[int]:
    axis = int(args[0].attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return [
        int(np.prod(x.shape[:axis], dtype=np.int64)),
        int(np.prod(x.shape[axis:], dtype=np.int64)),
    ]


def _axes(x_rank: int, args: Sequence[Any]) -> list[int]:
    info = args[0]
    raw = args[1] if len(args) > 1 and args[1] is not None else info.attr("axes")
    return sorted(int(a) + x_rank if int(a) < 0 else int(a) for a in np.asarray(raw).reshape(-1))


def _squeeze_shape(x: CudaTensor, args: Sequence[Any]) -> list[int]:
    has_axes = (len(args) > 1 and args[1] is not None) or args[0].attr("axes") is not None
    axes = set(_axes(x.ndim, args)) if has_axes else {i for i, d in enumerate(x.shape) if d == 1}
    return [d for i, d in enumerate(x.shape) if i not in axes]


def _unsqueeze_shape(x: CudaTensor, args: Sequence[Any]) -> list[int]:
    rank = x.ndim + len(np.asarray(args[1] if len(args) > 1 else args[0].attr("axes")).reshape(-1))
    axes = set(_axes(rank, args))
    it = iter(x.shape)
    return [1 if i in axes else next(it) for i in range(rank)]


def _concat(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis"))

    def compute(*xs: CudaTensor) -> tuple[CudaTensor]:
        first = xs[0]
        axis = axis_attr + first.ndim if axis_attr < 0 else axis_attr
        shape = list(first.shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        y = cuda.empty(shape, first.dtype)
        out_strides = ew.contiguous(shape)
        at = 0
        for x in xs:
            if x.size:
                offset = at * out_strides[axis] * x.dtype.itemsize
                cuda.strided_copy(
                    x.ptr,
                    y.ptr + offset,
                    x.shape,
                    ew.contiguous(x.shape),
                    out_strides,
                    x.dtype.itemsize,
                )
            at += x.shape[axis]
        return (y,)

    return compute


def _slices(
    x: CudaTensor, starts: Any, ends: Any, axes: Any, steps: Any
) -> tuple[list[int], list[int], int]:
    """Output dims, source strides and source element offset of a Slice."""
    shape = list(x.shape)
    strides = ew.contiguous(shape)
    rank = len(shape)
    axes_l = [
        int(a) + rank if int(a) < 0 else int(a)
        for a in (axes if axes is not None else range(len(starts)))
    ]
    steps_l = [int(s) for s in (steps if steps is not None else [1] * len(axes_l))]
    dims, src, offset = list(shape), list(strides), 0
    for a, b, e, st in zip(axes_l, starts, ends, steps_l):
        if st == 0:
            raise ValueError("Slice: a step of 0")
        lo, hi, step = slice(int(b), int(e), st).indices(shape[a])
        count = len(range(lo, hi, step))
        dims[a], src[a] = count, strides[a] * step
        if count:
            offset += lo * strides[a]
    return dims, src, offset


def _slice(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(
        x: CudaTensor, starts: Any = None, ends: Any = None, axes: Any = None, steps: Any = None
    ) -> tuple[CudaTensor]:
        if info.opset < 10:
            starts, ends, axes = info.attr("starts"), info.attr("ends"), info.attr("axes")
        dims, src, offset = _slices(
            x,
            np.asarray(starts).reshape(-1),
            np.asarray(ends).reshape(-1),
            None if axes is None else np.asarray(axes).reshape(-1),
            None if steps is None else np.asarray(steps).reshape(-1),
        )
        y = cuda.empty(dims, x.dtype)
        if y.size:
            item = x.dtype.itemsize
            cuda.strided_copy(x.ptr + offset * item, y.ptr, dims, src, ew.contiguous(dims), item)
        return (y,)

    return compute


def _split(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", 0))
    outputs = info.num_outputs

    def compute(x: CudaTensor, split: Any = None) -> tuple[CudaTensor, ...]:
        axis = axis_attr + x.ndim if axis_attr < 0 else axis_attr
        sizes = split if split is not None else info.attr("split")
        length = x.shape[axis]
        if sizes is None:
            part = -(-length // outputs)
            sizes = [min(part, length - part * i) for i in range(outputs)]
        sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        strides = ew.contiguous(x.shape)
        out: list[CudaTensor] = []
        at = 0
        for size in sizes:
            dims = list(x.shape)
            dims[axis] = size
            y = cuda.empty(dims, x.dtype)
            if y.size:
                item = x.dtype.itemsize
                cuda.strided_copy(
                    x.ptr + at * strides[axis] * item,
                    y.ptr,
                    dims,
                    strides,
                    ew.contiguous(dims),
                    item,
                )
            out.append(y)
            at += size
        return tuple(out)

    return compute


def _expand(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor, shape: Any) -> tuple[CudaTensor]:
        out = tuple(
            np.broadcast_shapes(x.shape, tuple(int(d) for d in np.asarray(shape).reshape(-1)))
        )
        y = cuda.empty(out, x.dtype)
        cuda.copy_broadcast(x, y)
        return (y,)

    return compute


def _pad(info: NodeInfo) -> Any:
    cuda = device_of(info)
    mode = str(info.attr("mode", "constant"))

    def compute(
        x: CudaTensor, pads: Any = None, value: Any = None, axes: Any = None
    ) -> tuple[CudaTensor]:
        if info.opset < 11:
            pads, value = info.attr("pads"), info.attr("value", 0.0)
        p = [int(v) for v in np.asarray(pads).reshape(-1)]
        rank = x.ndim
        axes_l = (
            [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
            if axes is not None
            else list(range(rank))
        )
        if len(p) != 2 * len(axes_l):
            raise ValueError(f"{info.describe()}: {len(p)} pads for {len(axes_l)} axes")
        before, after = [0] * rank, [0] * rank
        for i, a in enumerate(axes_l):
            before[a], after[a] = p[i], p[i + len(axes_l)]
        dims, kept, args = ew.pad_args(x.shape, before, after)
        if min(dims, default=0) < 0:
            raise ValueError(f"{info.describe()}: pads {p} crop {list(x.shape)} below nothing")
        if mode != "constant" and kept == 0 and 0 not in dims:
            raise ValueError(f"{info.describe()}: {mode} padding of nothing (pads {p})")
        fill = np.asarray(value if value is not None and np.size(value) else 0).reshape(-1)[:1]
        bits = int.from_bytes(fill.astype(x.dtype).tobytes(), "little")
        y = cuda.empty(dims, x.dtype)
        if y.size:
            kernel = ew.pad_kernel(x.dtype.itemsize, mode)
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, args, bits)
        return (y,)

    return compute


def _gather(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", 0))

    def compute(x: CudaTensor, indices: Any) -> tuple[CudaTensor]:
        axis = axis_attr + x.ndim if axis_attr < 0 else axis_attr
        idx = np.asarray(indices).astype(np.int64)
        length = x.shape[axis]
        if idx.size and (idx.min() < -length or idx.max() >= length):
            raise IndexError(f"{info.describe()}: indices must be within [{-length}, {length - 1}]")
        idx = np.where(idx < 0, idx + length, idx)
        shape = (*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :])
        y = cuda.empty(shape, x.dtype)
        if y.size:
            device_idx = cuda.from_host(idx.reshape(-1))
            inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
            cuda.launch_over(
                ew.gather_kernel(x.dtype.itemsize),
                y.size,
                x.ptr,
                device_idx.ptr,
                y.ptr,
                y.size,
                idx.size,
                length,
                inner,
            )
        return (y,)

    return compute


_CONSTANT_ATTRS: dict[str, Any] = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}


def _constant(info: NodeInfo) -> Any:
    """The ``value`` attribute's tensor, uploaded once; each run gets a device copy."""
    cuda = device_of(info)
    value: np.ndarray | None = None
    for name, v in info.attrs.items():
        if name == "value" and v is not None:
            value = np.asarray(v)
        elif name in _CONSTANT_ATTRS and v is not None:
            value = np.array(v, dtype=_CONSTANT_ATTRS[name])
    if value is None:
        raise ValueError(f"{info.describe()}: Constant has no value attribute the kernel takes")
    uploaded: list[CudaTensor] = []

    def compute() -> tuple[CudaTensor]:
        if not uploaded:
            uploaded.append(cuda.from_host(value))
        return (cuda.copy(uploaded[0], uploaded[0].shape),)

    return compute


def _fill_bits(cuda: CudaDevice, y: CudaTensor, value: np.ndarray) -> None:
    """Fill ``y`` with ``value`` (one element of its type) by its bits."""
    if y.size:
        bits = int.from_bytes(value.astype(y.dtype).tobytes(), "little")
        cuda.launch_over(ew.fill_word_kernel(y.dtype.itemsize), y.size, y.ptr, y.size, bits)


def _constant_of_shape(info: NodeInfo) -> Any:
    cuda = device_of(info)
    value = info.attr("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)[:1]

    def compute(shape: np.ndarray) -> tuple[CudaTensor]:
        dims = [int(d) for d in np.asarray(shape).reshape(-1)]
        if any(d < 0 for d in dims):
            raise ValueError(f"{info.describe()}: negative dimension in shape {dims}")
        y = cuda.empty(dims, fill.dtype)
        _fill_bits(cuda, y, fill)
        return (y,)

    return compute


def _size(info: NodeInfo) -> Any:
    def compute(x: CudaTensor) -> tuple[np.ndarray]:
        return (np.array(x.size, np.int64),)  # metadata: no copy

    return compute


_RANGE_SUFFIX = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
}


def _range(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(start: Any, limit: Any, delta: Any) -> tuple[CudaTensor]:
        a, b, d = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
        dtype = np.asarray(start).dtype
        if d == 0:
            raise ValueError(f"{info.describe()}: delta is 0")
        n = max(int(np.ceil((b - a) / d)), 0)  # ONNX's number of elements
        y = cuda.empty([n], dtype)
        if n:
            integer = dtype.kind in "iu"
            first, step = (int(a), int(d)) if integer else (float(a), float(d))
            kernel = ew.range_kernel(_RANGE_SUFFIX[dtype])
            cuda.launch_over(kernel, n, y.ptr, n, first, step)
        return (y,)

    return compute


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    move: dict[str | int, tuple[ir.DataType, ...]] = {"T": MOVABLE}
    reg.kernel("Transpose", since=1, types={"T": MOVABLE})(_transpose)
    reg.kernel("Trilu", since=14, types={"T": MOVABLE}, input_memory={1: "host"})(_trilu)
    reg.kernel("Shape", since=1, types={"T": MOVABLE}, output_memory={0: "host"})(_shape)
    reg.kernel("Identity", since=1, types={"T": MOVABLE, "V": MOVABLE})(
        _reshaped(lambda x, a: x.shape)
    )
    reg.kernel("Reshape", since=5, types=move, input_memory={1: "host"})(_reshaped(_reshape_shape))
    reg.kernel("Flatten", since=1, types=move)(_reshaped(_flatten_shape))
    reg.kernel("Squeeze", since=1, until=12, types=move)(_reshaped(_squeeze_shape))
    reg.kernel("Squeeze", since=13, types=move, input_memory={1: "host"})(_reshaped(_squeeze_shape))
    reg.kernel("Unsqueeze", since=1, until=12, types=move)(_reshaped(_unsqueeze_shape))
    reg.kernel("Unsqueeze", since=13, types=move, input_memory={1: "host"})(
        _reshaped(_unsqueeze_shape)
    )
    reg.kernel("Concat", since=4, types=move)(_concat)
    reg.kernel("Slice", since=1, until=9, types=move)(_slice)
    host_rest = {i: "host" for i in range(1, 5)}
    reg.kernel("Slice", since=10, types=move, input_memory=host_rest)(_slice)
    reg.kernel("Split", since=2, until=12, types=move)(_split)
    reg.kernel("Split", since=13, types=move, input_memory={1: "host"})(_split)
    reg.kernel("Expand", since=8, types=move, input_memory={1: "host"})(_expand)
    reg.kernel("Pad", since=2, until=10, types=move)(_pad)
    reg.kernel("Pad", since=11, types=move, input_memory={1: "host", 2: "host", 3: "host"})(_pad)
    reg.kernel("Gather", since=1, types={"T": MOVABLE}, input_memory={1: "host"})(_gather)
    reg.kernel("Constant", since=1, types={"T": MOVABLE})(_constant)
    reg.kernel("ConstantOfShape", since=9, types={"T2": MOVABLE}, input_memory={0: "host"})(
        _constant_of_shape
    )
    reg.kernel("Size", since=1, types={"T": MOVABLE}, output_memory={0: "host"})(_size)
    range_types = (
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
    )
    reg.kernel(
        "Range", since=11, types={"T": range_types}, input_memory={0: "host", 1: "host", 2: "host"}
    )(_range)


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why this family's kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    rank = input_rank(node)
    if op == "Transpose" and (rank or 0) > ew.MAX_RANK:  # an unknown rank is checked at run time
        return f"CUDA: {op} of rank over {ew.MAX_RANK}"
    if op == "Pad":
        mode = node.attributes.get("mode")
        if mode is not None and mode.as_string() not in ew.PAD_MODES:
            return f"CUDA: Pad mode {mode.as_string()}"
    if op == "Trilu" and (rank or 0) < 2:
        return f"CUDA: Trilu of rank {rank}"
    if op in ("Concat", "Slice", "Split", "Expand", "Gather", "Pad"):
        # an unknown rank is checked when the kernel runs
        if rank is not None and (rank > ew.MAX_RANK or (rank == 0 and op != "Expand")):
            return f"CUDA: {op} of rank {rank}"
    return None
