"""QDQ fusion: quantized models' DequantizeLinear -> op -> QuantizeLinear
groups become the integer op the provider runs, as onnxruntime's QDQ
selector-action transformer does.

The fusions run first among the extended-level fusions (before the float
fusions could take a Conv or MatMul out of its group), in this order:

1. removals, each exact (:mod:`~ortcore.optimizer.qdq_cleanup`): a no-op
   Relu/Clip before a Q; the DQ/Q pair around an op that only moves values
   (Reshape, Transpose, MaxPool, ...); a DQ -> Q pair of equal parameters;
2. Conv -> ``QLinearConv``, MatMul -> ``QLinearMatMul``, Gemm -> com.microsoft
   ``QGemm`` (:mod:`~ortcore.optimizer.qdq_linear`);
3. Add/Mul, (Global)AveragePool, Concat, Sigmoid, LeakyRelu -> com.microsoft
   ``QLinear*`` (:mod:`~ortcore.optimizer.qdq_contrib`);
4. integer products with a float result: dynamic quantization's chains ->
   ``DynamicQuantizeMatMul`` / ``MatMulIntegerToFloat``, a QDQ MatMul with
   no Q after it -> ``MatMulIntegerToFloat``
   (:mod:`~ortcore.optimizer.qdq_dynamic`).

Like every fusion, a group is fused only where all its nodes run on one
provider's kernels and that provider's registry has a kernel for the fused
op with the group's element types
(:meth:`~ortcore.optimizer._fusion.FusionContext.can_emit`); anything else
stays as it is, and unfused QDQ computes the same thing in float.

Numerics: a fused integer op rounds once, where the float path rounds the
float result of float arithmetic on dequantized values; the two differ by
at most one unit of the output's quantization (and float outputs by float
rounding only).

So that the groups exist to be fused, constant folding leaves
DequantizeLinear nodes alone before partitioning at the extended level (as
onnxruntime's does); those no fusion took are folded after the fusions.
"""

from __future__ import annotations

from ._fusion import FusionPass
from .qdq_cleanup import drop_qdq_around_moves, fold_activation_into_q, remove_dq_q_pairs
from .qdq_contrib import fuse_qdq_binary, fuse_qdq_concat, fuse_qdq_pool, fuse_qdq_unary
from .qdq_dynamic import fuse_dq_matmul_to_float, fuse_matmul_integer_to_float
from .qdq_linear import fuse_qdq_conv, fuse_qdq_gemm, fuse_qdq_matmul

__all__ = ["QDQ_FUSIONS", "QDQFusionPass"]

QDQ_FUSIONS = (
    fold_activation_into_q,
    drop_qdq_around_moves,
    remove_dq_q_pairs,
    fuse_qdq_conv,
    fuse_qdq_matmul,
    fuse_qdq_gemm,
    fuse_qdq_binary,
    fuse_qdq_pool,
    fuse_qdq_concat,
    fuse_qdq_unary,
    fuse_matmul_integer_to_float,
    fuse_dq_matmul_to_float,
)
"""The QDQ fusions, in the order they run."""


class QDQFusionPass(FusionPass):
    """Fuse quantized groups into integer ops (see the module docstring)."""

    fusions = QDQ_FUSIONS
