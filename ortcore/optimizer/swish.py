"""Fuse Swish written out in primitives, ``x * Sigmoid(x)`` (SiLU) or
``x * Sigmoid(alpha * x)`` (QuickGelu, alpha 1.702), into one Swish.

Forms matched, anchored at the Sigmoid, either operand order of each Mul,
``alpha`` a constant scalar::

    Mul(x, Sigmoid(x))                 alpha = 1
    Mul(x, Sigmoid(Mul(x, alpha)))

The result is onnx's Swish (opset 24 and later) or ``com.ortcore.FusedSwish``.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, anchored, op, other_input

__all__ = ["SwishFusionPass", "fuse_swish"]


def _scale(ctx: FusionContext, c: ir.Value | None, x: ir.Value | None) -> float | None:
    """The finite constant scalar ``c`` if ``x * c`` has ``x``'s shape."""
    alpha = ctx.scalar(c)
    if alpha is None or not math.isfinite(alpha) or x is None or c is None:
        return None
    rank = len(c.shape) if c.shape is not None else None
    if rank != 0 and (rank is None or x.shape is None or len(x.shape) < rank):
        return None  # a [1, 1] constant would broadcast a vector to 2-D
    return alpha


def _sigmoid_input(
    ctx: FusionContext, sig: ir.Node
) -> tuple[ir.Value | None, float, list[ir.Node]]:
    """``(x, alpha, scaling nodes)``: ``sig`` reads ``alpha * x`` (a Mul only
    the Sigmoid reads), else ``x`` itself with alpha 1."""
    arg = sig.inputs[0]
    scale = arg.producer() if arg is not None else None
    if arg is not None and scale is not None and op(scale, "Mul") and ctx.sole_user(arg) is sig:
        for i in (0, 1):
            x = scale.inputs[1 - i]
            alpha = _scale(ctx, scale.inputs[i], x)
            if alpha is not None and x is not None:
                return x, alpha, [scale]
    return arg, 1.0, []


@anchored("Sigmoid")
def fuse_swish(ctx: FusionContext) -> int:
    """Replace Swish patterns of ``ctx.graph``; returns fusions done."""
    done = 0
    domain, name = ("", "Swish") if ctx.opset >= 24 else ("com.ortcore", "FusedSwish")
    for sig in ctx.nodes("Sigmoid"):
        if sig.graph is not ctx.graph or not op(sig, "Sigmoid"):
            continue
        mul = ctx.sole_user(sig.outputs[0])
        if not op(mul, "Mul") or mul is None:
            continue
        x, alpha, pre = _sigmoid_input(ctx, sig)
        if x is None or other_input(mul, sig.outputs[0]) is not x:
            continue
        nodes = [*pre, sig, mul]
        if not ctx.private(nodes, keep=mul.outputs[0]):
            continue
        if not ctx.can_emit(nodes, name, domain):
            continue
        fused = ir.Node(
            domain, name, [x], [ir.AttrFloat32("alpha", alpha)],
            name=f"{sig.name}_swish", num_outputs=1,
        )  # fmt: skip
        ctx.replace(nodes, fused, [(mul.outputs[0], fused.outputs[0])])
        done += 1
    return done


class SwishFusionPass(FusionPass):
    """Fuse ``x * Sigmoid(alpha * x)`` patterns into Swish."""

    fusions = (fuse_swish,)
