"""Neural-network ops: MatMul and Gemm (cuBLAS), Conv (im2col and GEMMs), the
pools, BatchNormalization (inference) and LRN.

Kernels: :mod:`ortcore_cuda.kernels.nn` (1-D and 2-D windows) and
:mod:`ortcore_cuda.kernels.image` (3-D). :func:`register` adds this family's
kernels to the provider's registry; :func:`decline` says why a node of this
family is not covered (or ``None``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import image as im
from .kernels import nn, rows
from .ops_common import FLOATS, device_of, input_rank, suffix
from .ops_window import window_2d, window_args
from .tensor import CudaTensor

__all__ = ["COLS_BYTES", "decline", "register"]


def _lrn(info: NodeInfo) -> Any:
    cuda = device_of(info)
    size = int(info.attr("size"))
    alpha, beta = float(info.attr("alpha", 1e-4)), float(info.attr("beta", 0.75))
    bias = float(info.attr("bias", 1.0))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            inner = int(np.prod(x.shape[2:], dtype=np.int64))
            cuda.launch_over(
                nn.lrn_kernel(suffix(x)),
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


def _matmul(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
        return (cuda.matmul(a, b, info),)

    return compute


def _gemm(info: NodeInfo) -> Any:
    cuda = device_of(info)
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


COLS_BYTES = 256 << 20
"""Most bytes of im2col columns a Conv lays out at once (images are batched within it)."""


def _conv(info: NodeInfo) -> Any:
    cuda = device_of(info)
    groups = int(info.attr("group", 1))

    def compute(x: CudaTensor, w: CudaTensor, b: CudaTensor | None = None) -> tuple[CudaTensor]:
        n, c = x.shape[0], x.shape[1]
        m = w.shape[0]
        window = list(info.attr("kernel_shape") or w.shape[2:])
        if x.ndim == 5:  # 3-D: the N-D im2col, same column layout
            spatial, args = window_args(info, x, window)
            kernel = im.im2col_nd_kernel(suffix(x))
        else:
            a = window_2d(info, x, window)
            spatial = [a["oh"], a["ow"]] if x.ndim == 4 else [a["ow"]]
            args = nn.CONV_ARGS.pack(c=c, **a)
            kernel = nn.im2col_kernel(suffix(x))
        y = cuda.empty((n, m, *spatial), x.dtype)
        plane = math.prod(spatial)
        k = (c // groups) * math.prod(window)
        if y.size:
            item = x.dtype.itemsize
            per = groups * k * plane  # one image's columns
            # the 2-D kernel lays out several images' columns at once (within a budget)
            chunk = 1 if x.ndim == 5 else max(1, min(n, COLS_BYTES // (per * item)))
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
        cuda = device_of(info)
        count_pads = int(info.attr("count_include_pad", 0))

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            if x.ndim == 5:  # 3-D: the N-D window kernel
                kernel_shape = info.attr("kernel_shape")
                spatial, args = window_args(info, x, kernel_shape, pool=True)
                y = cuda.empty((*x.shape[:2], *spatial), x.dtype)
                if y.size:
                    kernel = im.pool_nd_kernel(kind, suffix(x))
                    cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, args, count_pads)
                return (y,)
            a = window_2d(info, x, info.attr("kernel_shape"), pool=True)
            spatial = [a["oh"], a["ow"]] if x.ndim == 4 else [a["ow"]]
            y = cuda.empty((*x.shape[:2], *spatial), x.dtype)
            if y.size:
                args = nn.POOL_ARGS.pack(count_pads=count_pads, **a)
                kernel = nn.pool_kernel(kind, suffix(x))
                cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, args)
            return (y,)

        return compute

    return build


def _global_pool(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            rows_ = x.shape[0] * x.shape[1]
            cols = int(np.prod(x.shape[2:], dtype=np.int64))
            y = cuda.empty((*x.shape[:2], *[1] * (x.ndim - 2)), x.dtype)
            if y.size:
                kernel = rows.reduce_kernel(op, suffix(x))
                cuda.launch(kernel, rows_, rows.row_threads(cols), x.ptr, y.ptr, rows_, cols)
            return (y,)

        return compute

    return build


def _batchnorm(info: NodeInfo) -> Any:
    cuda = device_of(info)
    eps = float(info.attr("epsilon", 1e-5))

    def compute(
        x: CudaTensor, scale: CudaTensor, bias: CudaTensor, mean: CudaTensor, var: CudaTensor
    ) -> tuple[CudaTensor]:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            channels = x.shape[1] if x.ndim > 1 else 1
            inner = int(np.prod(x.shape[2:], dtype=np.int64))
            cuda.launch_over(
                nn.batchnorm_kernel(suffix(x)),
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


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    floats: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS}
    reg.kernel("LRN", since=1, types=floats)(_lrn)
    reg.kernel("MatMul", since=1, types=floats)(_matmul)
    reg.kernel("Gemm", since=6, types=floats)(_gemm)  # 6: C broadcasts (the kernel always may)
    reg.kernel("Conv", since=1, types=floats)(_conv)
    reg.kernel("MaxPool", since=1, types={"T": FLOATS})(_pool("max"))
    reg.kernel("AveragePool", since=1, types=floats)(_pool("avg"))
    reg.kernel("GlobalAveragePool", since=1, types=floats)(_global_pool("ReduceMean"))
    reg.kernel("GlobalMaxPool", since=1, types=floats)(_global_pool("ReduceMax"))
    reg.kernel("BatchNormalization", since=6, types={0: FLOATS, 1: FLOATS, 3: FLOATS})(_batchnorm)


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why this family's kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    rank = input_rank(node)
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
    if op == "MatMul":
        if rank is None or input_rank(node, 1) is None or min(rank, input_rank(node, 1) or 0) < 1:
            return "CUDA: MatMul of inputs of unknown rank or of rank 0"
    return None
