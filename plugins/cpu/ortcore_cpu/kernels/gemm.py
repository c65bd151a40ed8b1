"""Matrix products through numpy's BLAS: MatMul and Gemm."""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._common import DT, FLOATS, NUMERIC
from ._versions import per_schema_version

_BF16 = frozenset({DT.BFLOAT16})


@per_schema_version("MatMul", params=("T",))
def matmul(info: NodeInfo) -> Compute:
    """MatMul with numpy semantics (batch broadcasting, 1-D operands)."""

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if a.dtype.itemsize < 4 and a.dtype.kind not in "iub":  # float16, bfloat16
            out = np.matmul(a.astype(np.float32), b.astype(np.float32))
            return (out.astype(a.dtype),)
        return (np.matmul(a, b),)

    return compute


@per_schema_version("Gemm", until=8, types={"T": FLOATS})
@per_schema_version("Gemm", since=9, until=12, types={"T": NUMERIC})
@per_schema_version("Gemm", since=13, types={"T": NUMERIC | _BF16})
def gemm(info: NodeInfo) -> Compute:
    """Y = alpha * A' B' + beta * C.

    C is broadcast to Y's shape (opset 6 only with ``broadcast=1``, where
    otherwise it must already match, which broadcasting also accepts); it is
    optional from opset 11.
    """
    alpha = float(info.attrs.get("alpha", 1.0))
    beta = float(info.attrs.get("beta", 1.0))
    trans_a = bool(info.attrs.get("transA", 0))
    trans_b = bool(info.attrs.get("transB", 0))

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple[np.ndarray]:
        dtype = a.dtype
        if trans_a:
            a = a.T
        if trans_b:
            b = b.T
        if dtype.itemsize < 4 and dtype.kind not in "iub":  # float16, bfloat16
            a, b = a.astype(np.float32), b.astype(np.float32)
        y = np.dot(a, b)
        if alpha != 1.0:
            y *= np.asarray(alpha, y.dtype)
        if c is not None and beta != 0.0:
            cc = c.astype(y.dtype, copy=False)
            if beta != 1.0:
                cc = cc * np.asarray(beta, y.dtype)
            y += cc
        return (y.astype(dtype, copy=False),)

    return compute
