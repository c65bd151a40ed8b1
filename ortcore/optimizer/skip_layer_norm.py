"""Fuse ``Add(x, skip) -> LayerNormalization`` into
``com.ortcore.SkipLayerNormalization``.

The sum stays available: where other nodes read it (a pre-norm residual
stream), the fused node's optional second output replaces it.
"""

from __future__ import annotations

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, anchored, attr, op

__all__ = ["SkipLayerNormFusionPass", "fuse_skip_layer_norm"]


@anchored("LayerNormalization", "FusedLayerNorm")
def fuse_skip_layer_norm(ctx: FusionContext) -> int:
    """Replace Add + LayerNormalization pairs of ``ctx.graph``; returns fusions done."""
    done = 0
    for ln in list(ctx.graph):
        if ln.graph is not ctx.graph:
            continue
        if (ln.domain, ln.op_type) not in (
            ("", "LayerNormalization"),
            ("com.ortcore", "FusedLayerNorm"),
        ):
            continue
        if any(o.uses() or o in ctx.graph.outputs for o in ln.outputs[1:]):
            continue  # Mean / InvStdDev are read
        x = ln.inputs[0]
        add = x.producer() if x is not None else None
        if not op(add, "Add") or add is None or add.graph is not ctx.graph:
            continue
        a, b = add.inputs[0], add.inputs[1]
        if a is None or b is None or ctx.const(a) is not None or ctx.const(b) is not None:
            continue  # a constant addend is a bias, not a skip connection
        params = [v for v in ln.inputs[1:3]]
        if any(v is not None and ctx.const(v) is None for v in params):
            continue  # the fused node goes right after the Add: gamma/beta must exist there
        if not ctx.can_emit([add, ln], "SkipLayerNormalization"):
            continue
        s = add.outputs[0]
        keep_sum = s in ctx.graph.outputs or any(u.node is not ln for u in s.uses())
        fused = ir.Node(
            "com.ortcore", "SkipLayerNormalization", [a, b, *params],
            [ir.AttrInt64("axis", int(attr(ln, "axis", -1))),  # type: ignore[call-overload]
             ir.AttrFloat32("epsilon", float(attr(ln, "epsilon", 1e-5))),  # type: ignore[arg-type]
             ir.AttrInt64("stash_type", int(attr(ln, "stash_type", 1)))],  # type: ignore[call-overload]
            name=f"{ln.name}_skip", num_outputs=2 if keep_sum else 1,
        )  # fmt: skip
        pairs = [(ln.outputs[0], fused.outputs[0])]
        if keep_sum:
            pairs.append((s, fused.outputs[1]))
        # Right after the Add, so every reader of the sum comes after the node.
        ctx.graph.insert_after(add, fused)
        ctx.replace([add, ln], fused, pairs, at=None, inserted=True)
        done += 1
    return done


class SkipLayerNormFusionPass(FusionPass):
    """Fuse Add + LayerNormalization into ``SkipLayerNormalization``."""

    fusions = (fuse_skip_layer_norm,)
