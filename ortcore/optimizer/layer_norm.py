"""Fuse LayerNormalization and RMSNormalization written out in primitives.

LayerNormalization, anchored at the first ReduceMean::

    m = ReduceMean(x); d = x - m; v = ReduceMean(d^2)  (Pow(d, 2) or d * d)
    y = d / Sqrt(v + eps) * gamma [+ beta]

RMSNormalization::

    v = ReduceMean(x^2); y = x / Sqrt(v + eps) * gamma
    (or x * Reciprocal(Sqrt(v + eps)) * gamma)

Both reduce over the last axis only. The result is onnx's op where the
model's opset has it (17 and 23), else ``com.ortcore.FusedLayerNorm`` /
``FusedRMSNorm``.
"""

from __future__ import annotations

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, anchored, attr, op

__all__ = ["NormalizationFusionPass", "fuse_layer_norm", "fuse_rms_norm"]


def _last_axis_mean(ctx: FusionContext, node: ir.Node | None) -> bool:
    """Whether ``node`` is ReduceMean over the last axis, keeping dims."""
    if not op(node, "ReduceMean") or node is None or not attr(node, "keepdims", 1):
        return False
    x = node.inputs[0]
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = ctx.const(node.inputs[1])
        if axes is None:
            return False
        axes_list = [int(a) for a in axes.reshape(-1)]
    else:
        axes_list = list(attr(node, "axes", []) or [])  # type: ignore[call-overload]
    if len(axes_list) != 1:
        return False
    rank = None if x is None or x.shape is None else len(x.shape)
    return axes_list[0] == -1 or (rank is not None and axes_list[0] == rank - 1)


def _square_of(ctx: FusionContext, v: ir.Value | None) -> tuple[ir.Value, ir.Node] | None:
    """``(d, node)`` if ``v`` is ``Pow(d, 2)`` or ``d * d``."""
    n = v.producer() if v is not None else None
    if n is None:
        return None
    if op(n, "Pow") and ctx.scalar(n.inputs[1]) == 2.0 and n.inputs[0] is not None:
        return n.inputs[0], n
    if op(n, "Mul") and n.inputs[0] is n.inputs[1] and n.inputs[0] is not None:
        return n.inputs[0], n
    return None


def _inv_std_tail(
    ctx: FusionContext, var_mean: ir.Node, numerator: ir.Value
) -> tuple[float, list[ir.Node], ir.Node] | None:
    """``(eps, nodes, normalized)`` for ``numerator / Sqrt(var + eps)`` (or the
    Reciprocal-Mul form) after ``var_mean``; ``normalized`` makes the result."""
    add = ctx.sole_user(var_mean.outputs[0])
    if not op(add, "Add") or add is None:
        return None
    eps_v = add.inputs[1] if add.inputs[0] is var_mean.outputs[0] else add.inputs[0]
    eps = ctx.scalar(eps_v)
    if eps is None:
        return None
    sqrt = ctx.sole_user(add.outputs[0])
    if not op(sqrt, "Sqrt") or sqrt is None:
        return None
    nxt = ctx.sole_user(sqrt.outputs[0])
    if op(nxt, "Div") and nxt is not None and nxt.inputs[0] is numerator:
        return eps, [add, sqrt, nxt], nxt
    if op(nxt, "Reciprocal") and nxt is not None:
        mul = ctx.sole_user(nxt.outputs[0])
        if op(mul, "Mul") and mul is not None and numerator in mul.inputs:
            return eps, [add, sqrt, nxt, mul], mul
    return None


def _affine(
    ctx: FusionContext, normalized: ir.Node, with_beta: bool
) -> tuple[ir.Value, ir.Value | None, list[ir.Node]] | None:
    """``(gamma, beta, nodes)`` of ``* gamma [+ beta]`` after ``normalized``."""
    mul = ctx.sole_user(normalized.outputs[0])
    if not op(mul, "Mul") or mul is None:
        return None
    y = normalized.outputs[0]
    gamma = mul.inputs[1] if mul.inputs[0] is y else mul.inputs[0]
    g = ctx.const(gamma)
    if gamma is None or g is None or g.ndim != 1:
        return None
    if not with_beta:
        return gamma, None, [mul]
    add = ctx.sole_user(mul.outputs[0])
    if op(add, "Add") and add is not None:
        beta = add.inputs[1] if add.inputs[0] is mul.outputs[0] else add.inputs[0]
        b = ctx.const(beta)
        if b is not None and b.shape == g.shape:
            return gamma, beta, [mul, add]
    return gamma, None, [mul]


@anchored("ReduceMean")
def fuse_layer_norm(ctx: FusionContext) -> int:
    """Replace LayerNormalization patterns of ``ctx.graph``; returns fusions done."""
    done = 0
    domain, name = (
        ("", "LayerNormalization") if ctx.opset >= 17 else ("com.ortcore", "FusedLayerNorm")
    )
    for mean in list(ctx.graph):
        if mean.graph is not ctx.graph or not _last_axis_mean(ctx, mean):
            continue
        x = mean.inputs[0]
        sub = ctx.sole_user(mean.outputs[0])
        if not op(sub, "Sub") or sub is None or list(sub.inputs) != [x, mean.outputs[0]]:
            continue
        d = sub.outputs[0]
        users = {u.node for u in d.uses()}
        if len(users) != 2:
            continue
        square = next((n for n in users if op(n, "Pow", "Mul")), None)
        sq = _square_of(ctx, square.outputs[0]) if square is not None else None
        if sq is None or sq[0] is not d:
            continue
        var_mean = ctx.sole_user(square.outputs[0])  # type: ignore[union-attr]
        if var_mean is None or not _last_axis_mean(ctx, var_mean):
            continue
        tail = _inv_std_tail(ctx, var_mean, d)
        if tail is None:
            continue
        eps, inv_nodes, normalized = tail
        aff = _affine(ctx, normalized, with_beta=True)
        if aff is None:
            continue
        gamma, beta, aff_nodes = aff
        nodes = [mean, sub, sq[1], var_mean, *inv_nodes, *aff_nodes]
        last = aff_nodes[-1]
        if not ctx.private(nodes, keep=last.outputs[0]):
            continue
        if not ctx.can_emit(nodes, name, domain):
            continue
        inputs = [x, gamma] + ([beta] if beta is not None else [])
        fused = ir.Node(
            domain, name, inputs,
            [ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", eps)],
            name=f"{mean.name}_layer_norm", num_outputs=1,
        )  # fmt: skip
        ctx.replace(nodes, fused, [(last.outputs[0], fused.outputs[0])])
        done += 1
    return done


@anchored("ReduceMean")
def fuse_rms_norm(ctx: FusionContext) -> int:
    """Replace RMSNormalization patterns of ``ctx.graph``; returns fusions done."""
    done = 0
    domain, name = ("", "RMSNormalization") if ctx.opset >= 23 else ("com.ortcore", "FusedRMSNorm")
    for mean in list(ctx.graph):
        if mean.graph is not ctx.graph or not _last_axis_mean(ctx, mean):
            continue
        sq = _square_of(ctx, mean.inputs[0])
        if sq is None:
            continue
        x, square = sq
        if ctx.sole_user(square.outputs[0]) is not mean:
            continue
        tail = _inv_std_tail(ctx, mean, x)
        if tail is None:
            continue
        eps, inv_nodes, normalized = tail
        aff = _affine(ctx, normalized, with_beta=False)
        if aff is None:
            continue
        gamma, _, aff_nodes = aff
        nodes = [square, mean, *inv_nodes, *aff_nodes]
        last = aff_nodes[-1]
        if not ctx.private(nodes, keep=last.outputs[0]):
            continue
        if not ctx.can_emit(nodes, name, domain):
            continue
        fused = ir.Node(
            domain, name, [x, gamma],
            [ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", eps)],
            name=f"{mean.name}_rms_norm", num_outputs=1,
        )  # fmt: skip
        ctx.replace(nodes, fused, [(last.outputs[0], fused.outputs[0])])
        done += 1
    return done


class NormalizationFusionPass(FusionPass):
    """Fuse LayerNormalization, then RMSNormalization, from their primitives."""

    fusions = (
        fuse_layer_norm,
        fuse_rms_norm,
    )
