"""Fuse a ``Concat`` of Conv outputs along the channels into a chain of
``com.ortcore.FusedConvConcat`` nodes, so that the Convs write their
channels of the joined tensor where they lie and the Concat's copy goes.

Inception's and SqueezeNet's modules end in such a Concat: branches of
Convs (with their activation, after the Conv fusions) joined along the
channels. The first Conv of the chain makes the joined tensor and writes
its channels; each next one takes the last one's output as ``Into`` and
writes its own, in place; the last one's output replaces the Concat's. The
chain orders the Convs (each reads the last one's output), which the
Concat's inputs being read by nothing else makes safe: no node can read a
Conv's output before the chain ends.

DenseNet's blocks hold the other kind of chain: each layer's Concat joins
the last layer's Concat output (which other nodes read too) and the
layer's new channels. :func:`fuse_growing_concat` makes each link of such a
chain a ``com.ortcore.GrowingConcat`` that knows the channels the chain ends
in, so that a kernel can make the whole block's tensor once and have each
link write only its new channels (the joined tensor before it is the
channels before them), where each Concat copied all of the last one.
"""

from __future__ import annotations

import onnx_ir as ir

from ..fused_ops import DOMAIN
from ._common import attr_int
from ._fusion import FusionContext, FusionPass, anchored, op

__all__ = ["ConvConcatFusionPass", "fuse_conv_concat", "fuse_growing_concat"]

def _conv_of(ctx: FusionContext, v: ir.Value, cat: ir.Node) -> ir.Node | None:
    """The Conv or FusedConv producing ``v`` if the Concat ``cat`` is its only reader."""
    node = v.producer()
    if node is None or node.graph is not ctx.graph or ctx.sole_user(v) is not cat:
        return None
    fused = node.domain == DOMAIN and node.op_type == "FusedConv"
    return node if (op(node, "Conv") or fused) and len(node.outputs) == 1 else None


def _channels(v: ir.Value) -> tuple[int, tuple[int, ...]] | None:
    """``(channels, the other dims)`` of a value of static shape, rank 3 or more."""
    if v.shape is None:
        return None
    dims = list(v.shape)
    if len(dims) < 3 or not all(isinstance(d, int) for d in dims):
        return None
    return int(dims[1]), (int(dims[0]), *(int(d) for d in dims[2:]))  # type: ignore[arg-type]


@anchored("Concat")
def fuse_conv_concat(ctx: FusionContext) -> int:
    """Replace each Concat along axis 1 of two or more distinct Conv or
    FusedConv outputs (static shapes, one dtype, read by the Concat alone)
    with a chain of FusedConvConcat; returns the Concats replaced."""
    done = 0
    for cat in list(ctx.graph):
        if cat.graph is not ctx.graph or not op(cat, "Concat") or len(cat.inputs) < 2:
            continue
        ys = [y for y in cat.inputs if y is not None]
        if len(ys) != len(cat.inputs) or len({id(y) for y in ys}) != len(ys):
            continue
        found = [(_conv_of(ctx, y, cat), _channels(y)) for y in ys]
        nodes = [c for c, _ in found if c is not None]
        shapes = [s for _, s in found if s is not None]
        if len(nodes) != len(ys) or len(shapes) != len(ys):
            continue
        rank = len(shapes[0][1]) + 1
        if attr_int(cat, "axis", 1) not in (1, 1 - rank) or len({s[1] for s in shapes}) != 1:
            continue
        if len({y.dtype for y in ys}) != 1 or not ctx.can_emit([*nodes, cat], "FusedConvConcat"):
            continue
        total = sum(s[0] for s in shapes)
        chain: list[ir.Node] = []
        offset = 0
        for conv, shape in zip(nodes, shapes):
            inputs: list[ir.Value | None] = list(conv.inputs)[:3]
            if chain:
                inputs += [None] * (3 - len(inputs)) + [chain[-1].outputs[0]]
            attrs = [*conv.attributes.values()]
            attrs += [ir.AttrInt64("channels", total), ir.AttrInt64("channel_offset", offset)]
            name = conv.name if conv.op_type == "FusedConv" else f"{conv.name}_fused"
            fused = ir.Node(
                DOMAIN, "FusedConvConcat", inputs, attrs, name=name, num_outputs=1
            )
            fused.outputs[0].shape = cat.outputs[0].shape
            fused.outputs[0].type = cat.outputs[0].type
            ctx.graph.insert_before(cat, fused)
            chain.append(fused)
            offset += shape[0]
        last = chain[-1]
        ctx.replace([*nodes, cat], last, [(cat.outputs[0], last.outputs[0])], inserted=True)
        ctx.assign_like(chain[:-1], last)
        done += 1
    return done


def _link(cat: ir.Node) -> int | None:
    """The output channels of a Concat of two distinct inputs along axis 1
    whose output's channel count is static, else None."""
    if not op(cat, "Concat") or len(cat.inputs) != 2 or None in cat.inputs:
        return None
    if cat.inputs[0] is cat.inputs[1]:
        return None
    shape = cat.outputs[0].shape
    if shape is None or len(shape) < 2 or not isinstance(shape[1], int):
        return None
    return int(shape[1]) if attr_int(cat, "axis", 1) in (1, 1 - len(shape)) else None


@anchored("Concat")
def fuse_growing_concat(ctx: FusionContext) -> int:
    """Replace each chain of two or more Concats along axis 1, each joining
    the last one's output and one more input, with GrowingConcat nodes whose
    ``capacity`` is the last one's channels; returns the Concats replaced.
    A Concat whose output starts two such Concats ends its chain there
    (each one then starts its own), and so does one whose output is a graph
    output (the caller gets outputs that share no memory)."""
    channels = {cat: c for cat in ctx.graph if (c := _link(cat)) is not None}
    outputs = set(ctx.graph.outputs)
    nexts: dict[ir.Node, list[ir.Node]] = {}
    for cat in channels:
        prev = cat.inputs[0].producer()  # type: ignore[union-attr]
        if prev in channels and prev is not cat and prev.outputs[0] not in outputs:
            nexts.setdefault(prev, []).append(cat)
    follows = {nxt[0] for nxt in nexts.values() if len(nxt) == 1}  # links, not starts
    done = 0
    for start in channels:
        if start in follows:
            continue
        chain = [start]
        while len(nexts.get(chain[-1], ())) == 1:
            chain.append(nexts[chain[-1]][0])
        if len(chain) < 2 or not ctx.can_emit(chain, "GrowingConcat"):
            continue
        capacity = channels[chain[-1]]
        for cat in chain:
            attrs = [ir.AttrInt64("capacity", capacity)]
            grown = ir.Node(
                DOMAIN, "GrowingConcat", list(cat.inputs), attrs, name=cat.name, num_outputs=1
            )
            ctx.replace([cat], grown, [(cat.outputs[0], grown.outputs[0])])
            done += 1
    return done


class ConvConcatFusionPass(FusionPass):
    """Fuse Concats of Conv outputs into FusedConvConcat chains (after the
    Conv + activation fusions, so that the chains keep the activations),
    then chains of growing Concats into GrowingConcat links."""

    fusions = (fuse_conv_concat, fuse_growing_concat)
