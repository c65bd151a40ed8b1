"""Quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

Scales and zero points are per tensor, per axis or (opset 21+) per block.
Rounding is numpy's ``rint`` (half to even), as ONNX specifies;
QLinearConv and QLinearMatMul requantize their int32 sums in float32 as
onnxruntime does (:func:`._qgemm_ref.requantize`). uint8/int8
products run on the native 8-bit GEMM (:mod:`._qgemm`; convolutions through
:mod:`._qconv`), a constant weight packed once; other types, and what the
native GEMM does not take, accumulate exactly in float64 (exact below
2**53) before the cast to int32, convolutions through a numpy im2col.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np
from ep_sdk import Compute, NodeInfo, to_numpy
from onnx_ir import DataType

from . import registry
from ._common import constant_input, int_list, thread_count, threads_for
from ._convert import convert
from ._qconv import QConv
from ._qgemm import (
    _SIGNED,
    EXACT_K,
    WeightCache,
    int_matmul,
    int_matmul_requantize,
    requantize,
)
from ._qgemm_ref import centered
from ._qgemm_ref import int_matmul as ref_int_matmul
from ._qlinear import dequantize as native_dequantize
from ._qlinear import dynamic_quantize
from ._qlinear import quantize as native_quantize
from ._versions import per_schema_version
from ._window import check_window_attrs

_INT_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(t): (int(ml_dtypes.iinfo(t).min), int(ml_dtypes.iinfo(t).max))
    for t in (
        np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32,
        ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2,
    )
}  # fmt: skip
_FLOAT8 = {
    np.dtype(t)
    for t in (
        ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
    )
}  # fmt: skip

_HALVES = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}


def broadcast_param(
    value: np.ndarray, shape: Sequence[int], axis: int, block_size: int = 0
) -> np.ndarray:
    """Shape a scale or zero point so that it broadcasts against ``shape``.

    A scalar (or one-element tensor) is per tensor, a 1-D tensor is per
    ``axis``, and with ``block_size`` each element covers a block of
    ``block_size`` consecutive elements along ``axis``.
    """
    value = np.asarray(value)
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    if axis < 0:
        axis += len(shape)
    if not block_size:
        if value.ndim != 1 or value.size != shape[axis]:
            raise ValueError(
                f"per-axis scale/zero point of shape {value.shape} does not match "
                f"dim {axis} of input shape {tuple(shape)}"
            )
        dims = [1] * len(shape)
        dims[axis] = value.size
        return value.reshape(dims)
    if block_size < 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    full = np.repeat(value, block_size, axis=axis)
    if full.shape[axis] != shape[axis]:
        full = full.take(np.arange(shape[axis]), axis=axis)
    if full.shape != tuple(shape):
        raise ValueError(
            f"blocked scale/zero point of shape {value.shape} does not match "
            f"input shape {tuple(shape)} with block_size {block_size} on axis {axis}"
        )
    return full


def quantize(x: np.ndarray, dtype: np.dtype, saturate: bool = True) -> np.ndarray:
    """Round (half to even) and saturate ``x`` (already divided by the scale,
    zero point added) into ``dtype``; float8 types saturate only if asked."""
    if dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        return np.clip(np.rint(x), lo, hi).astype(dtype)
    if dtype in _FLOAT8 and saturate:
        top = float(ml_dtypes.finfo(dtype).max)
        return convert(np.clip(x, -top, top), dtype)
    return convert(np.asarray(x), dtype)


def _quant_dtype(info: NodeInfo, zero_point: np.ndarray | None) -> np.dtype:
    if zero_point is not None:
        return zero_point.dtype
    attr = int(info.attrs.get("output_dtype", 0) or 0)
    if attr:
        return to_numpy(DataType(attr))
    out = info.output_types[0] if info.output_types else None
    return to_numpy(out) if out is not None else np.dtype(np.uint8)


# Opset 28 only widens the quantized types (here and in DequantizeLinear); the
# kernels constrain no type, so their 25+ registrations cover it.
@per_schema_version("QuantizeLinear", newest=25)
def quantize_linear(info: NodeInfo) -> Compute:
    """y = saturate(round(x / scale) + zero_point): per tensor, axis or block."""
    axis = int(info.attrs.get("axis", 1))
    block = int(info.attrs.get("block_size", 0) or 0)
    saturate = bool(info.attrs.get("saturate", 1))
    precision = int(info.attrs.get("precision", 0) or 0)
    work = to_numpy(DataType(precision)) if precision else None

    threads = thread_count(info)

    def compute(
        x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        dtype = _quant_dtype(info, zero_point)
        s = broadcast_param(scale, x.shape, axis, block)
        if not block and (work is None or work == np.float32):
            if zero_point is not None:
                broadcast_param(zero_point, x.shape, axis, block)  # its shape checked
            y = native_quantize(x, scale, zero_point, dtype, axis, threads)
            if y is not None:
                return (y,)
        if work is not None:
            y = x.astype(work) / s.astype(work)
        elif x.dtype in _INT_RANGES:
            y = x.astype(np.float64) / s.astype(np.float64)
        elif {x.dtype, s.dtype} == _HALVES:
            # numpy promotes this pair to float32 only from ml_dtypes 0.7 (refused before)
            y = x.astype(np.float32) / s.astype(np.float32)
        else:
            y = x / s
        if dtype in _FLOAT8:
            return (quantize(y, dtype, saturate),)
        if zero_point is not None:
            zp = broadcast_param(zero_point, x.shape, axis, block)
            if dtype in _INT_RANGES:
                return (quantize(np.rint(y).astype(np.float64) + zp.astype(np.float64), dtype),)
            y = y + zp.astype(np.float32)
        return (quantize(y, dtype, saturate),)

    return compute


@per_schema_version("DequantizeLinear", newest=25)
def dequantize_linear(info: NodeInfo) -> Compute:
    """y = (x - zero_point) * scale, in float32, cast to the scale's type
    (or ``output_dtype``); float8/float4 inputs ignore the zero point."""
    axis = int(info.attrs.get("axis", 1))
    block = int(info.attrs.get("block_size", 0) or 0)
    out_attr = int(info.attrs.get("output_dtype", 0) or 0)
    out_dtype = to_numpy(DataType(out_attr)) if out_attr else None

    threads = thread_count(info)

    def compute(
        x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        if not block and (out_dtype is None or out_dtype == np.float32):
            broadcast_param(scale, x.shape, axis, block)  # its shape checked
            if zero_point is not None:
                broadcast_param(zero_point, x.shape, axis, block)
            y = native_dequantize(x, scale, zero_point, axis, threads)
            if y is not None:
                return (y,)
        wide = np.float64 if x.dtype == np.int32 else np.float32
        dx = x.astype(wide)
        if zero_point is not None and x.dtype in _INT_RANGES:
            dx = dx - broadcast_param(zero_point, x.shape, axis, block).astype(wide)
        s = broadcast_param(scale, x.shape, axis, block).astype(np.float32)
        dtype = out_dtype if out_dtype is not None else scale.dtype
        return (convert(np.multiply(dx, s), dtype),)

    return compute


@registry.kernel("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(info: NodeInfo) -> Compute:
    """Quantize float32 to uint8 with a scale and zero point computed from
    the input's range (extended to include 0)."""

    threads = thread_count(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        y, scale, zp = dynamic_quantize(x, threads=threads)
        return y, np.array(scale, dtype=x.dtype), np.array(zp, dtype=np.uint8)

    return compute


def _weight_cache(info: NodeInfo, b_index: int, zero_index: int) -> WeightCache | None:
    """A cache of the packed B when it (and its zero point, if any) are
    constant initializers."""
    if constant_input(info, b_index) and (
        zero_index >= len(info.node.inputs)
        or info.node.inputs[zero_index] is None
        or constant_input(info, zero_index)
    ):
        return WeightCache(thread_count(info))
    return None


def _product_threads(a: np.ndarray, b: np.ndarray, threads: int) -> int:
    """Threads worth using for ``a @ b``."""
    m = a.size // max(1, a.shape[-1])
    return threads_for(m * b.size, threads)


@registry.kernel("MatMulInteger", since=10)
def matmul_integer(info: NodeInfo) -> Compute:
    """Integer matmul with zero points (A's per row, B's per column) -> int32."""
    cache = _weight_cache(info, 1, 3)
    threads = thread_count(info)

    def compute(
        a: np.ndarray,
        b: np.ndarray,
        a_zero_point: np.ndarray | None = None,
        b_zero_point: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        if a.dtype in _SIGNED and b.dtype in _SIGNED:
            packed = cache.get(b, b_zero_point) if cache is not None else None
            nt = _product_threads(a, b, threads)
            return (int_matmul(a, a_zero_point, b, b_zero_point, threads=nt, packed=packed),)
        return (ref_int_matmul(a, a_zero_point, b, b_zero_point),)

    return compute


@per_schema_version("QLinearMatMul")
def qlinear_matmul(info: NodeInfo) -> Compute:
    """Quantized matmul: requantize (a - azp) @ (b - bzp) by a_scale * b_scale / y_scale."""
    cache = _weight_cache(info, 3, 5)
    threads = thread_count(info)

    def compute(
        a: np.ndarray,
        a_scale: np.ndarray,
        a_zero_point: np.ndarray | None,
        b: np.ndarray,
        b_scale: np.ndarray,
        b_zero_point: np.ndarray | None,
        y_scale: np.ndarray,
        y_zero_point: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        a_s = np.asarray(a_scale)
        if a_s.ndim == 1 and a_s.size > 1:
            a_s = a_s.reshape(-1, 1)
        # in float32 arithmetic, (a * b) / y, as onnxruntime computes it
        mult = (
            a_s.astype(np.float32)
            * np.asarray(b_scale, np.float32)
            / np.asarray(y_scale, np.float32)
        )
        dtype = y_zero_point.dtype if y_zero_point is not None else a.dtype
        n = b.shape[-1] if b.ndim > 1 else 1
        if (
            a.dtype in _SIGNED
            and b.dtype in _SIGNED
            and dtype in _SIGNED
            and a.shape[-1] <= EXACT_K
            and mult.size in (1, n)
            and (mult.size == 1 or mult.shape[-1] == n)
            and (y_zero_point is None or y_zero_point.size == 1)
        ):
            packed = cache.get(b, b_zero_point) if cache is not None else None
            yz = None if y_zero_point is None else y_zero_point.reshape(())
            return (
                int_matmul_requantize(
                    a, a_zero_point, b, b_zero_point, mult.reshape(-1), yz, dtype,
                    threads=_product_threads(a, b, threads), packed=packed,
                ),
            )  # fmt: skip
        acc = np.matmul(centered(a, a_zero_point, -2), centered(b, b_zero_point, -1))
        yzp = y_zero_point
        if yzp is not None and yzp.ndim == 1 and yzp.size > 1:
            yzp = yzp.reshape(-1, 1)  # per row, as a_scale
        return (_requantize_any(acc, mult, yzp, dtype),)

    return compute


def _requantize_any(
    acc: np.ndarray, mult: np.ndarray, y_zero: np.ndarray | None, dtype: np.dtype
) -> np.ndarray:
    """The exact sums ``acc`` requantized into ``dtype``: uint8/int8 in
    float32 as onnxruntime does (:func:`requantize`), float8 types (which
    onnxruntime's CPU kernels do not take) from the float64 product."""
    if dtype in _SIGNED:
        return requantize(acc, mult, y_zero, dtype)
    y = acc * mult.astype(np.float64)
    if y_zero is not None:
        y = y + y_zero.astype(np.float64)
    return quantize(y, dtype)


# -- integer convolution ---------------------------------------------------


def _conv_pads(
    info: NodeInfo, spatial: Sequence[int], kernel: Sequence[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Return strides, dilations, pads begin and pads end for one input shape."""
    nd = len(spatial)
    strides = int_list(info.attrs.get("strides")) or [1] * nd
    dilations = int_list(info.attrs.get("dilations")) or [1] * nd
    pads = int_list(info.attrs.get("pads")) or [0] * (2 * nd)
    auto_pad = info.attrs.get("auto_pad", "NOTSET") or "NOTSET"
    begin, end = pads[:nd], pads[nd:]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small = total // 2
            big = total - small
            begin.append(small if auto_pad == "SAME_UPPER" else big)
            end.append(big if auto_pad == "SAME_UPPER" else small)
    elif auto_pad == "VALID":
        begin, end = [0] * nd, [0] * nd
    return strides, dilations, begin, end


def conv_nd(x: np.ndarray, w: np.ndarray, group: int, info: NodeInfo) -> np.ndarray:
    """Convolution (no bias) of float64 ``x`` (N, C, *S) with ``w`` (M, C/group, *K)
    by im2col over all spatial dims at once; attributes come from ``info``."""
    n, c = x.shape[:2]
    m = w.shape[0]
    kernel = list(w.shape[2:])
    nd = len(kernel)
    strides, dil, begin, end = _conv_pads(info, x.shape[2:], kernel)
    xp = np.pad(x, [(0, 0), (0, 0), *zip(begin, end, strict=True)])
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    axes = tuple(range(2, 2 + nd))
    win = np.lib.stride_tricks.sliding_window_view(xp, span, axis=axes)
    win = win[(slice(None), slice(None), *(slice(None, None, s) for s in strides),
               *(slice(None, None, d) for d in dil))]  # fmt: skip
    out_sp = win.shape[2 : 2 + nd]
    p = math.prod(out_sp)
    ksize = math.prod(kernel)
    cg, mg = c // group, m // group
    # (N, C, *out, *K) -> (N, group, cg*K, P)
    cols = np.moveaxis(win.reshape(n, c, p, ksize), 2, 3).reshape(n, group, cg * ksize, p)
    w2 = w.reshape(group, mg, cg * ksize)
    y = np.matmul(w2[None], cols)
    return y.reshape(n, m, *out_sp)


def _native_conv(info: NodeInfo, group: int, w_index: int, zero_index: int) -> QConv:
    """The node's native convolution, its packed weights kept when they and
    their zero point are constant initializers."""
    constant = constant_input(info, w_index) and (
        zero_index >= len(info.node.inputs)
        or info.node.inputs[zero_index] is None
        or constant_input(info, zero_index)
    )
    return QConv(group, lambda sp, k: _conv_pads(info, sp, k), constant)


def _conv_threads(x: np.ndarray, w: np.ndarray, threads: int) -> int:
    """Threads worth using for the convolution of ``x`` by ``w``."""
    return threads_for(x.size // max(1, x.shape[1]) * w.size, threads)


@registry.kernel("ConvInteger", since=10)
def conv_integer(info: NodeInfo) -> Compute:
    """Integer convolution with zero points (the weight's per output channel) -> int32."""
    check_window_attrs(info.attrs)
    group = int(info.attrs.get("group", 1))
    native = _native_conv(info, group, 1, 3)
    threads = thread_count(info)

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        x_zero_point: np.ndarray | None = None,
        w_zero_point: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        y = native.run(
            x, x_zero_point, w, w_zero_point, np.dtype(np.int32), _conv_threads(x, w, threads)
        )
        if y is not None:
            return (y,)
        y = conv_nd(centered(x, x_zero_point, 1), centered(w, w_zero_point, 0), group, info)
        return (y.astype(np.int64).astype(np.int32),)

    return compute


@registry.kernel("QLinearConv", since=10)
def qlinear_conv(info: NodeInfo) -> Compute:
    """Quantized convolution with int32 bias, requantized to y's type."""
    check_window_attrs(info.attrs)
    group = int(info.attrs.get("group", 1))
    native = _native_conv(info, group, 3, 5)
    threads = thread_count(info)

    def compute(
        x: np.ndarray,
        x_scale: np.ndarray,
        x_zero_point: np.ndarray | None,
        w: np.ndarray,
        w_scale: np.ndarray,
        w_zero_point: np.ndarray | None,
        y_scale: np.ndarray,
        y_zero_point: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        dtype = y_zero_point.dtype if y_zero_point is not None else x.dtype
        ws = np.asarray(w_scale).reshape(-1)
        # in float32 arithmetic, (x * w) / y, as onnxruntime computes it
        mult = (
            np.asarray(x_scale, np.float32)
            * ws.astype(np.float32)
            / np.asarray(y_scale, np.float32)
        )
        if dtype in _SIGNED and (y_zero_point is None or y_zero_point.size == 1):
            yz = 0 if y_zero_point is None else int(y_zero_point.reshape(()))
            y = native.run(
                x, x_zero_point, w, w_zero_point, dtype, _conv_threads(x, w, threads),
                mult=mult, bias=bias, y_zero=yz,
            )  # fmt: skip
            if y is not None:
                return (y,)
        acc = conv_nd(centered(x, x_zero_point, 1), centered(w, w_zero_point, 0), group, info)
        shape = (1, -1) + (1,) * (acc.ndim - 2)
        if bias is not None:
            acc = acc + bias.astype(np.float64).reshape(shape)
        m = mult.reshape(shape) if mult.size > 1 else mult.reshape(())
        return (_requantize_any(acc, m, y_zero_point, dtype),)

    return compute
