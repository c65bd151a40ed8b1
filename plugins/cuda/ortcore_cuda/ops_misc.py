"""Selection and odd ops: NonMaxSuppression, Unique, NonZero, IsInf, IsNaN, BitCast,
CenterCropPad, AffineGrid, DeformConv, MaxUnpool, Det.

Kernels: :mod:`ortcore_cuda.kernels.misc`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).
"""

from __future__ import annotations

import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry

__all__ = ["decline", "register"]


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    return None
