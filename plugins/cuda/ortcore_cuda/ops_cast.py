"""Cast and CastLike to and from the 8-, 4- and 2-bit floats and integers and bfloat16.

Kernels: :mod:`ortcore_cuda.kernels.cast`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

The kernels registered here take every Cast and CastLike whose input or
output is one of these types (:data:`EXOTIC_SINCE`), the other being one of
them or a type of ``ops_elementwise.CASTABLE`` (float32, float16, float64, the 8- to
64-bit integers, bool); the registry keeps ``ops_elementwise``'s Cast for pairs of
the latter. Each type is registered from the opset that introduced it into
Cast (CastLike: from 15). Strings stay with the next provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import cast as kc
from .kernels import elementwise as ew
from .ops_common import device_of

if TYPE_CHECKING:
    from .tensor import CudaTensor

__all__ = ["EXOTIC_SINCE", "STANDARD", "decline", "register"]

EXOTIC_SINCE: dict[ir.DataType, int] = {
    ir.DataType.BFLOAT16: 13,
    ir.DataType.FLOAT8E4M3FN: 19,
    ir.DataType.FLOAT8E4M3FNUZ: 19,
    ir.DataType.FLOAT8E5M2: 19,
    ir.DataType.FLOAT8E5M2FNUZ: 19,
    ir.DataType.INT4: 21,
    ir.DataType.UINT4: 21,
    ir.DataType.FLOAT4E2M1: 23,
    ir.DataType.FLOAT8E8M0: 24,
    ir.DataType.INT2: 25,
    ir.DataType.UINT2: 25,
}
"""The types of this family and the Cast opset that introduced each (``onnx.defs``)."""

STANDARD = (
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
"""The types ``ops_elementwise``'s Cast kernel converts between (``ops_elementwise.CASTABLE``)."""

_FLOAT8 = frozenset(
    {
        ir.DataType.FLOAT8E4M3FN,
        ir.DataType.FLOAT8E4M3FNUZ,
        ir.DataType.FLOAT8E5M2,
        ir.DataType.FLOAT8E5M2FNUZ,
    }
)
_SUFFIX = {dtype: suffix for suffix, (_, dtype) in kc.cast_suffixes().items()}


def _cast(info: NodeInfo) -> Any:
    cuda = device_of(info)
    to = np.dtype(info.output_dtype(0))
    sat = int(bool(info.attr("saturate", 1)))
    mode = kc.E8M0_MODES[str(info.attr("round_mode", "up"))]

    def compute(x: CudaTensor, *_like: Any) -> tuple[CudaTensor]:
        if x.dtype == to:
            return (cuda.copy(x, x.shape),)
        y = cuda.empty(x.shape, to)
        if y.size:
            src, dst = _SUFFIX[x.dtype], _SUFFIX[to]
            if src in kc.EXOTIC or dst in kc.EXOTIC:
                kernel = kc.castx_kernel(src, dst)
                cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, sat, mode)
            else:
                cuda.launch_over(ew.cast_kernel(src, dst), y.size, x.ptr, y.ptr, y.size)
        return (y,)

    return compute


def _ranges() -> list[tuple[int, int | None, tuple[ir.DataType, ...]]]:
    """Opset ranges over which the set of exotic types is constant, with that set."""
    starts = sorted(set(EXOTIC_SINCE.values()))
    out: list[tuple[int, int | None, tuple[ir.DataType, ...]]] = []
    for k, lo in enumerate(starts):
        hi = starts[k + 1] - 1 if k + 1 < len(starts) else None
        out.append((lo, hi, tuple(t for t, since in EXOTIC_SINCE.items() if since <= lo)))
    return out


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``: Cast (and CastLike, from 15) with an
    exotic input (any output of the opset's types but strings), and with a
    standard input and an exotic output."""
    for lo, hi, exotic in _ranges():
        every = (*STANDARD, *exotic)
        reg.kernel("Cast", since=lo, until=hi, types={0: exotic, "T2": every})(_cast)
        reg.kernel("Cast", since=lo, until=hi, types={0: STANDARD, "T2": exotic})(_cast)
        if hi is not None and hi < 15:
            continue
        like = max(lo, 15)
        reg.kernel("CastLike", since=like, until=hi, types={0: exotic, 1: every})(_cast)
        reg.kernel("CastLike", since=like, until=hi, types={0: STANDARD, 1: exotic})(_cast)


def _elem(v: ir.Value | None) -> ir.DataType | None:
    return v.dtype if v is not None else None


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``: a ``round_mode``
    other than up, down and nearest, or an element type unknown statically."""
    if node.op_type not in ("Cast", "CastLike") or node.domain not in ("", "ai.onnx"):
        return None
    inp = _elem(node.inputs[0] if node.inputs else None)
    out = _elem(node.outputs[0] if node.outputs else None)
    if inp not in EXOTIC_SINCE and out not in EXOTIC_SINCE:
        return None  # ops_elementwise's Cast
    if inp is None or out is None:
        return f"CUDA: {node.op_type} with an element type unknown before the run"
    for t in (inp, out):
        if t not in EXOTIC_SINCE and t not in STANDARD:
            return f"CUDA: {node.op_type} to or from {t.name}"
    attr = node.attributes.get("round_mode")
    if attr is not None and attr.as_string() not in kc.E8M0_MODES:
        return f"CUDA: Cast with round_mode {attr.as_string()!r}"
    return None
