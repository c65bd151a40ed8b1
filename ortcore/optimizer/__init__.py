"""Graph optimizations, applied by level as in onnxruntime.

Basic level (``ORT_ENABLE_BASIC`` and above): Identity and inference-time
Dropout elimination, constant folding on the CPU provider's own kernels, and
dead-code removal. Extended level: BatchNormalization, Mul and Add folded
into a preceding Conv. Each pass is one module with its own tests.
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx_ir as ir

from ep_sdk import ExecutionProvider

from ..options import GraphOptimizationLevel
from .constant_folding import fold_constants
from .conv_folding import fold_conv_affine
from .dead_code import remove_dead_code
from .elimination import eliminate_identities

__all__ = [
    "eliminate_identities",
    "fold_constants",
    "fold_conv_affine",
    "optimize",
    "remove_dead_code",
]


def optimize(
    model: ir.Model,
    level: GraphOptimizationLevel,
    folding_provider: ExecutionProvider | None,
    overridable: set[ir.Value],
) -> None:
    """Rewrite ``model`` in place for ``level``.

    Args:
        folding_provider: host provider whose kernels evaluate constant nodes
            (``None`` skips constant folding).
        overridable: initializers a feed may replace; never folded.
    """
    if level < GraphOptimizationLevel.ORT_ENABLE_BASIC:
        return
    graph = model.graph
    opsets: Mapping[str, int] = dict(model.opset_imports)
    eliminate_identities(graph, opsets)
    if folding_provider is not None:
        fold_constants(graph, opsets, folding_provider, overridable)
    if level >= GraphOptimizationLevel.ORT_ENABLE_EXTENDED:
        fold_conv_affine(graph)
    remove_dead_code(graph)
