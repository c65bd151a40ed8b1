"""Row ops: Softmax and LogSoftmax, the Reduce ops, ArgMax and ArgMin.

Kernels: :mod:`ortcore_cuda.kernels.rows`, one block a row. The reduced
axes are moved last first (a transposed copy when they are not already).
:func:`register` adds this family's kernels to the provider's registry;
:func:`decline` says why a node of this family is not covered (or ``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import elementwise as ew
from .kernels import rows
from .ops_common import FLOATS64, device_of, input_rank, moved_last, rows_of, suffix
from .tensor import CudaTensor

__all__ = ["decline", "register"]


def _softmax(log: bool) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        axis = int(info.attr("axis", -1 if info.opset >= 13 else 1))

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            a = axis + x.ndim if axis < 0 else axis
            if x.size == 0:  # nothing to normalize (and no axis to move and back)
                return (cuda.empty(x.shape, x.dtype),)
            kernel = rows.softmax_kernel(suffix(x), log)
            if info.opset >= 13 and a != x.ndim - 1:  # the axis moved last, and back
                moved, rows_, cols = moved_last(cuda, x, [a])
                z = cuda.empty(moved.shape, x.dtype)
                if z.size:
                    cuda.launch(
                        kernel, rows_, rows.row_threads(cols), moved.ptr, z.ptr, rows_, cols
                    )
                back = list(range(x.ndim - 1))
                back.insert(a, x.ndim - 1)
                y = cuda.transpose(z, back)
                return (y,)
            rows_, cols = rows_of(x.shape, a)
            y = cuda.empty(x.shape, x.dtype)
            if y.size:
                cuda.launch(kernel, rows_, rows.row_threads(cols), x.ptr, y.ptr, rows_, cols)
            return (y,)

        return compute

    return build


def _reduce(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
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
            moved, rows_, cols = moved_last(cuda, x, axes)
            if y.size:
                kernel = rows.reduce_kernel(op, suffix(x))
                cuda.launch(kernel, rows_, rows.row_threads(cols), moved.ptr, y.ptr, rows_, cols)
            return (y,)

        return compute

    return build


def _arg(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        keep = bool(info.attr("keepdims", 1))
        last = int(info.attr("select_last_index", 0))
        axis_attr = int(info.attr("axis", 0))

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            axis = axis_attr % x.ndim
            shape = [1 if i == axis else d for i, d in enumerate(x.shape)]
            if not keep:
                shape.pop(axis)
            y = cuda.empty(shape, np.int64)
            moved, rows_, cols = moved_last(cuda, x, [axis])
            if y.size:
                kernel = rows.arg_kernel(op, suffix(x))
                cuda.launch(
                    kernel, rows_, rows.row_threads(cols), moved.ptr, y.ptr, rows_, cols, last
                )
            return (y,)

        return compute

    return build


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    wide: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS64}
    for op, log in (("Softmax", False), ("LogSoftmax", True)):
        reg.kernel(op, since=1, types=wide)(_softmax(log))
    for op in (*rows.REDUCTIONS, "ReduceLogSumExp"):
        axes_input = {"ReduceSum": 13}.get(op, 18)
        reg.kernel(op, since=1, until=axes_input - 1, types=wide)(_reduce(op))
        reg.kernel(op, since=axes_input, types=wide, input_memory={1: "host"})(_reduce(op))
    for op in ("ArgMax", "ArgMin"):
        reg.kernel(op, since=1, types=wide)(_arg(op))


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why this family's kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    rank = input_rank(node)
    if op in ("Softmax", "LogSoftmax", "ArgMax", "ArgMin") and (rank or 0) > ew.MAX_RANK:
        return f"CUDA: {op} of rank over {ew.MAX_RANK}"
    if op.startswith("Reduce") and (rank is None or rank > ew.MAX_RANK):
        return f"CUDA: {op} of rank {rank}"
    return None
