"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul,
MatMulInteger, ConvInteger, QLinearConv.

Kernels: :mod:`ortcore_cuda.kernels.quant`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

* QuantizeLinear and DequantizeLinear (every opset): per-tensor, per-axis and
  blocked scales and zero points, read on the device; inputs and scales of
  float32, float16 and bfloat16 (DequantizeLinear: float8e8m0 scales too);
  quantized types uint8, int8, uint16, int16, uint4, int4, uint2, int2, the
  four float8 types and float4e2m1 (DequantizeLinear: int32 too);
  ``saturate``, ``output_dtype`` and ``precision`` (float32, float16,
  bfloat16).
* DynamicQuantizeLinear: one block reduces the range, then a grid quantizes.
* QLinearMatMul and MatMulInteger (uint8 and int8; batch dims broadcast):
  int32 sums of exact integer products, one thread an output element;
  QLinearMatMul requantizes with ``a_scale * b_scale / y_scale`` computed on
  the host in the scales' own type, as onnx's reference does. Scales and zero
  points are read on the host: per tensor, ``a``'s zero point per row too,
  ``b``'s scale and zero point per column too.
* ConvInteger and QLinearConv (1-D and 2-D, groups, every padding mode):
  one thread an output element over its window; weight scales and zero points
  per output channel or per tensor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import cast as kc
from .kernels import nn
from .kernels import quant as kq
from .ops_common import device_of
from .ops_window import window_2d

if TYPE_CHECKING:
    from .device import CudaDevice
    from .tensor import CudaTensor

__all__ = ["OPS", "decline", "register"]

OPS = (
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearMatMul",
    "MatMulInteger",
    "ConvInteger",
    "QLinearConv",
)
"""The ops of this family."""

_D = ir.DataType
_FLOATS = (_D.FLOAT, _D.FLOAT16, _D.BFLOAT16)
_SCALES = (*_FLOATS, _D.FLOAT8E8M0)
_Q_OUT = (
    _D.UINT8,
    _D.INT8,
    _D.UINT16,
    _D.INT16,
    _D.UINT4,
    _D.INT4,
    _D.UINT2,
    _D.INT2,
    _D.FLOAT8E4M3FN,
    _D.FLOAT8E4M3FNUZ,
    _D.FLOAT8E5M2,
    _D.FLOAT8E5M2FNUZ,
    _D.FLOAT4E2M1,
)
_Q_IN = (*_Q_OUT, _D.INT32)
_BYTES = (_D.UINT8, _D.INT8)

_SUFFIX: dict[np.dtype, str] = {d: s for s, (_, d) in kc.cast_suffixes().items() if s in kq.QTYPES}
_CODE: dict[np.dtype, int] = {
    np.dtype(np.float32): kq.FLOAT_CODES["f32"],
    np.dtype(np.float16): kq.FLOAT_CODES["f16"],
    _D.BFLOAT16.numpy(): kq.FLOAT_CODES["bf16"],
    _D.FLOAT8E8M0.numpy(): kq.FLOAT_CODES["e8m0"],
}
_PRECISION = {int(_D.FLOAT): 0, int(_D.FLOAT16): 1, int(_D.BFLOAT16): 2}
"""QuantizeLinear's ``precision`` attribute -> the kernels' code."""


def _promoted(a: np.dtype, b: np.dtype) -> int:
    """numpy's type of ``a / b`` (float32, float16, bfloat16) as a code."""
    ca, cb = _CODE[a], _CODE[b]
    return ca if ca == cb else kq.FLOAT_CODES["f32"]


def _quantize(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis = int(info.attr("axis", 1))
    block = int(info.attr("block_size", 0) or 0)
    sat = int(bool(info.attr("saturate", 1)))
    precision = int(info.attr("precision", 0) or 0)
    out = np.dtype(info.output_dtype(0))

    def compute(
        x: CudaTensor, scale: CudaTensor, zp: CudaTensor | None = None
    ) -> tuple[CudaTensor]:
        ax = axis + x.ndim if axis < 0 else axis
        args = kq.qaxis_args(x.shape, scale.shape, ax, block)
        prec = _PRECISION[precision] if precision else _promoted(x.dtype, scale.dtype)
        y = cuda.empty(x.shape, out)
        if y.size:
            kernel = kq.quantize_kernel(_SUFFIX[out])
            zptr = zp.ptr if zp is not None and zp.size else 0
            cuda.launch_over(
                kernel,
                y.size,
                x.ptr,
                _CODE[x.dtype],
                scale.ptr,
                _CODE[scale.dtype],
                zptr,
                int(bool(zptr)),
                y.ptr,
                y.size,
                args,
                prec,
                sat,
            )
        return (y,)

    return compute


def _dequantize(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis = int(info.attr("axis", 1))
    block = int(info.attr("block_size", 0) or 0)
    out = np.dtype(info.output_dtype(0))

    def compute(
        x: CudaTensor, scale: CudaTensor, zp: CudaTensor | None = None
    ) -> tuple[CudaTensor]:
        ax = axis + x.ndim if axis < 0 else axis
        args = kq.qaxis_args(x.shape, scale.shape, ax, block)
        y = cuda.empty(x.shape, out)
        if y.size:
            kernel = kq.dequantize_kernel(_SUFFIX[x.dtype])
            zptr = zp.ptr if zp is not None and zp.size else 0
            cuda.launch_over(
                kernel,
                y.size,
                x.ptr,
                scale.ptr,
                _CODE[scale.dtype],
                zptr,
                int(bool(zptr)),
                y.ptr,
                _CODE[out],
                y.size,
                args,
            )
        return (y,)

    return compute


def _dynamic_quantize(info: NodeInfo) -> Any:
    cuda = device_of(info)
    threads = 64 if cuda.emulated else kq.DYNQUANT_THREADS

    def compute(x: CudaTensor) -> tuple[CudaTensor, CudaTensor, CudaTensor]:
        y = cuda.empty(x.shape, np.uint8)
        scale = cuda.empty((), np.float32)
        zp = cuda.empty((), np.uint8)
        cuda.launch(kq.dynquant_stats_kernel(), 1, threads, x.ptr, x.size, scale.ptr, zp.ptr)
        if y.size:
            kernel = kq.dynquant_apply_kernel()
            cuda.launch_over(kernel, y.size, x.ptr, scale.ptr, zp.ptr, y.ptr, y.size)
        return (y, scale, zp)

    return compute


def _host(v: Any) -> np.ndarray | None:
    return None if v is None else np.asarray(v)


def _per(v: np.ndarray | None, n: int, what: str) -> tuple[np.ndarray, int]:
    """A zero point or multiplier of one element or ``n``: the values as a
    1-D array and the stride (0 or 1) the kernels index it with."""
    if v is None:
        return np.zeros(1), 0
    flat = v.reshape(-1)
    if flat.size == 1:
        return flat, 0
    if flat.size == n:
        return flat, 1
    raise ValueError(f"{what} of {flat.size} elements (expected 1 or {n})")


def _ints(cuda: CudaDevice, v: np.ndarray) -> CudaTensor:
    return cuda.from_host(np.ascontiguousarray(v, dtype=np.int32))


def _product(
    cuda: CudaDevice,
    a: CudaTensor,
    b: CudaTensor,
    azp: np.ndarray | None,
    bzp: np.ndarray | None,
    mult: np.ndarray | None,
    yzp: int,
    out: np.dtype,
) -> CudaTensor:
    """The integer product of ``a`` and ``b`` (numpy's ``matmul`` shapes):
    int32 when ``mult`` is ``None``, else requantized to ``out``."""
    ash = (1, *a.shape) if a.ndim == 1 else tuple(a.shape)
    bsh = (*b.shape, 1) if b.ndim == 1 else tuple(b.shape)
    (m, k), (k2, n) = ash[-2:], bsh[-2:]
    if k != k2:
        raise ValueError(f"integer MatMul of {a.shape} and {b.shape}: inner dims {k} and {k2}")
    ba, bb = ash[:-2], bsh[:-2]
    batch = tuple(np.broadcast_shapes(ba, bb))
    shape = [*batch, m, n]
    if a.ndim == 1:
        shape.pop(-2)
    if b.ndim == 1:
        shape.pop(-1)
    y = cuda.empty(shape, out)
    if not y.size:
        return y
    ia = np.broadcast_to(np.arange(math.prod(ba)).reshape(ba), batch).reshape(-1)
    ib = np.broadcast_to(np.arange(math.prod(bb)).reshape(bb), batch).reshape(-1)
    offs = cuda.from_host(np.stack([ia * m * k, ib * k * n], axis=1).astype(np.int64))
    za, azs = _per(azp, m, "a's zero point")
    zb, bzs = _per(bzp, n, "b's zero point")
    mv, ms = _per(mult, n, "the scales' product")
    za_d, zb_d = _ints(cuda, za), _ints(cuda, zb)
    mult_d = cuda.from_host(np.ascontiguousarray(mv, dtype=np.float64))
    suffix = "i32" if mult is None else _SUFFIX[out]
    kernel = kq.qgemm_kernel(_SUFFIX[a.dtype], _SUFFIX[b.dtype], suffix)
    cuda.launch_over(
        kernel,
        y.size,
        a.ptr,
        b.ptr,
        offs.ptr,
        m,
        n,
        k,
        za_d.ptr,
        azs,
        zb_d.ptr,
        bzs,
        mult_d.ptr,
        ms,
        yzp,
        y.ptr,
        y.size,
    )
    return y


def _one(v: np.ndarray | None, what: str) -> int:
    if v is None:
        return 0
    if v.size != 1:
        raise ValueError(f"{what} must be per tensor (has {v.size} elements)")
    return int(v.reshape(-1)[0])


def _multiplier(*scales: np.ndarray | None) -> np.ndarray:
    """``s0 * s1 / s2`` in numpy, in the scales' own type (as onnx's reference)."""
    s0, s1, s2 = (np.asarray(s) for s in scales)
    return np.asarray(s0 * s1 / s2)


def _matmul_integer(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(
        a: CudaTensor, b: CudaTensor, azp: Any = None, bzp: Any = None
    ) -> tuple[CudaTensor]:
        y = _product(cuda, a, b, _host(azp), _host(bzp), None, 0, np.dtype(np.int32))
        return (y,)

    return compute


def _qlinear_matmul(info: NodeInfo) -> Any:
    cuda = device_of(info)
    out = np.dtype(info.output_dtype(0))

    def compute(
        a: CudaTensor,
        a_scale: Any,
        a_zp: Any,
        b: CudaTensor,
        b_scale: Any,
        b_zp: Any,
        y_scale: Any,
        y_zp: Any = None,
    ) -> tuple[CudaTensor]:
        sa, sy = _host(a_scale), _host(y_scale)
        if sa is None or sa.size != 1 or sy is None or sy.size != 1:
            raise ValueError(f"{info.describe()}: a_scale and y_scale must be per tensor")
        mult = _multiplier(sa, _host(b_scale), sy)
        yzp = _one(_host(y_zp), "y_zero_point")
        y = _product(cuda, a, b, _host(a_zp), _host(b_zp), mult, yzp, out)
        return (y,)

    return compute


def _conv_product(
    info: NodeInfo,
    x: CudaTensor,
    w: CudaTensor,
    xzp: np.ndarray | None,
    wzp: np.ndarray | None,
    bias: CudaTensor | None,
    mult: np.ndarray | None,
    yzp: int,
    out: np.dtype,
) -> CudaTensor:
    cuda = device_of(info)
    groups = int(info.attr("group", 1))
    window = list(info.attr("kernel_shape") or w.shape[2:])
    a = window_2d(info, x, window)
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    spatial = [a["oh"], a["ow"]] if x.ndim == 4 else [a["ow"]]
    y = cuda.empty((n, m, *spatial), out)
    if not y.size:
        return y
    if c % groups or m % groups or w.shape[1] != c // groups:
        raise ValueError(f"{info.describe()}: {c} channels, {m} filters, group {groups}")
    zw, wzs = _per(wzp, m, "w's zero point")
    mv, ms = _per(mult, m, "the scales' product")
    zw_d = _ints(cuda, zw)
    mult_d = cuda.from_host(np.ascontiguousarray(mv, dtype=np.float64))
    suffix = "i32" if mult is None else _SUFFIX[out]
    kernel = kq.qconv_kernel(_SUFFIX[x.dtype], _SUFFIX[w.dtype], suffix)
    cuda.launch_over(
        kernel,
        y.size,
        x.ptr,
        w.ptr,
        nn.CONV_ARGS.pack(c=c, **a),
        m,
        groups,
        _one(xzp, "x_zero_point"),
        zw_d.ptr,
        wzs,
        bias.ptr if bias is not None else 0,
        int(bias is not None),
        mult_d.ptr,
        ms,
        yzp,
        y.ptr,
        y.size,
    )
    return y


def _conv_integer(info: NodeInfo) -> Any:
    def compute(
        x: CudaTensor, w: CudaTensor, xzp: Any = None, wzp: Any = None
    ) -> tuple[CudaTensor]:
        y = _conv_product(info, x, w, _host(xzp), _host(wzp), None, None, 0, np.dtype(np.int32))
        return (y,)

    return compute


def _qlinear_conv(info: NodeInfo) -> Any:
    out = np.dtype(info.output_dtype(0))

    def compute(
        x: CudaTensor,
        x_scale: Any,
        x_zp: Any,
        w: CudaTensor,
        w_scale: Any,
        w_zp: Any,
        y_scale: Any,
        y_zp: Any = None,
        bias: CudaTensor | None = None,
    ) -> tuple[CudaTensor]:
        sx, sy = _host(x_scale), _host(y_scale)
        if sx is None or sx.size != 1 or sy is None or sy.size != 1:
            raise ValueError(f"{info.describe()}: x_scale and y_scale must be per tensor")
        mult = _multiplier(sx, _host(w_scale), sy)
        yzp = _one(_host(y_zp), "y_zero_point")
        y = _conv_product(info, x, w, _host(x_zp), _host(w_zp), bias, mult, yzp, out)
        return (y,)

    return compute


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    reg.kernel("QuantizeLinear", since=10, types={0: _FLOATS, 1: _FLOATS})(_quantize)
    reg.kernel("DequantizeLinear", since=10, types={0: _Q_IN, 1: _SCALES})(_dequantize)
    reg.kernel("DynamicQuantizeLinear", since=11, types={0: (_D.FLOAT,)})(_dynamic_quantize)
    host = {i: "host" for i in (1, 2, 4, 5, 6, 7)}
    reg.kernel(
        "QLinearMatMul", since=10, types={0: _BYTES, 1: _FLOATS, 3: _BYTES}, input_memory=host
    )(_qlinear_matmul)
    reg.kernel(
        "MatMulInteger",
        since=10,
        types={0: _BYTES, 1: _BYTES},
        input_memory={2: "host", 3: "host"},
    )(_matmul_integer)
    reg.kernel(
        "ConvInteger", since=10, types={0: _BYTES, 1: _BYTES}, input_memory={2: "host", 3: "host"}
    )(_conv_integer)
    reg.kernel(
        "QLinearConv", since=10, types={0: _BYTES, 1: _FLOATS, 3: _BYTES}, input_memory=host
    )(_qlinear_conv)


def _dtype(v: ir.Value | None) -> ir.DataType | None:
    return v.dtype if v is not None else None


def _input(node: ir.Node, i: int) -> ir.Value | None:
    return node.inputs[i] if i < len(node.inputs) else None


def _size(v: ir.Value | None) -> int | None:
    """The number of elements of ``v`` if its shape is static."""
    if v is None or v.shape is None:
        return None
    dims = [d for d in v.shape if isinstance(d, int)]
    return math.prod(dims) if len(dims) == len(v.shape) else None


def _per_tensor(node: ir.Node, indices: Sequence[int]) -> str | None:
    for i in indices:
        size = _size(_input(node, i))
        if size is not None and size != 1:
            name = node.inputs[i].name if node.inputs[i] is not None else str(i)  # type: ignore[union-attr]
            return f"CUDA: {node.op_type} with a {name!r} of {size} elements (per tensor only)"
    return None


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``: quantized
    types and precisions the kernels lack, convolutions other than 1-D and
    2-D, scales that are not per tensor where the kernels need them so."""
    op = node.op_type
    if op not in OPS or node.domain not in ("", "ai.onnx"):
        return None
    out = _dtype(node.outputs[0] if node.outputs else None)
    if out is None:
        return f"CUDA: {op} with an output type unknown before the run"
    if op == "QuantizeLinear":
        if out not in _Q_OUT:
            return f"CUDA: QuantizeLinear to {out.name}"
        attr = node.attributes.get("precision")
        if attr is not None and attr.as_int() and attr.as_int() not in _PRECISION:
            return f"CUDA: QuantizeLinear in precision {_D(attr.as_int()).name}"
    if op == "DequantizeLinear":
        if out not in _FLOATS:
            return f"CUDA: DequantizeLinear to {out.name}"
    if op == "QLinearMatMul":
        return _per_tensor(node, (1, 6, 7))
    if op in ("ConvInteger", "QLinearConv"):
        v = _input(node, 0)
        rank = len(v.shape) if v is not None and v.shape is not None else None
        if rank not in (3, 4):
            return f"CUDA: {op} of rank {rank} (1-D and 2-D only)"
        if op == "ConvInteger":
            return _per_tensor(node, (2,))
        return _per_tensor(node, (1, 2, 6, 7))
    return None
