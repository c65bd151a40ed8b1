"""QDQ rewrites that remove nodes rather than fuse them, each exact:

- a Relu or Clip right before a per-tensor Q whose range makes it a no-op
  goes (onnxruntime's ReluQuantFusion and ClipQuantFusion): quantizing is
  monotone, so ``Q(Clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi))``, which is
  ``Q(v)`` where ``Q(lo)`` and ``Q(hi)`` saturate (for Relu: ``lo = 0``,
  the zero point is the type's minimum);
- ``DQ -> op -> Q`` with the same per-tensor parameters on both sides, for
  an op that only moves or selects values (Reshape, Transpose, Squeeze,
  Unsqueeze, Flatten, Expand, Slice, Gather, GatherElements, Tile,
  DepthToSpace, SpaceToDepth, nearest Resize, MaxPool from opset 12) runs
  the op on the 8-bit tensor itself (onnxruntime's DropQDQNodes): the Q
  gives back exactly the integers the DQ read;
- ``DQ -> Q`` with the same parameters and type: the Q's readers read the
  DQ's input. (``Q -> DQ`` on a float tensor changes its values: it stays.)
"""

from __future__ import annotations

import onnx_ir as ir

from ._common import attr
from ._fusion import FusionContext, activation_of, anchored, op
from .qdq_common import QDQ_OPS, dq_of, q_params

__all__ = ["drop_qdq_around_moves", "fold_activation_into_q", "remove_dq_q_pairs"]

MOVES = frozenset(
    {
        "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Slice",
        "Gather", "GatherElements", "Tile", "DepthToSpace", "SpaceToDepth", "Resize",
        "MaxPool",
    }
)  # fmt: skip
"""Ops whose outputs are values of their first input, moved or selected."""


@anchored("Relu", "Clip", needs=QDQ_OPS)
def fold_activation_into_q(ctx: FusionContext) -> int:
    """Remove each Relu/Clip whose only reader is a Q that makes it a no-op;
    returns how many went."""
    done = 0
    for q in list(ctx.graph):
        y = q_params(ctx, q)
        if y is None or not y.per_tensor:
            continue
        act = q.inputs[0].producer() if q.inputs[0] is not None else None
        if act is None or not op(act, "Relu", "Clip") or ctx.sole_user(act.outputs[0]) is not q:
            continue
        found = activation_of(ctx, act)
        if found is None or act.inputs[0] is None:
            continue
        lo, hi = (0.0, float("inf")) if act.op_type == "Relu" else found[1]
        if y.quantize(lo) > y.qmin or y.quantize(hi) < y.qmax:
            continue
        if not ctx.kernel_run([act, q]):
            continue
        q.replace_input_with(0, act.inputs[0])
        ctx.graph.remove(act, safe=True)
        done += 1
    return done


def _moves_exactly(ctx: FusionContext, node: ir.Node) -> bool:
    """Whether ``node`` outputs values of its first input, unchanged."""
    if not op(node, *MOVES) or len(node.outputs) != 1:
        return False
    if node.op_type == "MaxPool":
        return ctx.opset >= 12  # 8-bit MaxPool from opset 12
    if node.op_type == "Resize":
        return str(attr(node, "mode", "nearest")) == "nearest"
    return True


@anchored(*MOVES, needs=QDQ_OPS)
def drop_qdq_around_moves(ctx: FusionContext) -> int:
    """Run ``DQ -> op -> Q`` ops (see :data:`MOVES`) with equal parameters
    on the 8-bit tensor; returns how many were rewritten."""
    done = 0
    for node in list(ctx.graph):
        if node.graph is not ctx.graph or not _moves_exactly(ctx, node) or not node.inputs:
            continue
        x = dq_of(ctx, node.inputs[0])
        q = ctx.sole_user(node.outputs[0])
        y = q_params(ctx, q) if q is not None and q.inputs[0] is node.outputs[0] else None
        if x is None or y is None or not x.per_tensor or not x.same_as(y):
            continue
        if any(v is node.inputs[0] for v in node.inputs[1:]):
            continue
        types = [x.dtype, *(v.dtype if v is not None else None for v in node.inputs[1:])]
        group = [x.node, node, y.node]
        if not ctx.can_emit(group, node.op_type, "", input_types=types, output_types=[y.dtype]):
            continue
        moved = ir.Node(
            "", node.op_type, [x.quantized, *node.inputs[1:]], list(node.attributes.values()),
            name=f"{node.name}_quant", num_outputs=1,
        )  # fmt: skip
        dq_goes = [x.node] if all(u.node is node for u in x.node.outputs[0].uses()) else []
        if x.node.outputs[0] in ctx.graph.outputs:
            dq_goes = []
        ctx.replace([*dq_goes, node, y.node], moved, [(y.quantized, moved.outputs[0])], at=y.node)
        done += 1
    return done


@anchored("QuantizeLinear", needs=QDQ_OPS)
def remove_dq_q_pairs(ctx: FusionContext) -> int:
    """Let the readers of ``Q(DQ(x))`` with equal parameters read ``x``;
    returns how many Q nodes went."""
    done = 0
    for q in list(ctx.graph):
        y = q_params(ctx, q)
        if y is None or y.quantized in ctx.graph.outputs:
            continue
        x = dq_of(ctx, q.inputs[0])
        if x is None or not x.same_as(y) or not ctx.kernel_run([q]):
            continue
        ir.convenience.replace_all_uses_with(y.quantized, x.quantized)
        ctx.graph.remove(q, safe=True)
        done += 1
    return done
