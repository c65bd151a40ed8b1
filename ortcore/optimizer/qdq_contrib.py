"""QDQ fusions into onnxruntime's com.microsoft QLinear ops, per-tensor
parameters of one 8-bit type throughout (as onnxruntime's QDQ selectors):

- ``DQ, DQ -> Add / Mul -> Q``: ``QLinearAdd`` / ``QLinearMul``;
- ``DQ -> AveragePool -> Q``: ``QLinearAveragePool``; ``DQ ->
  GlobalAveragePool -> Q``: ``QLinearGlobalAveragePool`` (channels first);
- ``DQ, ... -> Concat -> Q``: ``QLinearConcat``;
- ``DQ -> Sigmoid -> Q``: ``QLinearSigmoid``; ``DQ -> LeakyRelu -> Q``:
  ``QLinearLeakyRelu``.
"""

from __future__ import annotations

import onnx_ir as ir

from ._common import attr
from ._fusion import FusionContext, anchored, op
from .qdq_common import (
    FLOAT,
    MS_DOMAIN,
    QDQ_OPS,
    QParams,
    dq_of,
    q_after,
    replace_group,
    zero_point_of,
)

__all__ = [
    "fuse_qdq_binary",
    "fuse_qdq_concat",
    "fuse_qdq_pool",
    "fuse_qdq_unary",
]


def _uniform(*ps: QParams | None) -> bool:
    """Whether all of ``ps`` exist, are per tensor and of one type."""
    if any(p is None or not p.per_tensor for p in ps):
        return False
    return len({p.dtype for p in ps if p is not None}) == 1


def _fuse(
    ctx: FusionContext, node: ir.Node, xs: list[QParams], y: QParams, fused_op: str,
    attrs: list[ir.Attr],
) -> bool:  # fmt: skip
    """Replace ``xs``' DQs, ``node`` and ``y``'s Q with one com.microsoft
    ``fused_op`` (inputs: each x's value, scale and zero point, then y's
    scale and zero point; QLinearConcat: y's first), if the provider has it."""
    t = y.dtype
    each: list[ir.DataType | None] = [t, FLOAT, t]
    out: list[ir.DataType | None] = [FLOAT, t]
    concat = fused_op == "QLinearConcat"
    types = out + each * len(xs) if concat else each * len(xs) + out
    inputs = [p.node for p in xs]
    body = [node, y.node]
    if not ctx.can_emit([*inputs, *body], fused_op, MS_DOMAIN, input_types=types, output_types=[t]):
        return False
    ins: list[ir.Value | None] = []
    for p in xs:
        ins += [p.quantized, p.scale, zero_point_of(ctx, p)]
    outs: list[ir.Value | None] = [y.scale, zero_point_of(ctx, y)]
    args = outs + ins if concat else ins + outs
    fused = ir.Node(MS_DOMAIN, fused_op, args, attrs, name=f"{node.name}_quant", num_outputs=1)
    replace_group(ctx, inputs, body, fused, y.quantized)
    return True


@anchored("Add", "Mul", needs=QDQ_OPS)
def fuse_qdq_binary(ctx: FusionContext) -> int:
    """Replace ``DQ -> Add/Mul -> Q`` with QLinearAdd/QLinearMul; returns fusions done."""
    done = 0
    for node in list(ctx.graph):
        if node.graph is not ctx.graph or not op(node, "Add", "Mul") or len(node.inputs) != 2:
            continue
        a, b = dq_of(ctx, node.inputs[0]), dq_of(ctx, node.inputs[1])
        y = q_after(ctx, node.outputs[0])
        if not _uniform(a, b, y) or a is None or b is None or y is None:
            continue
        done += _fuse(ctx, node, [a, b], y, f"QLinear{node.op_type}", [])
    return done


_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


@anchored("AveragePool", "GlobalAveragePool", needs=QDQ_OPS)
def fuse_qdq_pool(ctx: FusionContext) -> int:
    """Replace ``DQ -> (Global)AveragePool -> Q`` with QLinear(Global)AveragePool;
    returns fusions done."""
    done = 0
    for node in list(ctx.graph):
        if node.graph is not ctx.graph or not op(node, "AveragePool", "GlobalAveragePool"):
            continue
        x, y = dq_of(ctx, node.inputs[0]), q_after(ctx, node.outputs[0])
        if not _uniform(x, y) or x is None or y is None:
            continue
        dilations = attr(node, "dilations")
        if dilations is not None and any(int(d) != 1 for d in dilations):  # type: ignore[attr-defined]
            continue  # QLinearAveragePool has no dilations
        attrs = [a for name, a in node.attributes.items() if name in _POOL_ATTRS]
        attrs.append(ir.AttrInt64("channels_last", 0))
        done += _fuse(ctx, node, [x], y, f"QLinear{node.op_type}", attrs)
    return done


@anchored("Concat", needs=QDQ_OPS)
def fuse_qdq_concat(ctx: FusionContext) -> int:
    """Replace ``DQ... -> Concat -> Q`` with QLinearConcat; returns fusions done."""
    done = 0
    for node in list(ctx.graph):
        if node.graph is not ctx.graph or not op(node, "Concat") or not node.inputs:
            continue
        xs = [dq_of(ctx, v) for v in node.inputs]
        y = q_after(ctx, node.outputs[0])
        if not _uniform(*xs, y) or y is None:
            continue
        ps = [p for p in xs if p is not None]
        axis = [a for name, a in node.attributes.items() if name == "axis"]
        done += _fuse(ctx, node, ps, y, "QLinearConcat", axis)
    return done


@anchored("Sigmoid", "LeakyRelu", needs=QDQ_OPS)
def fuse_qdq_unary(ctx: FusionContext) -> int:
    """Replace ``DQ -> Sigmoid/LeakyRelu -> Q`` with QLinearSigmoid/QLinearLeakyRelu;
    returns fusions done."""
    done = 0
    for node in ctx.nodes("Sigmoid", "LeakyRelu"):
        if node.graph is not ctx.graph or not op(node, "Sigmoid", "LeakyRelu"):
            continue
        x, y = dq_of(ctx, node.inputs[0]), q_after(ctx, node.outputs[0])
        if not _uniform(x, y) or x is None or y is None:
            continue
        attrs: list[ir.Attr] = []
        if node.op_type == "LeakyRelu":
            attrs.append(ir.AttrFloat32("alpha", float(attr(node, "alpha", 0.01))))  # type: ignore[arg-type]
        done += _fuse(ctx, node, [x], y, f"QLinear{node.op_type}", attrs)
    return done
