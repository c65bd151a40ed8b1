"""Graph optimizations, applied by level as in onnxruntime.

Basic level (``ORT_ENABLE_BASIC`` and above), in this order: Identity and
inference-time Dropout elimination; no-op Cast/Reshape/Expand/Transpose
elimination (single nodes and pairs); shape folding (``Shape``/``Size`` of
statically shaped values become constants); common-subexpression
elimination; constant folding on the CPU provider's own kernels (which
finishes the shape computations shape folding started); no-op elimination
again, for targets constant folding made known; and dead-code removal.
Extended level:
BatchNormalization, Mul and Add folded into a preceding Conv, then the
fusions (one module each, in this order):
LayerNormalization/RMSNormalization from their primitive patterns, GELU
(erf and tanh forms) and BiasGelu, SkipLayerNormalization, attention,
MatMul + Add, Gemm/MatMul + activation, Conv + activation. A fusion emits
its fused op only where the provider that would run the pattern has a kernel
for it (see ``_fusion.FusionContext.can_emit``); the fused ops are defined
in :mod:`ortcore.fused_ops`. Last, each provider's own ``graph_passes()``
run over the whole graph, in the session's provider order. Each pass is one
module with its own tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from ep_sdk import ExecutionProvider

from ..options import GraphOptimizationLevel
from ._fusion import FusionContext
from .attention import fuse_attention
from .constant_folding import fold_constants
from .conv_activation import fuse_conv_activation
from .conv_folding import fold_conv_affine
from .cse import eliminate_common_subexpressions
from .dead_code import remove_dead_code
from .elimination import eliminate_identities
from .gelu import fuse_bias_gelu, fuse_gelu
from .gemm_activation import fuse_gemm_activation
from .layer_norm import fuse_layer_norm, fuse_rms_norm
from .matmul_add import fuse_matmul_add
from .noop import eliminate_noops
from .shape_folding import fold_shapes
from .skip_layer_norm import fuse_skip_layer_norm

__all__ = [
    "eliminate_common_subexpressions",
    "eliminate_identities",
    "eliminate_noops",
    "fold_constants",
    "fold_conv_affine",
    "fold_shapes",
    "fuse_attention",
    "fuse_bias_gelu",
    "fuse_conv_activation",
    "fuse_gelu",
    "fuse_gemm_activation",
    "fuse_layer_norm",
    "fuse_matmul_add",
    "fuse_rms_norm",
    "fuse_skip_layer_norm",
    "optimize",
    "remove_dead_code",
]


def optimize(
    model: ir.Model,
    level: GraphOptimizationLevel,
    folding_provider: ExecutionProvider | None,
    overridable: set[ir.Value],
    providers: Sequence[ExecutionProvider] = (),
) -> None:
    """Rewrite ``model`` in place for ``level``.

    Args:
        folding_provider: host provider whose kernels evaluate constant nodes
            (``None`` skips constant folding).
        overridable: initializers a feed may replace; never folded.
        providers: the session's providers in priority order; fusions emit
            a fused op only where the provider that would run the pattern
            has a kernel for it (none given: no fusions).
    """
    if level < GraphOptimizationLevel.ORT_ENABLE_BASIC:
        return
    graph = model.graph
    opsets: Mapping[str, int] = dict(model.opset_imports)
    eliminate_identities(graph, opsets)
    eliminate_noops(graph, overridable)
    folded = fold_shapes(graph, overridable)
    eliminate_common_subexpressions(graph)
    if folding_provider is not None:
        folded += fold_constants(graph, opsets, folding_provider, overridable)
    if folded:  # a Reshape/Expand target may have become a constant
        eliminate_noops(graph, overridable)
    if level >= GraphOptimizationLevel.ORT_ENABLE_EXTENDED:
        fold_conv_affine(graph)
        ctx = FusionContext(model, providers, overridable)
        for fusion in FUSIONS:
            fusion(ctx)
        remove_dead_code(graph)
        _run_provider_passes(model, providers)
    remove_dead_code(graph)


FUSIONS = (
    fuse_layer_norm,
    fuse_rms_norm,
    fuse_gelu,
    fuse_bias_gelu,
    fuse_skip_layer_norm,
    fuse_attention,
    fuse_matmul_add,
    fuse_gemm_activation,
    fuse_conv_activation,
)
"""The extended-level fusions, in the order they run."""


def _run_provider_passes(model: ir.Model, providers: Sequence[ExecutionProvider]) -> None:
    """Run each provider's ``graph_passes()`` (onnx-ir passes, or callables
    taking the model) over the whole model, in provider order.

    Before partitioning the core cannot restrict a pass to the nodes its
    provider will be assigned, so a provider's pass must itself leave alone
    what it does not handle (e.g. by matching only ops its registry has).
    """
    for provider in providers:
        for p in provider.graph_passes():
            p(model)
