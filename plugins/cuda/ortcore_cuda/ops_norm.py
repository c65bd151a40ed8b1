"""Normalizations and indexing: RMSNormalization, LayerNormalization over any axes,
GroupNormalization, InstanceNormalization, MeanVarianceNormalization, Dropout
(inference), ScatterElements (and the older Scatter), ScatterND, GatherElements,
GatherND, OneHot, Tile, DepthToSpace, SpaceToDepth, EyeLike.

Kernels: :mod:`ortcore_cuda.kernels.norm`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

The normalizations compute in float (float32 and float16 tensors) and run
one block per row of the normalized elements. The indexing ops move
elements as words of their size, so they take any element type; the
scatters' reductions (add, mul, max, min) take float32, float16, int32 and
int64. Host memory is read only for small inputs that are shapes or
attributes in all but name: Tile's repeats, OneHot's depth and values,
Dropout's ratio and training_mode.

LayerNormalization: :func:`layer_normalization` covers any axis (the
flattened trailing dims ``[axis, rank)``), an optional bias, scale and bias
broadcast over the normalized dims, and the Mean and InvStdDev outputs.
The transformers' case of LayerNormalization (the last axis, a bias, Y
alone) goes to a one-pass row kernel (:mod:`ortcore_cuda.kernels.rows`)
instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import norm as k
from .kernels import rows
from .ops_common import MOVABLE, device_of, rows_of, suffix
from .tensor import CudaTensor

if TYPE_CHECKING:
    from .device import CudaDevice

__all__ = ["decline", "layer_normalization", "register"]

FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
"""Element types of the normalizations."""
DROPOUT_TYPES = (*FLOATS, ir.DataType.DOUBLE, ir.DataType.BFLOAT16)
"""Element types of Dropout (inference: a copy)."""
INDICES = (ir.DataType.INT32, ir.DataType.INT64)
ONEHOT_INDICES = (*INDICES, *FLOATS, ir.DataType.DOUBLE)

_FSUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
_ISUFFIX = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}
_ONEHOT_SUFFIX = {**_ISUFFIX, **_FSUFFIX, np.dtype(np.float64): "f64"}
_TRANSPOSE_RANK = 6  # the provider's strided copy (transpose kernel) goes to rank 6


def _prod(dims: Sequence[int]) -> int:
    return int(np.prod(list(dims), dtype=np.int64))


def _contiguous(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in reversed(range(len(shape) - 1)):
        strides[i] = strides[i + 1] * int(shape[i + 1])
    return strides


def _grid(cuda: CudaDevice, rows: int) -> int:
    return max(1, min(rows, cuda.max_grid))


def _host_scalar(value: Any, default: float) -> float:
    if value is None or np.size(value) == 0:
        return default
    return float(np.asarray(value).reshape(-1)[0])


# -- normalizations ----------------------------------------------------------------


def _over(cuda: CudaDevice, t: CudaTensor, dims: Sequence[int], what: str) -> CudaTensor:
    """``t`` (a scale or bias) laid out over the normalized ``dims``: itself when
    it has their elements, else a copy broadcast to them."""
    cols = _prod(dims)
    if t.size == cols:
        return t  # broadcasting to as many elements: the same layout
    shape = list(t.shape)
    while len(shape) > len(dims) and shape[0] == 1:
        shape.pop(0)
    if len(shape) > len(dims) or len(dims) > _TRANSPOSE_RANK:
        raise NotImplementedError(f"CUDA: a {what} of shape {t.shape} over {tuple(dims)}")
    padded = [1] * (len(dims) - len(shape)) + shape
    for have, want in zip(padded, dims):
        if have not in (1, want):
            raise ValueError(f"a {what} of shape {t.shape} does not broadcast to {tuple(dims)}")
    full = _contiguous(padded)
    src = [0 if h == 1 else s for h, s in zip(padded, full)]
    out = cuda.empty(dims, t.dtype)
    cuda.strided_copy(t.ptr, out.ptr, dims, src, _contiguous(dims), t.dtype.itemsize)
    return out


def layer_normalization(info: NodeInfo) -> Any:
    """LayerNormalization over the flattened dims ``[axis, rank)``: Y, and the
    Mean and InvStdDev outputs (shape ``X.shape[:axis] + [1] * (rank - axis)``)."""
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", -1))
    eps = float(info.attr("epsilon", 1e-5))
    outputs = info.num_outputs
    stats = np.dtype(info.output_dtype(1)) if outputs > 1 else np.dtype(np.float32)

    def compute(
        x: CudaTensor, scale: CudaTensor, bias: CudaTensor | None = None
    ) -> tuple[CudaTensor, ...]:
        a = axis_attr + x.ndim if axis_attr < 0 else axis_attr
        dims = x.shape[a:]
        rows, cols = _prod(x.shape[:a]), _prod(dims)
        y = cuda.empty(x.shape, x.dtype)
        stat_shape = (*x.shape[:a], *[1] * (x.ndim - a))
        mean = cuda.empty(stat_shape, stats)
        inv = cuda.empty(stat_shape, stats)
        if rows:
            s = _over(cuda, scale, dims, "scale")
            args: list[Any] = [x.ptr, s.ptr]
            if bias is not None:
                args.append(_over(cuda, bias, dims, "bias").ptr)
            kernel = k.layernorm_kernel(_FSUFFIX[x.dtype], _FSUFFIX[stats], bias is not None)
            cuda.launch(
                kernel,
                _grid(cuda, rows),
                k.row_threads(cols),
                *args,
                y.ptr,
                mean.ptr,
                inv.ptr,
                rows,
                cols,
                1,
                1,
                eps,
            )
        return (y, mean, inv)[: max(outputs, 1)]

    return compute


def _layernorm(info: NodeInfo) -> Any:
    """The last axis with a bias and Y alone (transformers' case) by the
    one-pass row kernel; any other axis, no bias, the Mean and InvStdDev
    outputs by :func:`layer_normalization`."""
    cuda = device_of(info)
    eps = float(info.attr("epsilon", 1e-5))
    axis = int(info.attr("axis", -1))
    general = layer_normalization(info)

    def compute(
        x: CudaTensor, scale: CudaTensor, bias: CudaTensor | None = None
    ) -> tuple[CudaTensor, ...]:
        rows_, cols = rows_of(x.shape, x.ndim - 1)
        last = axis in (-1, x.ndim - 1)
        if (
            info.num_outputs > 1
            or bias is None
            or not last
            or scale.size != cols
            or bias.size != cols
        ):
            return general(x, scale, bias)
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            kernel = rows.layernorm_kernel(suffix(x))
            cuda.launch(
                kernel,
                rows_,
                rows.row_threads(cols),
                x.ptr,
                scale.ptr,
                bias.ptr,
                y.ptr,
                rows_,
                cols,
                eps,
            )
        return (y,)

    return compute


def _rms(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", -1))
    eps = float(info.attr("epsilon", 1e-5))

    def compute(x: CudaTensor, scale: CudaTensor) -> tuple[CudaTensor]:
        a = axis_attr + x.ndim if axis_attr < 0 else axis_attr
        dims = x.shape[a:]
        rows, cols = _prod(x.shape[:a]), _prod(dims)
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            s = _over(cuda, scale, dims, "scale")
            cuda.launch(
                k.rms_kernel(_FSUFFIX[x.dtype]),
                _grid(cuda, rows),
                k.row_threads(cols),
                x.ptr,
                s.ptr,
                y.ptr,
                rows,
                cols,
                1,
                1,
                eps,
            )
        return (y,)

    return compute


def _grouped(
    cuda: CudaDevice,
    x: CudaTensor,
    scale: CudaTensor,
    bias: CudaTensor,
    groups: int,
    per_channel: bool,
    eps: float,
) -> CudaTensor:
    """``x`` (N, C, ...) normalized per instance and group of ``C / groups``
    channels, then scaled and shifted per channel (or, not ``per_channel``,
    per group)."""
    n, c = x.shape[0], x.shape[1]
    if groups <= 0 or c % groups:
        raise ValueError(f"{c} channels do not split into {groups} groups")
    inner = _prod(x.shape[2:])
    rows, cols = n * groups, (c // groups) * inner
    want = c if per_channel else groups
    if scale.size != want or bias.size != want:
        raise ValueError(f"scale and bias of {want} elements expected")
    y = cuda.empty(x.shape, x.dtype)
    if rows and cols:
        stats = cuda.empty((2, rows), np.float32)
        kernel = k.layernorm_kernel(_FSUFFIX[x.dtype], "f32", True)
        cuda.launch(
            kernel,
            _grid(cuda, rows),
            k.row_threads(cols),
            x.ptr,
            scale.ptr,
            bias.ptr,
            y.ptr,
            stats.ptr,
            stats.ptr + rows * 4,
            rows,
            cols,
            groups,
            inner if per_channel else cols,
            eps,
        )
    return y


def _group_norm(info: NodeInfo) -> Any:
    cuda = device_of(info)
    groups = int(info.attr("num_groups", 0))
    eps = float(info.attr("epsilon", 1e-5))
    per_channel = info.opset >= 21

    def compute(x: CudaTensor, scale: CudaTensor, bias: CudaTensor) -> tuple[CudaTensor]:
        return (_grouped(cuda, x, scale, bias, groups, per_channel, eps),)

    return compute


def _instance_norm(info: NodeInfo) -> Any:
    cuda = device_of(info)
    eps = float(info.attr("epsilon", 1e-5))

    def compute(x: CudaTensor, scale: CudaTensor, bias: CudaTensor) -> tuple[CudaTensor]:
        return (_grouped(cuda, x, scale, bias, x.shape[1], True, eps),)

    return compute


def _mvn(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axes_attr = info.attr("axes", [0, 2, 3])

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        axes = sorted({int(a) % x.ndim for a in axes_attr})
        rest = [i for i in range(x.ndim) if i not in axes]
        perm = rest + axes
        rows, cols = _prod([x.shape[i] for i in rest]), _prod([x.shape[i] for i in axes])
        moved = x if perm == list(range(x.ndim)) else cuda.transpose(x, perm)
        z = cuda.empty(moved.shape, x.dtype)
        if z.size:
            cuda.launch(
                k.mvn_kernel(_FSUFFIX[x.dtype]),
                _grid(cuda, rows),
                k.row_threads(cols),
                moved.ptr,
                z.ptr,
                rows,
                cols,
            )
        if moved is x:
            return (z,)
        return (cuda.transpose(z, [int(i) for i in np.argsort(perm)]),)

    return compute


# -- Dropout, EyeLike, OneHot --------------------------------------------------------


def _dropout(info: NodeInfo) -> Any:
    cuda = device_of(info)
    outputs = info.num_outputs

    def compute(x: CudaTensor, ratio: Any = None, training: Any = None) -> tuple[CudaTensor, ...]:
        if training is not None and np.size(training) and bool(np.asarray(training).reshape(-1)[0]):
            raise NotImplementedError(f"{info.describe()}: Dropout in training mode")
        y = cuda.copy(x, x.shape)
        if outputs < 2:
            return (y,)
        mask = cuda.empty(x.shape, np.bool_)
        if mask.size:
            one = cuda.from_host(np.ones(1, np.bool_))
            cuda.launch_over(k.fill_words_kernel(1), mask.size, mask.ptr, one.ptr, mask.size)
        return (y, mask)

    return compute


def _eyelike(info: NodeInfo) -> Any:
    cuda = device_of(info)
    shift = int(info.attr("k", 0))
    dtype = np.dtype(info.output_dtype(0))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        shape = x.shape if x.ndim == 2 else (x.shape[0], x.shape[0])
        y = cuda.empty(shape, dtype)
        if y.size:
            vals = cuda.from_host(np.array([0, 1]).astype(dtype))
            cuda.launch_over(
                k.eyelike_kernel(dtype.itemsize), y.size, y.ptr, vals.ptr, y.size, shape[1], shift
            )
        return (y,)

    return compute


def _onehot(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", -1))

    def compute(indices: CudaTensor, depth: Any, values: Any) -> tuple[CudaTensor]:
        d = int(_host_scalar(depth, 0.0))
        if d < 0:
            raise ValueError(f"{info.describe()}: depth {d}")
        vals = np.ascontiguousarray(np.asarray(values).reshape(-1)[:2])
        if vals.size != 2:
            raise ValueError(f"{info.describe()}: values must hold [off_value, on_value]")
        rank = indices.ndim
        a = axis_attr + rank + 1 if axis_attr < 0 else axis_attr
        shape = (*indices.shape[:a], d, *indices.shape[a:])
        y = cuda.empty(shape, vals.dtype)
        if y.size:
            inner = _prod(indices.shape[a:])
            device_vals = cuda.from_host(vals)
            kernel = k.onehot_kernel(vals.dtype.itemsize, _ONEHOT_SUFFIX[indices.dtype])
            cuda.launch_over(kernel, y.size, indices.ptr, device_vals.ptr, y.ptr, y.size, d, inner)
        return (y,)

    return compute


# -- data movement ---------------------------------------------------------------------


def _tile(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor, repeats: Any) -> tuple[CudaTensor]:
        reps = [int(r) for r in np.asarray(repeats).reshape(-1)]
        if len(reps) != x.ndim or min(reps, default=0) < 0:
            raise ValueError(f"{info.describe()}: repeats {reps} for rank {x.ndim}")
        out = [d * r for d, r in zip(x.shape, reps)]
        y = cuda.empty(out, x.dtype)
        if y.size:
            rank = max(x.ndim, 1)
            s = k.shape_arg(out or [1], sa=list(x.shape) or [1])
            cuda.launch_over(k.tile_kernel(x.dtype.itemsize), y.size, x.ptr, y.ptr, y.size, rank, s)
        return (y,)

    return compute


def _space(to_space: bool) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        b = int(info.attr("blocksize"))
        mode = str(info.attr("mode", "DCR") or "DCR")

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            n, c, h, w = x.shape
            if to_space:
                if c % (b * b):
                    raise ValueError(f"{info.describe()}: {c} channels, blocksize {b}")
                c2 = c // (b * b)
                if mode == "DCR":
                    tmp, perm = [n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2]
                else:
                    tmp, perm = [n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3]
                out = [n, c2, h * b, w * b]
            else:
                if h % b or w % b:
                    raise ValueError(f"{info.describe()}: {h}x{w}, blocksize {b}")
                tmp = [n, c, h // b, b, w // b, b]
                perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
                out = [n, c * b * b, h // b, w // b]
            y = cuda.empty(out, x.dtype)
            if y.size:
                strides = _contiguous(tmp)
                dims = [tmp[p] for p in perm]
                cuda.strided_copy(
                    x.ptr,
                    y.ptr,
                    dims,
                    [strides[p] for p in perm],
                    _contiguous(dims),
                    x.dtype.itemsize,
                )
            return (y,)

        return compute

    return build


def _gather_elements(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", 0))

    def compute(x: CudaTensor, indices: CudaTensor) -> tuple[CudaTensor]:
        if indices.ndim != x.ndim:
            raise ValueError(f"{info.describe()}: indices of rank {indices.ndim}, data {x.ndim}")
        a = axis_attr % x.ndim
        y = cuda.empty(indices.shape, x.dtype)
        if y.size:
            s = k.shape_arg(list(indices.shape), sa=_contiguous(x.shape))
            kernel = k.gather_elements_kernel(x.dtype.itemsize, _ISUFFIX[indices.dtype])
            cuda.launch_over(
                kernel, y.size, x.ptr, indices.ptr, y.ptr, y.size, x.ndim, a, x.shape[a], s
            )
        return (y,)

    return compute


def _gather_nd(info: NodeInfo) -> Any:
    cuda = device_of(info)
    b = int(info.attr("batch_dims", 0))

    def compute(x: CudaTensor, indices: CudaTensor) -> tuple[CudaTensor]:
        q = indices.shape[-1]
        if b + q > x.ndim or tuple(indices.shape[:b]) != tuple(x.shape[:b]):
            raise ValueError(f"{info.describe()}: indices {indices.shape} for data {x.shape}")
        shape = (*indices.shape[:-1], *x.shape[b + q :])
        y = cuda.empty(shape, x.dtype)
        if y.size:
            strides = _contiguous(x.shape)
            s = k.shape_arg(list(x.shape[b : b + q]), sa=strides[b : b + q])
            idx = indices if indices.dtype == np.int64 else None
            if idx is None:
                raise TypeError(f"{info.describe()}: int64 indices expected")
            cuda.launch_over(
                k.gather_nd_kernel(x.dtype.itemsize),
                y.size,
                x.ptr,
                idx.ptr,
                y.ptr,
                y.size,
                _prod(x.shape[b + q :]),
                q,
                _prod(indices.shape[b:-1]),
                _prod(x.shape[b:]),
                s,
            )
        return (y,)

    return compute


def _reduction(info: NodeInfo) -> str:
    return str(info.attr("reduction", "none") or "none")


def _scatter_elements(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", 0))
    reduction = _reduction(info)

    def compute(data: CudaTensor, indices: CudaTensor, updates: CudaTensor) -> tuple[CudaTensor]:
        if indices.shape != updates.shape or indices.ndim != data.ndim:
            raise ValueError(
                f"{info.describe()}: indices {indices.shape}, updates {updates.shape}, "
                f"data {data.shape}"
            )
        key = k.scatter_key(data.dtype, reduction)
        if key is None:
            raise NotImplementedError(f"{info.describe()}: reduction {reduction} of {data.dtype}")
        y = cuda.copy(data, data.shape)
        a = axis_attr % data.ndim
        lines = list(indices.shape)
        count, lines[a] = lines[a], 1
        n = _prod(lines)
        if n and count:
            s = k.shape_arg(lines, sa=_contiguous(indices.shape), sb=_contiguous(data.shape))
            kernel = k.scatter_elements_kernel(key, reduction, _ISUFFIX[indices.dtype])
            cuda.launch_over(
                kernel,
                n,
                y.ptr,
                indices.ptr,
                updates.ptr,
                n,
                data.ndim,
                a,
                count,
                data.shape[a],
                s,
            )
        return (y,)

    return compute


def _scatter_nd(info: NodeInfo) -> Any:
    cuda = device_of(info)
    reduction = _reduction(info)

    def compute(data: CudaTensor, indices: CudaTensor, updates: CudaTensor) -> tuple[CudaTensor]:
        q = indices.shape[-1]
        want = (*indices.shape[:-1], *data.shape[q:])
        if q > data.ndim or tuple(updates.shape) != want or indices.dtype != np.int64:
            raise ValueError(
                f"{info.describe()}: indices {indices.shape}, updates {updates.shape}, "
                f"data {data.shape}"
            )
        key = k.scatter_key(data.dtype, reduction)
        if key is None:
            raise NotImplementedError(f"{info.describe()}: reduction {reduction} of {data.dtype}")
        y = cuda.copy(data, data.shape)
        inner, count = _prod(data.shape[q:]), _prod(indices.shape[:-1])
        if inner and count:
            s = k.shape_arg(list(data.shape[:q]), sa=_contiguous(data.shape)[:q])
            cuda.launch_over(
                k.scatter_nd_kernel(key, reduction),
                inner,
                y.ptr,
                indices.ptr,
                updates.ptr,
                inner,
                count,
                q,
                s,
            )
        return (y,)

    return compute


# -- registration and declines ---------------------------------------------------------


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    floats: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS}
    reg.kernel("LayerNormalization", since=17, types={0: FLOATS})(_layernorm)
    move: dict[str | int, tuple[ir.DataType, ...]] = {"T": MOVABLE}
    indexed: dict[str | int, tuple[ir.DataType, ...]] = {"T": MOVABLE, "Tind": INDICES}
    reg.kernel("RMSNormalization", since=23, types={"T": FLOATS, "V": FLOATS})(_rms)
    reg.kernel("GroupNormalization", since=18, types=floats)(_group_norm)
    reg.kernel("InstanceNormalization", since=6, types=floats)(_instance_norm)
    reg.kernel("MeanVarianceNormalization", since=9, types=floats)(_mvn)
    reg.kernel(
        "Dropout",
        since=7,
        types={"T": DROPOUT_TYPES},
        input_memory={1: "host", 2: "host"},
    )(_dropout)
    reg.kernel("EyeLike", since=9, types={"T1": MOVABLE, "T2": MOVABLE})(_eyelike)
    reg.kernel(
        "OneHot",
        since=9,
        types={"T1": ONEHOT_INDICES, "T3": MOVABLE},
        input_memory={1: "host", 2: "host"},
    )(_onehot)
    reg.kernel("Tile", since=6, types=move, input_memory={1: "host"})(_tile)
    reg.kernel("DepthToSpace", since=1, types=move)(_space(True))
    reg.kernel("SpaceToDepth", since=1, types=move)(_space(False))
    reg.kernel("GatherElements", since=11, types=indexed)(_gather_elements)
    reg.kernel("GatherND", since=11, types=move)(_gather_nd)
    reg.kernel("ScatterElements", since=11, types=indexed)(_scatter_elements)
    reg.kernel("Scatter", since=9, until=10, types=indexed)(_scatter_elements)
    reg.kernel("ScatterND", since=11, types=move)(_scatter_nd)


def _rank(node: ir.Node, index: int = 0) -> int | None:
    v = node.inputs[index] if index < len(node.inputs) else None
    return len(v.shape) if v is not None and v.shape is not None else None


def _input(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def _int_attr(node: ir.Node, name: str, default: int) -> int:
    a = node.attributes.get(name)
    return a.as_int() if a is not None else default


def _str_attr(node: ir.Node, name: str, default: str) -> str:
    a = node.attributes.get(name)
    return a.as_string() if a is not None else default


def _used(v: ir.Value | None) -> bool:
    return v is not None and bool(v.name) and (bool(v.uses()) or v.is_graph_output())


def _broadcast_why(node: ir.Node, index: int, rank: int, axis: int, what: str) -> str | None:
    """Why input ``index`` (a scale or bias) is not one the normalized dims
    ``[axis, rank)`` can take (it may vary only along them)."""
    v = _input(node, index)
    if v is None:
        return None
    if v.shape is None:
        return f"CUDA: {node.op_type} with a {what} of unknown rank"
    dims = list(v.shape)
    extra = len(dims) - (rank - axis)
    if extra > 0 and any(d != 1 for d in dims[:extra]):
        return f"CUDA: {node.op_type} with a {what} that varies along the unnormalized axes"
    return None


def _norm_why(node: ir.Node, rank: int | None, inputs: Sequence[tuple[int, str]]) -> str | None:
    op = node.op_type
    if rank is None or rank == 0:
        return f"CUDA: {op} of rank {rank}"
    axis = _int_attr(node, "axis", -1)
    if not -rank <= axis < rank:
        return f"CUDA: {op} with axis {axis} for rank {rank}"
    a = axis % rank
    if _int_attr(node, "stash_type", 1) != 1:
        return f"CUDA: {op} with stash_type other than 1 (float)"
    x = _input(node, 0)
    for index, what in inputs:
        v = _input(node, index)
        if v is not None and x is not None and v.dtype != x.dtype:
            return f"CUDA: {op} with a {what} of another element type than X"
        why = _broadcast_why(node, index, rank, a, what)
        if why is not None:
            return why
    return None


def _decline_layernorm(node: ir.Node, rank: int | None) -> str | None:
    why = _norm_why(node, rank, [(1, "scale"), (2, "bias")])
    if why is not None:
        return why
    for o in node.outputs[1:]:
        if _used(o) and o.dtype not in FLOATS:
            return f"CUDA: LayerNormalization's {o.name} of type {o.dtype}"
    return None


def _const_scalar(v: ir.Value | None) -> Any:
    if v is None or v.const_value is None:
        return None
    return v.const_value.numpy().reshape(-1)


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return None
    rank = _rank(node)
    if op == "LayerNormalization":
        return _decline_layernorm(node, rank)
    if op == "RMSNormalization":
        return _norm_why(node, rank, [(1, "scale")])
    if op in ("GroupNormalization", "InstanceNormalization"):
        if rank is None or rank < 2:
            return f"CUDA: {op} of rank {rank}"
        if op == "GroupNormalization" and _int_attr(node, "stash_type", 1) != 1:
            return "CUDA: GroupNormalization with stash_type other than 1 (float)"
        return None
    if op == "MeanVarianceNormalization":
        if rank is None or rank > _TRANSPOSE_RANK:
            return f"CUDA: MeanVarianceNormalization of rank {rank}"
        a = node.attributes.get("axes")
        axes = a.as_ints() if a is not None else [0, 2, 3]
        if not axes or any(not -rank <= int(i) < rank for i in axes):
            return f"CUDA: MeanVarianceNormalization over axes {list(axes)} of rank {rank}"
        return None
    if op == "Dropout":
        training = _input(node, 2)
        if training is not None and training.name:
            value = _const_scalar(training)
            if value is None or value.size != 1 or bool(value[0]):
                return "CUDA: Dropout in training mode (or training_mode not a constant false)"
        if graph.opset("") < 10 and len(node.outputs) > 1 and _used(node.outputs[1]):
            return "CUDA: Dropout's mask before opset 10"
        return None
    if op == "EyeLike":
        return None if rank == 2 else f"CUDA: EyeLike of rank {rank}"
    if op == "OneHot":
        if rank is None:
            return "CUDA: OneHot of indices of unknown rank"
        axis = _int_attr(node, "axis", -1)
        if not -rank - 1 <= axis <= rank:
            return f"CUDA: OneHot with axis {axis} for rank {rank}"
        return None
    if op == "Tile":
        if rank is None or not 1 <= rank <= k.MAX_RANK:
            return f"CUDA: Tile of rank {rank}"
        return None
    if op in ("DepthToSpace", "SpaceToDepth"):
        if rank != 4:
            return f"CUDA: {op} of rank {rank}"
        if _str_attr(node, "mode", "DCR") not in ("DCR", "CRD"):
            return f"CUDA: {op} mode {_str_attr(node, 'mode', 'DCR')}"
        return None
    if op in ("GatherElements", "GatherND", "ScatterElements", "Scatter", "ScatterND"):
        if rank is None or not 1 <= rank <= k.MAX_RANK:
            return f"CUDA: {op} of rank {rank}"
        irank = _rank(node, 1)
        if irank is None or irank > k.MAX_RANK or irank < 1:
            return f"CUDA: {op} of indices of rank {irank}"
        if op in ("GatherND", "ScatterND"):
            idx = _input(node, 1)
            if idx is None or idx.dtype != ir.DataType.INT64:
                return f"CUDA: {op} of indices other than int64"
        if op in ("ScatterElements", "ScatterND"):
            reduction = _str_attr(node, "reduction", "none")
            if reduction not in k.REDUCTIONS:
                return f"CUDA: {op} with reduction {reduction}"
            x = _input(node, 0)
            dtype = x.dtype if x is not None else None
            if reduction != "none" and dtype not in (*FLOATS, *INDICES):
                return f"CUDA: {op} reduction {reduction} of {dtype}"
        return None
    return None
