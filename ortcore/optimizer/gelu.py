"""Fuse GELU written out in primitives into one Gelu, and ``Add(bias) -> Gelu``
into ``com.ortcore.BiasGelu``.

Forms matched, anchored at the Erf or Tanh node (``h = 1 + Erf(x / sqrt 2)``
with ``x * 0.7071`` for the division; tanh form ``h = 1 + Tanh(sqrt(2/pi) *
(x + 0.044715 * x^3))`` with the cube as ``Pow(x, 3)`` or ``x * (x * x)``)::

    (x * h) * 0.5        x * (h * 0.5)        (x * 0.5) * h

The result is onnx's Gelu (opset 20 and later) or ``com.ortcore.FusedGelu``.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, anchored, op, other_input

__all__ = ["GeluFusionPass", "fuse_bias_gelu", "fuse_gelu"]


def _close(v: float | None, want: float, rtol: float = 1e-3) -> bool:
    return v is not None and abs(v - want) <= rtol * abs(want)


def _erf_input(ctx: FusionContext, erf: ir.Node) -> tuple[ir.Value, list[ir.Node]] | None:
    """``x`` and the scaling node if ``erf`` reads ``x / sqrt 2``."""
    pre = erf.inputs[0].producer() if erf.inputs[0] is not None else None
    if op(pre, "Div") and pre is not None and _close(ctx.scalar(pre.inputs[1]), math.sqrt(2)):
        return pre.inputs[0], [pre]  # type: ignore[return-value]
    if op(pre, "Mul") and pre is not None:
        for i in (0, 1):
            if _close(ctx.scalar(pre.inputs[i]), 1 / math.sqrt(2)):
                return pre.inputs[1 - i], [pre]  # type: ignore[return-value]
    return None


def _tanh_input(ctx: FusionContext, tanh: ir.Node) -> tuple[ir.Value, list[ir.Node]] | None:
    """``x`` and the nodes of ``sqrt(2/pi) * (x + 0.044715 * x^3)``."""
    outer = tanh.inputs[0].producer() if tanh.inputs[0] is not None else None
    if not op(outer, "Mul") or outer is None:
        return None
    for i in (0, 1):
        if not _close(ctx.scalar(outer.inputs[i]), math.sqrt(2 / math.pi)):
            continue
        arg = outer.inputs[1 - i]
        inner = arg.producer() if arg is not None else None
        if not op(inner, "Add") or inner is None:
            return None
        for j in (0, 1):
            x, cubic = inner.inputs[j], inner.inputs[1 - j]
            c_node = cubic.producer() if cubic is not None else None
            if x is None:
                continue
            if not op(c_node, "Mul") or c_node is None or x is None:
                continue
            for k in (0, 1):
                if not _close(ctx.scalar(c_node.inputs[k]), 0.044715):
                    continue
                cube = c_node.inputs[1 - k]
                nodes = _cube_of(ctx, x, cube)
                if nodes is not None:
                    return x, [*nodes, c_node, inner, outer]
    return None


def _cube_of(ctx: FusionContext, x: ir.Value, v: ir.Value | None) -> list[ir.Node] | None:
    """The nodes computing ``x^3`` as ``v``: Pow(x, 3) or x * (x * x)."""
    n = v.producer() if v is not None else None
    if n is None:
        return None
    if op(n, "Pow") and n.inputs[0] is x:
        return [n] if ctx.scalar(n.inputs[1]) == 3.0 else None
    if op(n, "Mul"):
        sq = other_input(n, x)
        sq_node = sq.producer() if sq is not None else None
        if op(sq_node, "Mul") and sq_node is not None and list(sq_node.inputs) == [x, x]:
            return [sq_node, n]
    return None


def _tail(ctx: FusionContext, act: ir.Node, x: ir.Value) -> list[ir.Node] | None:
    """The ``1 + act`` and the multiplications by ``x`` and 0.5 after ``act``."""
    one = ctx.sole_user(act.outputs[0])
    if not op(one, "Add") or one is None:
        return None
    if not _close(ctx.scalar(other_input(one, act.outputs[0])), 1.0):
        return None
    h = one.outputs[0]
    m1 = ctx.sole_user(h)
    if not op(m1, "Mul") or m1 is None:
        return None
    other = other_input(m1, h)
    if other is x:  # (x * h) * 0.5
        m2 = ctx.sole_user(m1.outputs[0])
        if op(m2, "Mul") and m2 is not None:
            if _close(ctx.scalar(other_input(m2, m1.outputs[0])), 0.5):
                return [one, m1, m2]
        return None
    if _close(ctx.scalar(other), 0.5):  # x * (h * 0.5)
        m2 = ctx.sole_user(m1.outputs[0])
        if op(m2, "Mul") and m2 is not None and other_input(m2, m1.outputs[0]) is x:
            return [one, m1, m2]
        return None
    half = other.producer() if other is not None else None  # (x * 0.5) * h
    if op(half, "Mul") and half is not None and x in half.inputs:
        if _close(ctx.scalar(other_input(half, x)), 0.5):
            return [half, one, m1]
    return None


@anchored("Erf", "Tanh")
def fuse_gelu(ctx: FusionContext) -> int:
    """Replace GELU patterns of ``ctx.graph``; returns fusions done."""
    done = 0
    domain, name = ("", "Gelu") if ctx.opset >= 20 else ("com.ortcore", "FusedGelu")
    for act in ctx.nodes("Erf", "Tanh"):
        if act.graph is not ctx.graph or not op(act, "Erf", "Tanh"):
            continue
        head = _erf_input(ctx, act) if act.op_type == "Erf" else _tanh_input(ctx, act)
        if head is None:
            continue
        x, pre = head
        tail = _tail(ctx, act, x)
        if tail is None:
            continue
        nodes = [*pre, act, *tail]
        last = tail[-1]
        if not ctx.private(nodes, keep=last.outputs[0]):
            continue
        if not ctx.can_emit(nodes, name, domain):
            continue
        approximate = "none" if act.op_type == "Erf" else "tanh"
        fused = ir.Node(
            domain, name, [x], [ir.AttrString("approximate", approximate)],
            name=f"{act.name}_gelu", num_outputs=1,
        )  # fmt: skip
        ctx.replace(nodes, fused, [(last.outputs[0], fused.outputs[0])], at=last)
        done += 1
    return done


@anchored("Gelu", "FusedGelu")
def fuse_bias_gelu(ctx: FusionContext) -> int:
    """Replace ``Add(x, bias) -> Gelu`` with BiasGelu where ``bias`` is a 1-D constant."""
    done = 0
    for gelu in list(ctx.graph):
        if gelu.graph is not ctx.graph:
            continue
        if (gelu.domain, gelu.op_type) not in (("", "Gelu"), ("com.ortcore", "FusedGelu")):
            continue
        add = gelu.inputs[0].producer() if gelu.inputs[0] is not None else None
        if not op(add, "Add") or add is None or ctx.sole_user(add.outputs[0]) is not gelu:
            continue
        a, b = add.inputs[0], add.inputs[1]
        bias_first = ctx.const(a) is not None and ctx.const(b) is None
        x, bias = (b, a) if bias_first else (a, b)
        c = ctx.const(bias)
        if c is None or c.ndim != 1 or x is None:
            continue
        if not ctx.can_emit([add, gelu], "BiasGelu"):
            continue
        fused = ir.Node(
            "com.ortcore", "BiasGelu", [x, bias], list(gelu.attributes.values()),
            name=f"{gelu.name}_bias", num_outputs=1,
        )  # fmt: skip
        ctx.replace([add, gelu], fused, [(gelu.outputs[0], fused.outputs[0])])
        done += 1
    return done


class GeluFusionPass(FusionPass):
    """Fuse GELU patterns into Gelu, then Add(bias) + Gelu into ``BiasGelu``."""

    fusions = (
        fuse_gelu,
        fuse_bias_gelu,
    )
