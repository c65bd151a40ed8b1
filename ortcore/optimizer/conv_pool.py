"""Fuse a MaxPool of a Conv's output into ``com.ortcore.FusedConvPool``.

A network's first layers are a Conv (with its activation, after the Conv
fusions) whose output a MaxPool alone reads: SqueezeNet's 3 -> 64 Conv on
the 224x224 image, ResNet's and Inception's 7x7 stride-2 Convs, each
followed by a 3x3 stride-2 pool. The Conv's output is the network's largest
tensor (64 x 111 x 111 floats, 3 MB, in SqueezeNet), written to memory once
and read back by the pool. A provider's kernel for the fused node can pool
the Conv's rows while they are in its cache, so that only the pooled tensor
(a quarter of the size) is written.

:func:`fuse_conv_pool` fuses where the Conv (or FusedConv) has one output,
read by the MaxPool alone (not a graph output), and the MaxPool has no
Indices output and explicit pads (``auto_pad`` NOTSET): its
``kernel_shape``, ``strides``, ``pads``, ``dilations`` and ``ceil_mode``
become the fused node's ``pool_*`` attributes.
"""

from __future__ import annotations

import onnx_ir as ir

from ..fused_ops import DOMAIN, POOL_ATTRIBUTES
from ._common import attr
from ._fusion import FusionContext, FusionPass, anchored, op

__all__ = ["ConvPoolFusionPass", "fuse_conv_pool"]


def _pool_after(ctx: FusionContext, conv: ir.Node) -> ir.Node | None:
    """The MaxPool that alone reads ``conv``'s output, if it can be fused."""
    pool = ctx.sole_user(conv.outputs[0])
    if not op(pool, "MaxPool") or pool is None or pool.inputs[0] is not conv.outputs[0]:
        return None
    if len(pool.outputs) != 1 or str(attr(pool, "auto_pad") or "NOTSET") != "NOTSET":
        return None
    kernel = pool.attributes.get("kernel_shape")
    return pool if kernel is not None and len(kernel.as_ints()) >= 1 else None


@anchored("Conv", "FusedConv")
def fuse_conv_pool(ctx: FusionContext) -> int:
    """Replace each Conv or FusedConv whose output only a MaxPool reads (see
    the module docstring), and the MaxPool, with a FusedConvPool; returns
    the pairs fused."""
    done = 0
    for conv in list(ctx.graph):
        if conv.graph is not ctx.graph or len(conv.outputs) != 1 or len(conv.inputs) > 3:
            continue
        fused_conv = conv.domain == DOMAIN and conv.op_type == "FusedConv"
        if not (op(conv, "Conv") or fused_conv):
            continue
        pool = _pool_after(ctx, conv)
        if pool is None or not ctx.can_emit([conv, pool], "FusedConvPool"):
            continue
        attrs = list(conv.attributes.values())
        for fused_name, name in POOL_ATTRIBUTES.items():
            value = pool.attributes.get(name)
            if value is None:
                continue
            if value.type == ir.AttributeType.INTS:
                attrs.append(ir.AttrInt64s(fused_name, list(value.as_ints())))
            else:
                attrs.append(ir.AttrInt64(fused_name, value.as_int()))
        name = (conv.name or "") if fused_conv else f"{conv.name or ''}_fused"
        new = ir.Node(DOMAIN, "FusedConvPool", list(conv.inputs), attrs, name=name,
                      num_outputs=1)  # fmt: skip
        ctx.replace([conv, pool], new, [(pool.outputs[0], new.outputs[0])])
        done += 1
    return done


class ConvPoolFusionPass(FusionPass):
    """Fuse MaxPools into the Convs before them (after the Conv + activation
    fusions, so that a FusedConv keeps its activation)."""

    fusions = (fuse_conv_pool,)
