"""Fuse ``Conv -> activation`` into ``com.ortcore.FusedConv``.

The activation (Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, Tanh) is applied
in place on the convolution's output, saving one pass over it and one
intermediate buffer, as onnxruntime's ConvActivationFusion does.
"""

from __future__ import annotations

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, activation_of, op

__all__ = ["ConvActivationFusionPass", "fuse_conv_activation"]


def fuse_conv_activation(ctx: FusionContext) -> int:
    """Replace Conv + activation pairs of ``ctx.graph``; returns fusions done."""
    done = 0
    for conv in list(ctx.graph):
        if conv.graph is not ctx.graph or not op(conv, "Conv"):
            continue
        act_node = ctx.sole_user(conv.outputs[0])
        if act_node is None or act_node.inputs[0] is not conv.outputs[0]:
            continue
        act = activation_of(ctx, act_node)
        if act is None or not ctx.can_emit([conv, act_node], "FusedConv"):
            continue
        attrs = [a for a in conv.attributes.values()]
        attrs.append(ir.AttrString("activation", act[0]))
        if act[1]:
            attrs.append(ir.AttrFloat32s("activation_params", act[1]))
        fused = ir.Node(
            "com.ortcore", "FusedConv", list(conv.inputs), attrs,
            name=f"{conv.name}_fused", num_outputs=1,
        )  # fmt: skip
        ctx.replace([conv, act_node], fused, [(act_node.outputs[0], fused.outputs[0])])
        done += 1
    return done


class ConvActivationFusionPass(FusionPass):
    """Fuse Conv + activation into ``FusedConv``."""

    fusions = (fuse_conv_activation,)
