"""Fuse ``Gemm -> activation`` into ``com.ortcore.FusedGemm`` and
``MatMul``/``FusedMatMul`` ``-> activation`` into ``FusedMatMul``."""

from __future__ import annotations

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, activation_of, anchored, attr, op

__all__ = ["GemmActivationFusionPass", "fuse_gemm_activation"]


@anchored("Gemm", "MatMul", "FusedMatMul")
def fuse_gemm_activation(ctx: FusionContext) -> int:
    """Replace Gemm/MatMul + activation pairs of ``ctx.graph``; returns fusions done."""
    done = 0
    for node in list(ctx.graph):
        if node.graph is not ctx.graph:
            continue
        plain_mm = op(node, "MatMul")
        fused_mm = node.domain == "com.ortcore" and node.op_type == "FusedMatMul"
        if not (op(node, "Gemm") or plain_mm or fused_mm):
            continue
        if fused_mm and attr(node, "activation", ""):
            continue
        act_node = ctx.sole_user(node.outputs[0])
        if act_node is None or act_node.inputs[0] is not node.outputs[0]:
            continue
        act = activation_of(ctx, act_node)
        if act is None:
            continue
        target = "FusedGemm" if op(node, "Gemm") else "FusedMatMul"
        if not ctx.can_emit([node, act_node], target):
            continue
        drop = ("activation", "activation_params")
        attrs = [a for a in node.attributes.values() if a.name not in drop]
        attrs.append(ir.AttrString("activation", act[0]))
        if act[1]:
            attrs.append(ir.AttrFloat32s("activation_params", act[1]))
        fused = ir.Node(
            "com.ortcore", target, list(node.inputs), attrs,
            name=f"{node.name}_act", num_outputs=1,
        )  # fmt: skip
        ctx.replace([node, act_node], fused, [(act_node.outputs[0], fused.outputs[0])])
        done += 1
    return done


class GemmActivationFusionPass(FusionPass):
    """Fuse Gemm/MatMul + activation into ``FusedGemm``/``FusedMatMul``."""

    fusions = (fuse_gemm_activation,)
