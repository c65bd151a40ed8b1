"""The provider's kernel registry: ONNX ops on :class:`~ortcore_cuda.tensor.CudaTensor` values.

Each kernel builder reads the node's attributes once and returns a compute
function that allocates its outputs from the provider's caching allocator
and launches the generated kernels (:mod:`ortcore_cuda.kernels`) or a GEMM
on the provider's stream. What a kernel does not cover (an axis other than
the last, a third Max input) is declined at capability time by
:func:`decline_reason`, with the reason, so the node goes to the next
provider.

Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) copy the
buffer device to device under the new shape; their shape and axes inputs
are read on the host.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .device import CudaDevice
from .kernels import elementwise as ew
from .kernels import nn, rows
from .tensor import CudaTensor

__all__ = ["FAMILIES", "build_registry", "decline_reason"]

FAMILIES = (
    "ops_attention",
    "ops_cast",
    "ops_image",
    "ops_losses",
    "ops_misc",
    "ops_norm",
    "ops_quant",
    "ops_recurrent",
)
"""Modules of further op families, each with ``register(reg)`` and ``decline(node, graph)``."""


def _families() -> list[ModuleType]:
    return [importlib.import_module(f".{m}", __package__) for m in FAMILIES]


FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
FLOATS64 = (*FLOATS, ir.DataType.DOUBLE)
"""Element types of the kernels generated for float64 too (elementwise, rows)."""
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.float64): "f64"}
MOVABLE = (
    ir.DataType.FLOAT,
    ir.DataType.FLOAT16,
    ir.DataType.BFLOAT16,
    ir.DataType.DOUBLE,
    ir.DataType.INT8,
    ir.DataType.UINT8,
    ir.DataType.INT16,
    ir.DataType.UINT16,
    ir.DataType.INT32,
    ir.DataType.UINT32,
    ir.DataType.INT64,
    ir.DataType.UINT64,
    ir.DataType.BOOL,
)
"""Element types the data-movement ops (Transpose, Reshape, ...) take: they move bytes."""

UNARY_SINCE = {
    "Relu": 6,
    "Sigmoid": 6,
    "Tanh": 6,
    "Exp": 6,
    "Log": 6,
    "Neg": 6,
    "Abs": 6,
    "Sqrt": 6,
    "Reciprocal": 6,
    "Floor": 6,
    "Ceil": 6,
    "Erf": 9,
    "Sin": 7,
    "Cos": 7,
    "Softplus": 1,
    "Sign": 9,
    "Round": 11,
    "HardSwish": 14,
    "Mish": 18,
    "Softsign": 1,
    "Tan": 7,
    "Asin": 7,
    "Acos": 7,
    "Atan": 7,
    "Sinh": 9,
    "Cosh": 9,
    "Asinh": 9,
    "Acosh": 9,
    "Atanh": 9,
}
PARAM_SINCE: dict[str, tuple[int, str, float, str, float]] = {
    "LeakyRelu": (6, "alpha", 0.01, "", 0.0),
    "Elu": (6, "alpha", 1.0, "", 0.0),
    "Selu": (6, "alpha", 1.67326319217681884765625, "gamma", 1.05070102214813232421875),
    "Celu": (12, "alpha", 1.0, "", 0.0),
    "HardSigmoid": (6, "alpha", 0.2, "beta", 0.5),
    "ThresholdedRelu": (10, "alpha", 1.0, "", 0.0),
    "Shrink": (9, "bias", 0.0, "lambd", 0.5),
    "Swish": (24, "alpha", 1.0, "", 0.0),
}
"""Unary ops with attributes: since, the attributes passed as alpha and beta, with defaults."""
SIGNED = (ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64)
UNSIGNED = (ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64)
INT_TYPES = SIGNED + UNSIGNED

_ISUFFIX = {dtype: suffix for suffix, (_, dtype) in ew.INTS.items()} | {np.dtype(np.bool_): "b"}
BINARY_SINCE = {"Add": 7, "Sub": 7, "Mul": 7, "Div": 7, "Pow": 7, "Max": 8, "Min": 8, "PRelu": 7}
BROADCASTING = {
    *BINARY_SINCE,
    "Sum",
    "Transpose",
    "Mod",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
}
"""Ops whose kernels index by rank (up to ``MAX_RANK``)."""


def _p(info: NodeInfo) -> CudaDevice:
    """The device a kernel of ``info`` runs on: its provider's allocator
    (``ep_sdk.ProviderView.allocator``), a :class:`~ortcore_cuda.device.CudaDevice`."""
    provider = info.provider
    if provider is None:
        raise TypeError(f"{info.describe()}: CUDA kernels are built by a session's provider")
    device = provider.allocator()
    if not isinstance(device, CudaDevice):
        raise TypeError(
            f"{info.describe()}: CUDA kernels run on the CUDA provider's device, "
            f"not on {provider.name}'s allocator ({type(device).__name__})"
        )
    return device


def _suffix(x: CudaTensor) -> str:
    return _SUFFIX[x.dtype]


def _unary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        name = op
        if op == "Gelu" and info.attr("approximate", "none") == "tanh":
            name = "GeluTanh"

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            y = cuda.empty(x.shape, x.dtype)
            if x.size:
                cuda.launch_over(ew.unary_kernel(name, _suffix(x)), x.size, x.ptr, y.ptr, x.size)
            return (y,)

        return compute

    return build


def _param_unary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        _, a_name, a_default, b_name, b_default = PARAM_SINCE[op]
        alpha = float(info.attr(a_name, a_default))
        beta = float(info.attr(b_name, b_default)) if b_name else 0.0

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            y = cuda.empty(x.shape, x.dtype)
            if x.size:
                kernel = ew.param_kernel(op, _suffix(x))
                cuda.launch_over(kernel, x.size, x.ptr, y.ptr, x.size, alpha, beta)
            return (y,)

        return compute

    return build


def _int_binary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        name = "FMod" if op == "Mod" and int(info.attr("fmod", 0)) else op
        if op == "BitShift":
            name = "BitShiftLeft" if info.attr("direction") == "LEFT" else "BitShiftRight"
        compare = op in ew.COMPARE

        def pair(a: CudaTensor, b: CudaTensor) -> CudaTensor:
            out, rank, s = ew.broadcast_args(a.shape, b.shape)
            y = cuda.empty(out, np.bool_ if compare else a.dtype)
            if y.size:
                kernel = ew.int_binary_kernel(name, _ISUFFIX[a.dtype], rank)
                cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
            return y

        def compute(*xs: CudaTensor) -> tuple[CudaTensor]:
            if len(xs) == 1:  # Max, Min of one input
                return (cuda.copy(xs[0], xs[0].shape),)
            acc = pair(xs[0], xs[1])
            for x in xs[2:]:
                acc = pair(acc, x)
            return (acc,)

        return compute

    return build


def _int_unary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            y = cuda.empty(x.shape, x.dtype)
            if x.size:
                kernel = ew.int_unary_kernel(op, _ISUFFIX[x.dtype])
                cuda.launch_over(kernel, x.size, x.ptr, y.ptr, x.size)
            return (y,)

        return compute

    return build


def _moved_last(
    cuda: CudaDevice, x: CudaTensor, axes: Sequence[int]
) -> tuple[CudaTensor, int, int]:
    """``x`` with ``axes`` moved last (a transposed copy when they are not
    already), and its rows and columns (the kept and the moved elements)."""
    rest = [i for i in range(x.ndim) if i not in axes]
    perm = rest + list(axes)
    rows_ = int(np.prod([x.shape[i] for i in rest], dtype=np.int64))
    cols = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    if perm == list(range(x.ndim)) or x.size == 0:
        return x, rows_, cols
    return cuda.transpose(x, perm), rows_, cols


def _binary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        name = "FMod" if op == "Mod" and int(info.attr("fmod", 0)) else op
        mixed = _pow_mixed(info) if op == "Pow" else None  # a float32 base, a float64 exponent

        def pair(a: CudaTensor, b: CudaTensor) -> CudaTensor:
            if a.dtype != b.dtype:
                raise TypeError(f"{info.describe()}: inputs of types {a.dtype} and {b.dtype}")
            out, rank, s = ew.broadcast_args(a.shape, b.shape)
            y = cuda.empty(out, a.dtype)
            if y.size:
                kernel = ew.binary_kernel(name, _suffix(a), rank)
                cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
            return y

        def compute(*xs: CudaTensor) -> tuple[CudaTensor]:
            if len(xs) == 1:  # Sum, Max, Min of one input
                return (cuda.copy(xs[0], xs[0].shape),)
            if mixed is not None and xs[0].dtype != xs[1].dtype:
                return mixed(*xs)  # type: ignore[no-any-return]
            acc = pair(xs[0], xs[1])
            for x in xs[2:]:  # variadic Sum, Max, Min: folded pairwise, broadcasting
                acc = pair(acc, x)
            return (acc,)

        return compute

    return build


def _pow_mixed(info: NodeInfo) -> Any:
    """Pow of a base and an exponent of different types (computed in double)."""
    cuda = _p(info)

    def compute(a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
        out = np.broadcast_shapes(a.shape, b.shape)
        if len(out) > ew.MAX_RANK:
            raise ValueError(f"{info.describe()}: rank {len(out)} (the kernel goes to 6)")
        pad = (1,) * ew.MAX_RANK
        _, _, s = ew.broadcast_args(
            (pad + a.shape)[-ew.MAX_RANK :], (pad + b.shape)[-ew.MAX_RANK :]
        )
        y = cuda.empty(out, a.dtype)
        if y.size:
            kernel = ew.pow_kernel(_CAST_SUFFIX[a.dtype], _CAST_SUFFIX[b.dtype])
            cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
        return (y,)

    return compute


_CAST_SUFFIX = {dtype: suffix for suffix, (_, dtype) in ew.CAST_TYPES.items() if suffix != "b"}


def _lrn(info: NodeInfo) -> Any:
    cuda = _p(info)
    size = int(info.attr("size"))
    alpha, beta = float(info.attr("alpha", 1e-4)), float(info.attr("beta", 0.75))
    bias = float(info.attr("bias", 1.0))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            inner = int(np.prod(x.shape[2:], dtype=np.int64))
            cuda.launch_over(
                nn.lrn_kernel(_suffix(x)),
                y.size,
                x.ptr,
                y.ptr,
                y.size,
                x.shape[1],
                inner,
                size,
                alpha,
                beta,
                bias,
            )
        return (y,)

    return compute


def _rows_of(shape: Sequence[int], axis: int) -> tuple[int, int]:
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    return rows, int(np.prod(shape[axis:], dtype=np.int64))


def _softmax(log: bool) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        axis = int(info.attr("axis", -1 if info.opset >= 13 else 1))

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            a = axis + x.ndim if axis < 0 else axis
            if x.size == 0:  # nothing to normalize (and no axis to move and back)
                return (cuda.empty(x.shape, x.dtype),)
            kernel = rows.softmax_kernel(_suffix(x), log)
            if info.opset >= 13 and a != x.ndim - 1:  # the axis moved last, and back
                moved, rows_, cols = _moved_last(cuda, x, [a])
                z = cuda.empty(moved.shape, x.dtype)
                if z.size:
                    cuda.launch(
                        kernel, rows_, rows.row_threads(cols), moved.ptr, z.ptr, rows_, cols
                    )
                back = list(range(x.ndim - 1))
                back.insert(a, x.ndim - 1)
                y = cuda.transpose(z, back)
                return (y,)
            rows_, cols = _rows_of(x.shape, a)
            y = cuda.empty(x.shape, x.dtype)
            if y.size:
                cuda.launch(kernel, rows_, rows.row_threads(cols), x.ptr, y.ptr, rows_, cols)
            return (y,)

        return compute

    return build


def _layernorm(info: NodeInfo) -> Any:
    """The last axis with a bias and Y alone (transformers' case) by the
    one-pass row kernel; any other axis, no bias, the Mean and InvStdDev
    outputs by :func:`ortcore_cuda.ops_norm.layer_normalization`."""
    from .ops_norm import layer_normalization

    cuda = _p(info)
    eps = float(info.attr("epsilon", 1e-5))
    axis = int(info.attr("axis", -1))
    general = layer_normalization(info)

    def compute(
        x: CudaTensor, scale: CudaTensor, bias: CudaTensor | None = None
    ) -> tuple[CudaTensor, ...]:
        rows_, cols = _rows_of(x.shape, x.ndim - 1)
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
            kernel = rows.layernorm_kernel(_suffix(x))
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


def _reduce(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        keep = bool(info.attr("keepdims", 1))
        noop = bool(info.attr("noop_with_empty_axes", 0))

        def compute(x: CudaTensor, axes_in: Any = None) -> tuple[CudaTensor]:
            raw = axes_in if axes_in is not None else info.attr("axes")
            axes = (
                sorted({int(a) % x.ndim for a in np.asarray(raw).reshape(-1)})
                if (raw is not None and np.size(raw) and x.ndim)
                else []
            )
            if not axes and not noop:
                axes = list(range(x.ndim))
            # noop with no axes: one-element rows, so the element-wise part still
            # applies (ReduceSumSquare squares, ReduceLogSum takes the log)
            shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
            if not keep:
                shape = [d for i, d in enumerate(x.shape) if i not in axes]
            y = cuda.empty(shape, x.dtype)
            moved, rows_, cols = _moved_last(cuda, x, axes)
            if y.size:
                kernel = rows.reduce_kernel(op, _suffix(x))
                cuda.launch(kernel, rows_, rows.row_threads(cols), moved.ptr, y.ptr, rows_, cols)
            return (y,)

        return compute

    return build


def _arg(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        keep = bool(info.attr("keepdims", 1))
        last = int(info.attr("select_last_index", 0))
        axis_attr = int(info.attr("axis", 0))

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            axis = axis_attr % x.ndim
            shape = [1 if i == axis else d for i, d in enumerate(x.shape)]
            if not keep:
                shape.pop(axis)
            y = cuda.empty(shape, np.int64)
            moved, rows_, cols = _moved_last(cuda, x, [axis])
            if y.size:
                kernel = rows.arg_kernel(op, _suffix(x))
                cuda.launch(
                    kernel, rows_, rows.row_threads(cols), moved.ptr, y.ptr, rows_, cols, last
                )
            return (y,)

        return compute

    return build


def _matmul(info: NodeInfo) -> Any:
    cuda = _p(info)

    def compute(a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
        return (cuda.matmul(a, b, info),)

    return compute


def _gemm(info: NodeInfo) -> Any:
    cuda = _p(info)
    alpha, beta = float(info.attr("alpha", 1.0)), float(info.attr("beta", 1.0))
    ta, tb = bool(info.attr("transA", 0)), bool(info.attr("transB", 0))

    def compute(a: CudaTensor, b: CudaTensor, c: CudaTensor | None = None) -> tuple[CudaTensor]:
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
        if k != k2:
            raise ValueError(f"{info.describe()}: op(A) is {m}x{k}, op(B) is {k2}x{n}")
        y = cuda.empty((m, n), a.dtype)
        if c is not None and beta != 0.0:
            cuda.copy_broadcast(c, y)  # then y = alpha * A B + beta * y
        cuda.backend.gemm(
            a.dtype,
            ta,
            tb,
            m,
            n,
            k,
            alpha,
            a.ptr,
            0,
            b.ptr,
            0,
            beta if c is not None else 0.0,
            y.ptr,
            0,
            1,
            cuda.stream,
        )
        return (y,)

    return compute


def _transpose(info: NodeInfo) -> Any:
    cuda = _p(info)
    perm_attr = info.attr("perm")

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        perm = list(perm_attr) if perm_attr is not None else list(reversed(range(x.ndim)))
        return (cuda.transpose(x, perm),)

    return compute


_CASTS = {t: suffix for suffix, (_, t) in ew.CAST_TYPES.items()}
CASTABLE = (
    ir.DataType.FLOAT,
    ir.DataType.FLOAT16,
    ir.DataType.DOUBLE,
    ir.DataType.INT64,
    ir.DataType.INT32,
    ir.DataType.INT16,
    ir.DataType.INT8,
    ir.DataType.UINT64,
    ir.DataType.UINT32,
    ir.DataType.UINT16,
    ir.DataType.UINT8,
    ir.DataType.BOOL,
)


def _cast(info: NodeInfo) -> Any:
    """Cast to ``to`` (the output's static type, else the attribute) or,
    CastLike, to the target's type (known when it runs, if not before)."""
    cuda = _p(info)
    known: np.dtype | None
    try:
        known = np.dtype(info.output_dtype(0))
    except TypeError:  # an untyped output (a subgraph's values are not inferred)
        to = info.attr("to")
        known = np.dtype(ir.DataType(int(to)).numpy()) if to is not None else None

    def compute(x: CudaTensor, *like: Any) -> tuple[CudaTensor]:
        to = known if known is not None else np.dtype(like[0].dtype)
        if x.dtype == to:
            return (cuda.copy(x, x.shape),)
        y = cuda.empty(x.shape, to)
        if y.size:
            kernel = ew.cast_kernel(_CASTS[x.dtype], _CASTS[to])
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size)
        return (y,)

    return compute


def _not(info: NodeInfo) -> Any:
    cuda = _p(info)

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(ew.not_kernel(), y.size, x.ptr, y.ptr, y.size)
        return (y,)

    return compute


def _trilu(info: NodeInfo) -> Any:
    cuda = _p(info)
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
        cuda = _p(info)

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


def _spatial(
    info: NodeInfo, x: CudaTensor, kernel: Sequence[int], *, pool: bool = False
) -> dict[str, int]:
    """Output size, strides, pads and dilations of a 1-D or 2-D window op on
    ``x`` (NCW or NCHW), as NCHW: 1-D runs as height 1. A ``pool``'s sizes
    round toward zero (a window wider than the padded input gives one
    output, as onnxruntime's and the CPU provider's) and come with the end
    pads ``eh``, ``ew`` its average counts to (:func:`ops_image.divisor_ends`)."""
    dims = list(x.shape[2:])
    k = list(kernel)
    strides = list(info.attr("strides") or [1] * len(k))
    dilations = list(info.attr("dilations") or [1] * len(k))
    pads = list(info.attr("pads") or [0] * (2 * len(k)))
    auto = info.attr("auto_pad", "NOTSET")
    ceil = bool(info.attr("ceil_mode", 0))
    out = []
    for i, d in enumerate(dims):
        span = (k[i] - 1) * dilations[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-d // strides[i])
            total = max((o - 1) * strides[i] + span - d, 0)
            first = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads[i], pads[i + len(k)] = first, total - first
        elif auto == "VALID":
            pads[i] = pads[i + len(k)] = 0
        padded = d + pads[i] + pads[i + len(k)] - span
        toward_zero = ceil or (pool and padded < 0)
        o = (-(-padded // strides[i]) if toward_zero else padded // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= d + pads[i]:
            o -= 1  # the last window must start inside the input or its left pad
        out.append(o)
    if len(dims) == 1:  # 1-D as 2-D of height 1
        dims, k, out = [1, *dims], [1, *k], [1, *out]
        strides, dilations, pads = [1, *strides], [1, *dilations], [0, pads[0], 0, pads[1]]
    ends: dict[str, int] = {}
    if pool:
        from . import ops_image

        eh, ew = ops_image.divisor_ends(info, pads[2:], k, dilations)
        ends = {"eh": eh, "ew": ew}
    return {
        "h": dims[0],
        "w": dims[1],
        "kh": k[0],
        "kw": k[1],
        "oh": out[0],
        "ow": out[1],
        "sh": strides[0],
        "sw": strides[1],
        "ph": pads[0],
        "pw": pads[1],
        "dh": dilations[0],
        "dw": dilations[1],
        **ends,
    }


_COLS_BYTES = 256 << 20
"""Most bytes of im2col columns a Conv lays out at once (images are batched within it)."""


def _conv(info: NodeInfo) -> Any:
    cuda = _p(info)
    groups = int(info.attr("group", 1))

    def compute(x: CudaTensor, w: CudaTensor, b: CudaTensor | None = None) -> tuple[CudaTensor]:
        from . import ops_image
        from .kernels import image

        n, c = x.shape[0], x.shape[1]
        m = w.shape[0]
        window = list(info.attr("kernel_shape") or w.shape[2:])
        if x.ndim == 5:  # 3-D: the N-D im2col, same column layout
            spatial, args = ops_image.window_args(info, x, window)
            kernel = image.im2col_nd_kernel(_suffix(x))
        else:
            a = _spatial(info, x, window)
            spatial = [a["oh"], a["ow"]] if x.ndim == 4 else [a["ow"]]
            args = nn.CONV_ARGS.pack(c=c, **a)
            kernel = nn.im2col_kernel(_suffix(x))
        y = cuda.empty((n, m, *spatial), x.dtype)
        plane = math.prod(spatial)
        k = (c // groups) * math.prod(window)
        if y.size:
            item = x.dtype.itemsize
            per = groups * k * plane  # one image's columns
            # the 2-D kernel lays out several images' columns at once (within a budget)
            chunk = 1 if x.ndim == 5 else max(1, min(n, _COLS_BYTES // (per * item)))
            cols = cuda.empty((chunk * per,), x.dtype)
            image_size = math.prod(x.shape[1:])
            mg = m // groups
            for first in range(0, n, chunk):
                count = min(chunk, n - first)
                image = x.ptr + first * image_size * item
                cuda.launch_over(kernel, count * per, image, cols.ptr, count * per, args)
                out = y.ptr + first * m * plane * item
                if groups == 1:  # one GEMM for the images: W (stride 0) @ cols[i]
                    cuda.backend.gemm(
                        x.dtype, False, False, m, plane, k, 1.0, w.ptr, 0, cols.ptr,
                        per, 0.0, out, m * plane, count, cuda.stream,
                    )  # fmt: skip
                    continue
                for j in range(count):  # per image, one GEMM for its groups: W[g] @ cols[g]
                    cuda.backend.gemm(
                        x.dtype, False, False, mg, plane, k, 1.0, w.ptr, mg * k,
                        cols.ptr + j * per * item, k * plane, 0.0,
                        out + j * m * plane * item, mg * plane, groups, cuda.stream,
                    )  # fmt: skip
            if b is not None:
                cuda.add_inplace(y, b, (m, *[1] * (y.ndim - 2)))
        return (y,)

    return compute


def _pool(kind: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)
        count_pads = int(info.attr("count_include_pad", 0))

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            if x.ndim == 5:  # 3-D: the N-D window kernel
                from . import ops_image
                from .kernels import image

                kernel_shape = info.attr("kernel_shape")
                spatial, args = ops_image.window_args(info, x, kernel_shape, pool=True)
                y = cuda.empty((*x.shape[:2], *spatial), x.dtype)
                if y.size:
                    kernel = image.pool_nd_kernel(kind, _suffix(x))
                    cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, args, count_pads)
                return (y,)
            a = _spatial(info, x, info.attr("kernel_shape"), pool=True)
            spatial = [a["oh"], a["ow"]] if x.ndim == 4 else [a["ow"]]
            y = cuda.empty((*x.shape[:2], *spatial), x.dtype)
            if y.size:
                args = nn.POOL_ARGS.pack(count_pads=count_pads, **a)
                kernel = nn.pool_kernel(kind, _suffix(x))
                cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, args)
            return (y,)

        return compute

    return build


def _global_pool(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            rows_ = x.shape[0] * x.shape[1]
            cols = int(np.prod(x.shape[2:], dtype=np.int64))
            y = cuda.empty((*x.shape[:2], *[1] * (x.ndim - 2)), x.dtype)
            if y.size:
                kernel = rows.reduce_kernel(op, _suffix(x))
                cuda.launch(kernel, rows_, rows.row_threads(cols), x.ptr, y.ptr, rows_, cols)
            return (y,)

        return compute

    return build


def _batchnorm(info: NodeInfo) -> Any:
    cuda = _p(info)
    eps = float(info.attr("epsilon", 1e-5))

    def compute(
        x: CudaTensor, scale: CudaTensor, bias: CudaTensor, mean: CudaTensor, var: CudaTensor
    ) -> tuple[CudaTensor]:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            channels = x.shape[1] if x.ndim > 1 else 1
            inner = int(np.prod(x.shape[2:], dtype=np.int64))
            cuda.launch_over(
                nn.batchnorm_kernel(_suffix(x)),
                y.size,
                x.ptr,
                scale.ptr,
                bias.ptr,
                mean.ptr,
                var.ptr,
                y.ptr,
                y.size,
                channels,
                inner,
                eps,
            )
        return (y,)

    return compute


def _concat(info: NodeInfo) -> Any:
    cuda = _p(info)
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
    cuda = _p(info)

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
    cuda = _p(info)
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
    cuda = _p(info)

    def compute(x: CudaTensor, shape: Any) -> tuple[CudaTensor]:
        out = tuple(
            np.broadcast_shapes(x.shape, tuple(int(d) for d in np.asarray(shape).reshape(-1)))
        )
        y = cuda.empty(out, x.dtype)
        cuda.copy_broadcast(x, y)
        return (y,)

    return compute


def _pad(info: NodeInfo) -> Any:
    cuda = _p(info)
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
    cuda = _p(info)
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


def _where(info: NodeInfo) -> Any:
    cuda = _p(info)

    def compute(cond: CudaTensor, a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
        out, rank, s = ew.where_args(cond.shape, a.shape, b.shape)
        y = cuda.empty(out, a.dtype)
        if y.size:
            kernel = ew.where_kernel(a.dtype.itemsize, rank)
            cuda.launch_over(kernel, y.size, cond.ptr, a.ptr, b.ptr, y.ptr, y.size, s)
        return (y,)

    return compute


def _compare(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = _p(info)

        def compute(a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
            out, rank, s = ew.broadcast_args(a.shape, b.shape)
            y = cuda.empty(out, np.bool_)
            if y.size:
                kernel = ew.binary_kernel(op, _suffix(a), rank)
                cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
            return (y,)

        return compute

    return build


def _clip(info: NodeInfo) -> Any:
    cuda = _p(info)

    def compute(x: CudaTensor, lo: Any = None, hi: Any = None) -> tuple[CudaTensor]:
        if info.opset < 11:
            low, high = float(info.attr("min", -np.inf)), float(info.attr("max", np.inf))
        else:
            low = float(np.asarray(lo).reshape(-1)[0]) if lo is not None else -np.inf
            high = float(np.asarray(hi).reshape(-1)[0]) if hi is not None else np.inf
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(ew.clip_kernel(_suffix(x)), y.size, x.ptr, y.ptr, y.size, low, high)
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
    cuda = _p(info)
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
    cuda = _p(info)
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
    cuda = _p(info)

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


def _int_clip(info: NodeInfo) -> Any:
    cuda = _p(info)

    def compute(x: CudaTensor, lo: Any = None, hi: Any = None) -> tuple[CudaTensor]:
        limits = np.iinfo(x.dtype)
        bounds = [
            np.asarray(v, x.dtype).reshape(-1)[:1] if v is not None and np.size(v) else None
            for v in (lo, hi)
        ]
        low = bounds[0] if bounds[0] is not None else np.array([limits.min], x.dtype)
        high = bounds[1] if bounds[1] is not None else np.array([limits.max], x.dtype)
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            bits = [int.from_bytes(v.tobytes(), "little") for v in (low, high)]
            kernel = ew.int_clip_kernel(_ISUFFIX[x.dtype])
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, *bits)
        return (y,)

    return compute


def build_registry() -> KernelRegistry:
    """Every kernel of the provider (see the module docstring)."""
    reg = KernelRegistry()
    floats: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS}
    wide: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS64}
    for op, since in UNARY_SINCE.items():
        reg.kernel(op, since=since, types=wide)(_unary(op))
    reg.kernel("Gelu", since=20, types=wide)(_unary("Gelu"))
    for op, since in BINARY_SINCE.items():
        types: dict[str | int, tuple[ir.DataType, ...]] = (
            {"T": FLOATS64, "T1": FLOATS64} if op == "Pow" else wide
        )
        reg.kernel(op, since=since, types=types)(_binary(op))
    int_base = (ir.DataType.INT32, ir.DataType.INT64)
    reg.kernel("Pow", since=12, types={"T": int_base, "T1": (*FLOATS64, *INT_TYPES)})(_pow_mixed)
    reg.kernel("Pow", since=12, types={"T": FLOATS64, "T1": INT_TYPES})(_pow_mixed)
    reg.kernel("Sum", since=8, types=wide)(_binary("Add"))
    reg.kernel("LRN", since=1, types=floats)(_lrn)
    for op, (since, *_rest) in PARAM_SINCE.items():
        reg.kernel(op, since=since, types=wide)(_param_unary(op))
    for op, since, allowed in (
        ("Abs", 6, INT_TYPES),
        ("Neg", 6, SIGNED),
        ("Sign", 9, INT_TYPES),
        ("Relu", 14, SIGNED),
        ("BitwiseNot", 18, INT_TYPES),
    ):
        reg.kernel(op, since=since, types={"T": allowed})(_int_unary(op))
    reg.kernel("BitShift", since=11, types={"T": INT_TYPES})(_int_binary("BitShift"))
    reg.kernel("Mod", since=10, types=wide)(_binary("Mod"))
    ints: dict[str | int, tuple[ir.DataType, ...]] = {"T": INT_TYPES}
    for op, since in (
        ("Add", 7),
        ("Sub", 7),
        ("Mul", 7),
        ("Div", 7),
        ("Max", 12),
        ("Min", 12),
        ("Mod", 10),
        ("Equal", 11),
        ("Less", 9),
        ("Greater", 9),
        ("LessOrEqual", 12),
        ("GreaterOrEqual", 12),
    ):
        reg.kernel(op, since=since, types=ints)(_int_binary(op))
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        reg.kernel(op, since=18, types=ints)(_int_binary(op))
    bools: dict[str | int, tuple[ir.DataType, ...]] = {"T": (ir.DataType.BOOL,)}
    for op in ("And", "Or", "Xor"):
        reg.kernel(op, since=7, types=bools)(_int_binary(op))
    reg.kernel("Equal", since=11, types=bools)(_int_binary("Xor"))
    for op, log in (("Softmax", False), ("LogSoftmax", True)):
        reg.kernel(op, since=1, types=wide)(_softmax(log))
    reg.kernel("LayerNormalization", since=17, types={0: FLOATS})(_layernorm)
    for op in (*rows.REDUCTIONS, "ReduceLogSumExp"):
        axes_input = {"ReduceSum": 13}.get(op, 18)
        reg.kernel(op, since=1, until=axes_input - 1, types=wide)(_reduce(op))
        reg.kernel(op, since=axes_input, types=wide, input_memory={1: "host"})(_reduce(op))
    for op in ("ArgMax", "ArgMin"):
        reg.kernel(op, since=1, types=wide)(_arg(op))
    reg.kernel("MatMul", since=1, types=floats)(_matmul)
    reg.kernel("Gemm", since=6, types=floats)(_gemm)  # 6: C broadcasts (the kernel always may)
    reg.kernel("Transpose", since=1, types={"T": MOVABLE})(_transpose)
    reg.kernel("Cast", since=6, types={0: CASTABLE, "T2": CASTABLE})(_cast)
    reg.kernel("CastLike", since=15, types={0: CASTABLE, 1: CASTABLE})(_cast)
    reg.kernel("Not", since=1, types={"T": (ir.DataType.BOOL,)})(_not)
    reg.kernel("Trilu", since=14, types={"T": MOVABLE}, input_memory={1: "host"})(_trilu)
    reg.kernel("Shape", since=1, types={"T": MOVABLE}, output_memory={0: "host"})(_shape)
    move: dict[str | int, tuple[ir.DataType, ...]] = {"T": MOVABLE}
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
    reg.kernel("Conv", since=1, types=floats)(_conv)
    reg.kernel("MaxPool", since=1, types={"T": FLOATS})(_pool("max"))
    reg.kernel("AveragePool", since=1, types=floats)(_pool("avg"))
    reg.kernel("GlobalAveragePool", since=1, types=floats)(_global_pool("ReduceMean"))
    reg.kernel("GlobalMaxPool", since=1, types=floats)(_global_pool("ReduceMax"))
    reg.kernel("BatchNormalization", since=6, types={0: FLOATS, 1: FLOATS, 3: FLOATS})(_batchnorm)
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
    reg.kernel("Where", since=9, types={"T": MOVABLE})(_where)
    for op, since in (
        ("Equal", 11),
        ("Less", 9),
        ("Greater", 9),
        ("LessOrEqual", 12),
        ("GreaterOrEqual", 12),
    ):
        reg.kernel(op, since=since, types=wide)(_compare(op))
    reg.kernel("Clip", since=6, until=10, types=wide)(_clip)
    reg.kernel("Clip", since=11, types=wide, input_memory={1: "host", 2: "host"})(_clip)
    reg.kernel("Clip", since=12, types={"T": INT_TYPES}, input_memory={1: "host", 2: "host"})(
        _int_clip
    )
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
    for family in _families():
        family.register(reg)
    return reg


def _rank(node: ir.Node, index: int = 0) -> int | None:
    v = node.inputs[index] if index < len(node.inputs) else None
    return len(v.shape) if v is not None and v.shape is not None else None


def _const_ints(node: ir.Node, index: int) -> list[int] | None:
    v = node.inputs[index] if index < len(node.inputs) else None
    if v is None or v.const_value is None:
        return None
    return [int(a) for a in v.const_value.numpy().reshape(-1)]


def _small_int(v: ir.Value | None) -> bool:
    return (
        v is not None
        and v.dtype in (ir.DataType.INT64, ir.DataType.INT32)
        and v.shape is not None
        and len(v.shape) <= 1
    )


def _shape_arithmetic(node: ir.Node) -> bool:
    """Whether ``node`` computes on small integer tensors (shapes, axes,
    indices made from ``Shape``): its data input is one (and it does not
    make float data from it, as the window functions do), or it makes one
    from nothing (Constant, ConstantOfShape, Range)."""
    if node.op_type in ("Constant", "ConstantOfShape", "Range"):
        return _small_int(node.outputs[0])
    if node.op_type == "Shape" or not node.inputs or not _small_int(node.inputs[0]):
        return False
    out = node.outputs[0].dtype if node.outputs else None
    makes_floats = out is not None and out.is_floating_point()
    return not makes_floats or node.op_type in ("Cast", "CastLike")


def decline_reason(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the provider's kernel for ``node`` does not cover it (an attribute
    or a shape it does not handle), or ``None``."""
    op = node.op_type
    for v in (*node.inputs, *node.outputs):
        if v is not None and v.type is not None and not isinstance(v.type, ir.TensorType):
            return f"CUDA: {op} of a {type(v.type).__name__} (device values are tensors)"
    rank = _rank(node)
    if graph.fallback and _shape_arithmetic(node):
        return (
            "CUDA: shape arithmetic (a small integer tensor) is left to "
            f"{graph.fallback[0]}, to stay on the host"
        )
    if op in BROADCASTING:
        ranks = [_rank(node, i) for i in range(len(node.inputs))]
        if max(r or 0 for r in ranks) > ew.MAX_RANK:  # an unknown rank is checked at run time
            return f"CUDA: {op} of rank over {ew.MAX_RANK}"
    if op in ("Softmax", "LogSoftmax", "ArgMax", "ArgMin") and (rank or 0) > ew.MAX_RANK:
        return f"CUDA: {op} of rank over {ew.MAX_RANK}"
    if op.startswith("Reduce") and (rank is None or rank > ew.MAX_RANK):
        return f"CUDA: {op} of rank {rank}"
    if op == "Conv" or op in ("MaxPool", "AveragePool"):
        if rank not in (3, 4, 5):
            return f"CUDA: {op} of rank {rank} (1-D to 3-D only)"
        if op == "MaxPool":
            if len(node.outputs) > 1 and (
                node.outputs[1].uses() or node.outputs[1].is_graph_output()
            ):
                return "CUDA: MaxPool's Indices output"
            order = node.attributes.get("storage_order")
            if order is not None and order.as_int():
                return "CUDA: MaxPool with storage_order"
    if op == "LRN" and (rank or 0) < 3:
        return f"CUDA: LRN of rank {rank}"
    if op in ("GlobalAveragePool", "GlobalMaxPool") and (rank or 0) < 3:
        return f"CUDA: {op} of rank {rank}"
    if op == "BatchNormalization":
        mode = node.attributes.get("training_mode")
        if (mode is not None and mode.as_int()) or len(
            [o for o in node.outputs if o.uses() or o.is_graph_output()]
        ) > 1:
            return "CUDA: BatchNormalization in training mode"
        if rank is None or rank < 2:
            return "CUDA: BatchNormalization of rank under 2"
        spatial = node.attributes.get("spatial")  # opsets 6 to 8
        if spatial is not None and not spatial.as_int():
            return "CUDA: BatchNormalization with spatial=0 (a scale per element)"
    if op == "Pad":
        mode = node.attributes.get("mode")
        if mode is not None and mode.as_string() not in ew.PAD_MODES:
            return f"CUDA: Pad mode {mode.as_string()}"
    if op == "Trilu" and (rank or 0) < 2:
        return f"CUDA: Trilu of rank {rank}"
    if op in ("Concat", "Slice", "Split", "Expand", "Where", "Gather", "Pad"):
        # an unknown rank is checked when the kernel runs
        if rank is not None and (rank > ew.MAX_RANK or (rank == 0 and op != "Expand")):
            return f"CUDA: {op} of rank {rank}"
        if op == "Where" and any((_rank(node, i) or 0) > ew.MAX_RANK for i in range(3)):
            return f"CUDA: Where of rank over {ew.MAX_RANK}"
    if op == "MatMul":
        if rank is None or _rank(node, 1) is None or min(rank, _rank(node, 1) or 0) < 1:
            return "CUDA: MatMul of inputs of unknown rank or of rank 0"
    for family in _families():
        why = family.decline(node, graph)
        if why is not None:
            return why
    return None
