"""Graph optimizations, applied by level and in onnxruntime's order.

:func:`optimize` runs, for a session:

1. **Provider-independent passes** (``ORT_ENABLE_BASIC`` and above), in
   this order: Identity and inference-time Dropout elimination; no-op
   Cast/Reshape/Expand/Transpose elimination (single nodes and pairs);
   shape folding (``Shape``/``Size`` of statically shaped values become
   constants); common-subexpression elimination; constant folding on the
   CPU provider's own kernels (which finishes the shape computations shape
   folding started); no-op elimination again, if folding made targets
   known; at the extended level, BatchNormalization, Mul and Add folded
   into a preceding Conv (new weights for a Conv, as onnxruntime's level-1
   ConvBNFusion, ConvMulFusion, ConvAddFusion), and Mul and Add folded into
   a preceding BatchNormalization; and dead-code removal.
2. **Partitioning** (extended level and above): the providers claim the
   nodes, in priority order (:func:`ortcore.partition.partition_model`).
   Every provider, a compile-path one included, is shown the model's own
   ops; each node's assignment is recorded on it, and the planner keeps it.
3. **Fusions** (extended level), one module each, in this order:
   QDQ fusion (quantized DequantizeLinear -> op -> QuantizeLinear groups
   into QLinearConv, QLinearMatMul, com.microsoft QGemm, QLinearAdd, ...,
   and dynamic quantization's chains into DynamicQuantizeMatMul:
   :mod:`ortcore.optimizer.qdq`), LayerNormalization/RMSNormalization
   from their primitive patterns, GELU (erf and tanh forms) and BiasGelu,
   Swish (``x * Sigmoid(alpha * x)``: SiLU, QuickGelu),
   SkipLayerNormalization, attention,
   MatMul + Add, Gemm/MatMul + activation, Conv + activation, Concat of
   Convs along the channels (the Convs write into the joined tensor), a
   channel shuffle after a Conv (folded into its weights, or a
   FusedConvShuffle), a MaxPool of a Conv's output (FusedConvPool). A pattern is
   fused only where all its nodes are assigned to the same provider, to run
   with its kernels (not in a group it compiles), and that provider has a
   kernel for the fused op; the fused node inherits the assignment
   (:meth:`~ortcore.optimizer._fusion.FusionContext.can_emit`). They apply
   to the main graph and to the subgraphs partitioning reached. The fused
   ops are defined in :mod:`ortcore.fused_ops`. Then constant folding of
   what the fusions left constant (at the extended level, folding before
   partitioning leaves DequantizeLinear nodes for the QDQ fusions, as
   onnxruntime's does; those no fusion took are folded here, outside the
   groups a provider compiles), dead-code removal, each provider's own
   ``graph_passes()`` in the session's provider order, and dead-code
   removal again.

Each pass is an onnx-ir :class:`~onnx_ir.passes.InPlacePass` (one module
each, with its own tests) run by an :class:`~onnx_ir.passes.PassManager`;
its ``requires``/``ensures`` check that it keeps the graphs' input and
output names and never reads an overridable initializer as a constant (see
:mod:`ortcore.optimizer._pass`, whose ``CHECK_INVARIANTS`` turns them off).
"""

from __future__ import annotations

from collections.abc import Sequence, Set

import onnx_ir as ir

from ep_sdk import ExecutionProvider, KernelRegistry

from ..options import GraphOptimizationLevel
from ..partition import assignment_of, partition_model
from ._fusion import FusionContext, FusionPass
from ._pass import OptimizerPass, graphs_remembered
from .attention import AttentionFusionPass, fuse_attention
from .channel_shuffle import ChannelShuffleFusionPass, fuse_conv_shuffle
from .constant_folding import MAX_FOLDED_BYTES, ConstantFoldingPass, fold_constants
from .conv_activation import (
    ConvActivationFusionPass,
    fuse_batchnorm_activation,
    fuse_conv_activation,
    fuse_conv_add_activation,
)
from .conv_concat import ConvConcatFusionPass, fuse_conv_concat, fuse_growing_concat
from .conv_folding import ConvAffineFoldingPass, fold_batchnorm_affine, fold_conv_affine
from .conv_pool import ConvPoolFusionPass, fuse_conv_pool
from .cse import CommonSubexpressionEliminationPass, eliminate_common_subexpressions
from .dead_code import DeadCodeEliminationPass, remove_dead_code
from .elimination import IdentityEliminationPass, eliminate_identities
from .gelu import GeluFusionPass, fuse_bias_gelu, fuse_gelu
from .gemm_activation import GemmActivationFusionPass, fuse_gemm_activation
from .layer_norm import NormalizationFusionPass, fuse_layer_norm, fuse_rms_norm
from .matmul_add import MatMulAddFusionPass, fuse_matmul_add
from .noop import NoopEliminationPass, eliminate_noops
from .provider_passes import ProviderPasses, run_provider_passes
from .qdq import QDQFusionPass
from .shape_folding import ShapeFoldingPass, fold_shapes
from .skip_layer_norm import SkipLayerNormFusionPass, fuse_skip_layer_norm
from .swish import SwishFusionPass, fuse_swish

__all__ = [
    "FUSIONS",
    "FUSION_PASSES",
    "AttentionFusionPass",
    "ChannelShuffleFusionPass",
    "CommonSubexpressionEliminationPass",
    "ConstantFoldingPass",
    "ConvActivationFusionPass",
    "ConvConcatFusionPass",
    "ConvAffineFoldingPass",
    "ConvPoolFusionPass",
    "DeadCodeEliminationPass",
    "FusionContext",
    "FusionPass",
    "GeluFusionPass",
    "GemmActivationFusionPass",
    "IdentityEliminationPass",
    "MatMulAddFusionPass",
    "NoopEliminationPass",
    "NormalizationFusionPass",
    "OptimizerPass",
    "ProviderPasses",
    "QDQFusionPass",
    "ShapeFoldingPass",
    "SkipLayerNormFusionPass",
    "SwishFusionPass",
    "eliminate_common_subexpressions",
    "eliminate_identities",
    "eliminate_noops",
    "fold_constants",
    "fold_batchnorm_affine",
    "fold_conv_affine",
    "fold_shapes",
    "fuse_attention",
    "fuse_batchnorm_activation",
    "fuse_bias_gelu",
    "fuse_conv_activation",
    "fuse_conv_add_activation",
    "fuse_conv_concat",
    "fuse_conv_pool",
    "fuse_conv_shuffle",
    "fuse_gelu",
    "fuse_gemm_activation",
    "fuse_growing_concat",
    "fuse_layer_norm",
    "fuse_matmul_add",
    "fuse_rms_norm",
    "fuse_skip_layer_norm",
    "fuse_swish",
    "optimize",
    "remove_dead_code",
    "run_provider_passes",
]

FUSION_PASSES: tuple[type[FusionPass], ...] = (
    QDQFusionPass,
    NormalizationFusionPass,
    GeluFusionPass,
    SwishFusionPass,
    SkipLayerNormFusionPass,
    AttentionFusionPass,
    MatMulAddFusionPass,
    GemmActivationFusionPass,
    ConvActivationFusionPass,
    ConvConcatFusionPass,
    ChannelShuffleFusionPass,
    ConvPoolFusionPass,
)
"""The extended-level fusion passes, in the order they run."""

FUSIONS = tuple(fuse for p in FUSION_PASSES for fuse in p.fusions)
"""The extended-level fusions, in the order they run."""


def optimize(
    model: ir.Model,
    level: GraphOptimizationLevel,
    folding_provider: ExecutionProvider | None,
    overridable: Set[ir.Value],
    providers: Sequence[ExecutionProvider] = (),
    *,
    check_invariants: bool | None = None,
    folding_budget: int | None = None,
    max_tensor_bytes: int | None = None,
) -> None:
    """Rewrite ``model`` in place for ``level`` (the order is in the module docstring).

    At the extended level and above, the model's graphs are partitioned
    among ``providers`` on the way, and each node's assignment is recorded
    on it for the planner (:func:`ortcore.partition.partition_graph`).

    Args:
        folding_provider: host provider whose kernels evaluate constant nodes
            (``None`` skips constant folding).
        overridable: initializers a feed may replace; never folded.
        providers: the session's providers in priority order (none given:
            no partitioning, no fusions).
        check_invariants: whether every pass checks its invariants
            (``None``: ``ortcore.optimizer._pass.CHECK_INVARIANTS``).
        folding_budget: the most bytes constant folding may create in all
            (``None``: see :func:`~ortcore.optimizer.constant_folding.folding_budget_bytes`).
        max_tensor_bytes: the session's tensor limit (``None``: the process
            default); no tensor folding creates is larger.

    Raises:
        onnx_ir.passes.PostconditionError: a pass broke an invariant.
        EPFail, NotImplementedOp: partitioning failed (extended level).
        Whatever a pass raised, unwrapped from the pass manager's errors.
    """
    if level < GraphOptimizationLevel.ORT_ENABLE_BASIC:
        return
    # One memory of what the passes found for both runs of passes:
    # partitioning, between them, changes no node.
    with graphs_remembered():
        _optimize(
            model, level, folding_provider, overridable, providers,
            check_invariants, folding_budget, max_tensor_bytes,
        )  # fmt: skip


def _optimize(
    model: ir.Model,
    level: GraphOptimizationLevel,
    folding_provider: ExecutionProvider | None,
    overridable: Set[ir.Value],
    providers: Sequence[ExecutionProvider],
    check_invariants: bool | None,
    folding_budget: int | None,
    max_tensor_bytes: int | None,
) -> None:
    """:func:`optimize`, inside its memory of the graphs."""
    ov = frozenset(overridable)
    extended = level >= GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    cap = MAX_FOLDED_BYTES if max_tensor_bytes is None else min(MAX_FOLDED_BYTES, max_tensor_bytes)
    passes = _independent_passes(
        folding_provider, ov, extended, check_invariants, folding_budget, cap
    )
    _run(model, passes)
    if not extended:
        return
    if providers:
        partition_model(model, providers, dict(model.opset_imports))
    first = next((p for p in passes if isinstance(p, ConstantFoldingPass)), None)
    folding = _folding_after_fusions(
        folding_provider, ov, check_invariants, folding_budget, cap, first
    )
    _run(model, _extended_passes(providers, ov, check_invariants, folding))


def _independent_passes(
    folding_provider: ExecutionProvider | None,
    overridable: Set[ir.Value],
    extended: bool,
    check: bool | None,
    budget: int | None = None,
    max_bytes: int = MAX_FOLDED_BYTES,
) -> list[OptimizerPass]:
    """The passes before partitioning (step 1 of the module docstring)."""
    shapes = ShapeFoldingPass(overridable, check_invariants=check)
    folding: list[OptimizerPass] = []
    if folding_provider is not None:
        folding.append(
            ConstantFoldingPass(
                folding_provider,
                overridable,
                check_invariants=check,
                budget=budget,
                max_bytes=max_bytes,
                skip=_is_dequantize if extended else None,
                skips_only=("DequantizeLinear",) if extended else None,
            )
        )
    passes: list[OptimizerPass] = [
        IdentityEliminationPass(overridable, check_invariants=check),
        NoopEliminationPass(overridable, check_invariants=check),
        shapes,
        CommonSubexpressionEliminationPass(overridable, check_invariants=check),
        *folding,
        NoopEliminationPass(overridable, after=[shapes, *folding], check_invariants=check),
    ]
    if extended:
        passes.append(ConvAffineFoldingPass(overridable, check_invariants=check))
    passes.append(DeadCodeEliminationPass(overridable, check_invariants=check))
    return passes


def _is_dequantize(node: ir.Node) -> bool:
    """Whether ``node`` is a DequantizeLinear (kept for the QDQ fusions)."""
    return node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx")


def _in_compiled_group(node: ir.Node) -> bool:
    """Whether ``node`` belongs to a group its provider compiles."""
    a = assignment_of(node)
    return a is not None and a.claim is not None


def _folding_after_fusions(
    folding_provider: ExecutionProvider | None,
    overridable: Set[ir.Value],
    check: bool | None,
    budget: int | None,
    max_bytes: int,
    before: ConstantFoldingPass | None,
) -> list[OptimizerPass]:
    """Constant folding after the fusions: the DequantizeLinear nodes of
    constants no QDQ fusion took (and what reads them), outside the groups
    providers compile, within what is left of the budget ``before`` used."""
    if folding_provider is None:
        return []
    return [
        ConstantFoldingPass(
            folding_provider,
            overridable,
            check_invariants=check,
            budget=budget,
            max_bytes=max_bytes,
            skip=_in_compiled_group,
            shares_budget_with=before,
        )
    ]


def _extended_passes(
    providers: Sequence[ExecutionProvider],
    overridable: Set[ir.Value],
    check: bool | None,
    folding: Sequence[OptimizerPass] = (),
) -> list[OptimizerPass]:
    """The passes after partitioning (step 3 of the module docstring)."""
    registries: dict[ExecutionProvider, KernelRegistry | None] = {}
    return [
        *(p(overridable, check_invariants=check, registries=registries) for p in FUSION_PASSES),
        *folding,
        DeadCodeEliminationPass(overridable, check_invariants=check),
        ProviderPasses(providers, overridable, check_invariants=check),
        DeadCodeEliminationPass(overridable, check_invariants=check),
    ]


def _run(model: ir.Model, passes: Sequence[OptimizerPass]) -> None:
    """Run ``passes`` in order with a pass manager. An error a pass raised
    is raised as it was (the pass manager wraps it in ``PassError``s), with
    a note naming the pass."""
    try:
        with graphs_remembered():
            ir.passes.PassManager(passes)(model)
    except ir.passes.PassError as exc:
        root: BaseException = exc
        where = str(exc)
        while isinstance(root, ir.passes.PassError) and root.__cause__ is not None:
            where = str(root)
            root = root.__cause__
        if isinstance(root, ir.passes.PassError):
            raise
        root.add_note(f"ortcore optimizer: {where}")
        raise root from root.__cause__


_run_provider_passes = run_provider_passes  # its name before passes were classes
