"""Fold ShuffleNet's channel shuffle into the Conv before it.

ShuffleNet's units shuffle the channels of a (grouped) Conv's output with
three nodes: a Reshape from (N, C, ...) to (N, g, C / g, ...), a Transpose
of axes 1 and 2, and a Reshape back to (N, C, ...). Channel
``j * g + i`` of the result is channel ``i * C / g + j`` of the Conv's
output: a fixed permutation of the output channels, which costs a copy of
the tensor (and three nodes) per unit.

:func:`fuse_conv_shuffle` folds it into the Conv (or FusedConv) that makes
the tensor, when that Conv's output is read by the first Reshape alone and
each node of the pattern by the next one alone:

* a Conv of one group whose weight (and bias) are constants gets its
  weight's output channels (and the bias) in the shuffled order: the same
  op, for any provider, and the shuffle costs nothing;
* any other (a grouped Conv: ShuffleNet's grouped 1x1 Convs) becomes a
  ``com.ortcore.FusedConvShuffle`` where its provider has a kernel for it;
  the CPU provider's writes a grouped 1x1 Conv's rows in the shuffled order
  from its GEMM, so the copy goes.

The Conv output's dims but the batch must be known (from shape
inference), and the Reshapes' constant targets must split its channels
and give them back as they were, keeping the batch (0, -1 or its value):
a pattern that is not exactly a channel shuffle is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ..fused_ops import DOMAIN
from ..nodeinfo import static_shape
from ._common import attr, attr_int, reshaped
from ._fusion import FusionContext, FusionPass, anchored, op
from .conv_folding import new_initializer

__all__ = ["ChannelShuffleFusionPass", "fuse_conv_shuffle", "shuffle_order"]


_PROBE_BATCHES = (2, 3)
"""The batches the Reshapes are resolved for when shape inference does not
know the batch. A Reshape's output is the same function of every batch (a
0 copies it, a -1 scales with it), so targets that keep two batches and
split the channels alike for both keep every batch."""


def _target(ctx: FusionContext, reshape: ir.Node) -> tuple[np.ndarray, bool] | None:
    """The constant target of ``reshape`` and its ``allowzero``, else None."""
    if len(reshape.inputs) != 2:
        return None
    target = ctx.const(reshape.inputs[1])
    if target is None or target.ndim != 1 or target.dtype.kind not in "iu":
        return None
    return target, bool(attr_int(reshape, "allowzero", 0))


def _groups(
    split: tuple[np.ndarray, bool],
    back: tuple[np.ndarray, bool],
    n: int | None,
    c: int,
    spatial: list[int],
) -> int | None:
    """The group count of a channel shuffle whose Reshapes have targets
    ``split`` and ``back`` (each with its ``allowzero``), of a tensor of
    batch ``n`` (None: not known), ``c`` channels and ``spatial`` dims,
    else None."""
    found: set[int] = set()
    for batch in (n,) if n is not None else _PROBE_BATCHES:
        parts = reshaped((batch, c, *spatial), *split)
        if parts is None or len(parts) != len(spatial) + 3 or parts[0] != batch:
            return None
        g = parts[1]
        if g <= 1 or g >= c or c % g or parts[2:] != (c // g, *spatial):
            return None
        if reshaped((batch, c // g, g, *spatial), *back) != (batch, c, *spatial):
            return None
        found.add(g)
    return found.pop() if len(found) == 1 else None


def _shuffle_after(
    ctx: FusionContext, y: ir.Value
) -> tuple[list[ir.Node], int, int] | None:
    """The Reshape, Transpose and Reshape that shuffle the channels of ``y``
    (each read by the next alone), the shuffle's group count and ``y``'s
    channels, else None.

    ``y``'s dims but the batch must be known; the Reshapes' targets must
    name the channel split and the spatial dims as they are, and keep the
    batch (0, -1 or its value)."""
    shape = static_shape(y)
    known = [d for d in (shape or ())[1:] if d is not None]
    if shape is None or len(shape) < 3 or len(known) != len(shape) - 1 or min(known) <= 0:
        return None
    n, c, spatial = shape[0], known[0], known[1:]
    nodes: list[ir.Node] = []
    value = y
    for step in ("Reshape", "Transpose", "Reshape"):
        node = ctx.sole_user(value)
        if not op(node, step) or node is None or node.inputs[0] is not value:
            return None
        if len(node.outputs) != 1:
            return None
        nodes.append(node)
        value = node.outputs[0]
    first, transpose, last = nodes
    split, back = _target(ctx, first), _target(ctx, last)
    if split is None or back is None:
        return None
    g = _groups(split, back, n, c, spatial)
    if g is None:
        return None
    perm = attr(transpose, "perm")
    rank = len(shape) + 1
    if not isinstance(perm, Sequence) or [int(p) for p in perm] != [0, 2, 1, *range(3, rank)]:
        return None
    return nodes, g, c


def shuffle_order(channels: int, groups: int) -> np.ndarray:
    """The channel shuffle as a gather: channel ``k`` of the shuffled tensor
    is channel ``order[k]`` of the tensor before."""
    k = np.arange(channels)
    return (k % groups) * (channels // groups) + k // groups


def _permuted_weights(
    ctx: FusionContext, conv: ir.Node, groups: int, channels: int
) -> list[ir.Value | None] | None:
    """A one-group Conv's inputs with its constant weight's output channels
    (and its constant bias) in the shuffled order, else None."""
    if attr_int(conv, "group", 1) != 1 or len(conv.inputs) < 2:
        return None
    w_val = conv.inputs[1]
    w = ctx.const(w_val)
    if w is None or w_val is None or w.ndim < 1 or w.shape[0] != channels:
        return None
    b_val = conv.inputs[2] if len(conv.inputs) > 2 else None
    b = ctx.const(b_val) if b_val is not None else None
    if b_val is not None and (b is None or b.shape != (channels,)):
        return None
    order = shuffle_order(channels, groups)
    inputs: list[ir.Value | None] = [conv.inputs[0]]
    inputs.append(new_initializer(ctx.graph, f"{w_val.name}_shuffled", w[order]))
    if b_val is not None and b is not None:
        inputs.append(new_initializer(ctx.graph, f"{b_val.name}_shuffled", b[order]))
    return inputs


@anchored("Conv", "FusedConv")
def fuse_conv_shuffle(ctx: FusionContext) -> int:
    """Fold each channel shuffle (Reshape, Transpose, Reshape) of a Conv's
    or FusedConv's output into it (see the module docstring); returns the
    shuffles folded."""
    done = 0
    for conv in list(ctx.graph):
        if conv.graph is not ctx.graph or len(conv.outputs) != 1:
            continue
        fused_conv = conv.domain == DOMAIN and conv.op_type == "FusedConv"
        if not (op(conv, "Conv") or fused_conv) or len(conv.inputs) > 3:
            continue
        found = _shuffle_after(ctx, conv.outputs[0])
        if found is None:
            continue
        shuffle, groups, channels = found
        nodes = [conv, *shuffle]
        out = shuffle[-1].outputs[0]
        permuted = None
        if ctx.can_emit(nodes, conv.op_type, conv.domain):
            permuted = _permuted_weights(ctx, conv, groups, channels)
        if permuted is not None:
            new = ir.Node(
                conv.domain, conv.op_type, permuted, list(conv.attributes.values()),
                version=conv.version, name=conv.name, num_outputs=1,
            )  # fmt: skip
        elif ctx.can_emit(nodes, "FusedConvShuffle"):
            attrs = [*conv.attributes.values(), ir.AttrInt64("shuffle_groups", groups)]
            name = conv.name if fused_conv else f"{conv.name}_fused"
            new = ir.Node(
                DOMAIN, "FusedConvShuffle", list(conv.inputs), attrs, name=name, num_outputs=1
            )
        else:
            continue
        ctx.replace(nodes, new, [(out, new.outputs[0])])
        done += 1
    return done


class ChannelShuffleFusionPass(FusionPass):
    """Fold channel shuffles into the Convs before them (after the Conv +
    activation fusions, so that a FusedConv keeps its activation)."""

    fusions = (fuse_conv_shuffle,)
