"""What the op families share: element-type tables, the device a kernel runs on, row geometry.

The layer between the device (:mod:`ortcore_cuda.device`) and the op
families (``ops_*``): every name here is public, and a family imports from
here (or from :mod:`ortcore_cuda.ops_window`), never from another family.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir
from ep_sdk import NodeInfo

from .device import CudaDevice
from .tensor import CudaTensor

__all__ = [
    "FLOATS",
    "FLOATS64",
    "INT_TYPES",
    "MOVABLE",
    "SIGNED",
    "SUFFIX",
    "UNSIGNED",
    "device_of",
    "input_rank",
    "moved_last",
    "rows_of",
    "suffix",
]

FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
FLOATS64 = (*FLOATS, ir.DataType.DOUBLE)
"""Element types of the kernels generated for float64 too (elementwise, rows)."""
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.float64): "f64"}
"""Kernel name suffixes of the float element types."""
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
SIGNED = (ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64)
UNSIGNED = (ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64)
INT_TYPES = SIGNED + UNSIGNED


def device_of(info: NodeInfo) -> CudaDevice:
    """The device a kernel of ``info`` runs on: its provider's allocator
    (``ep_sdk.ProviderView.allocator``), a :class:`~ortcore_cuda.device.CudaDevice`.

    Raises:
        TypeError: the kernel is built outside a session, or for a provider
            whose allocator is not a CUDA device.
    """
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


def suffix(x: CudaTensor) -> str:
    """The kernel name suffix of ``x``'s float element type (``f32``, ``f16``, ``f64``)."""
    return SUFFIX[x.dtype]


def moved_last(cuda: CudaDevice, x: CudaTensor, axes: Sequence[int]) -> tuple[CudaTensor, int, int]:
    """``x`` with ``axes`` moved last (a transposed copy when they are not
    already), and its rows and columns (the kept and the moved elements)."""
    rest = [i for i in range(x.ndim) if i not in axes]
    perm = rest + list(axes)
    rows_ = int(np.prod([x.shape[i] for i in rest], dtype=np.int64))
    cols = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    if perm == list(range(x.ndim)) or x.size == 0:
        return x, rows_, cols
    return cuda.transpose(x, perm), rows_, cols


def rows_of(shape: Sequence[int], axis: int) -> tuple[int, int]:
    """Rows and columns of ``shape`` split before ``axis``."""
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    return rows, int(np.prod(shape[axis:], dtype=np.int64))


def input_rank(node: ir.Node, index: int = 0) -> int | None:
    """The static rank of ``node``'s input ``index`` (``None``: unknown or omitted)."""
    v = node.inputs[index] if index < len(node.inputs) else None
    return len(v.shape) if v is not None and v.shape is not None else None
