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

The shapes come from shape inference and the Reshapes' constant targets,
checked against each other, so a pattern that is not a channel shuffle of
static shapes is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ..fused_ops import DOMAIN
from ._common import attr, attr_int, known_shape
from ._fusion import FusionContext, FusionPass, op
from .conv_folding import new_initializer

__all__ = ["ChannelShuffleFusionPass", "fuse_conv_shuffle", "shuffle_order"]


def _reshaped(shape: Sequence[int], target: np.ndarray, allowzero: bool) -> tuple[int, ...] | None:
    """The shape a Reshape of a ``shape`` tensor to ``target`` makes (0 copies
    the input's dim unless ``allowzero``, one -1 is inferred), else None."""
    if target.ndim != 1 or target.dtype.kind not in "iu":
        return None
    dims = [int(d) for d in target]
    out: list[int] = []
    for i, d in enumerate(dims):
        if d == 0 and not allowzero:
            if i >= len(shape):
                return None
            d = shape[i]
        out.append(d)
    if out.count(-1) > 1 or any(d < -1 for d in out):
        return None
    total = int(np.prod(shape))
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1]))
        if rest == 0 or total % rest:
            return None
        out[out.index(-1)] = total // rest
    return tuple(out) if int(np.prod(out)) == total else None


def _shuffle_after(ctx: FusionContext, y: ir.Value) -> tuple[list[ir.Node], int] | None:
    """The Reshape, Transpose and Reshape that shuffle the channels of ``y``
    (each read by the next alone) and the shuffle's group count, else None."""
    shape = known_shape(y)
    if shape is None or len(shape) < 3:
        return None
    n, c, spatial = shape[0], shape[1], shape[2:]
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
    split = _target(ctx, first, shape)
    if split is None or len(split) != len(shape) + 1 or split[0] != n or split[3:] != spatial:
        return None
    g = split[1]
    if g <= 1 or g >= c or c % g or split[2] != c // g:
        return None
    rank = len(split)
    perm = attr(transpose, "perm")
    if not isinstance(perm, Sequence) or [int(p) for p in perm] != [0, 2, 1, *range(3, rank)]:
        return None
    swapped = (n, c // g, g, *spatial)
    if _target(ctx, last, swapped) != shape:
        return None
    return nodes, g


def _target(ctx: FusionContext, reshape: ir.Node, shape: Sequence[int]) -> tuple[int, ...] | None:
    """What ``reshape`` makes of a tensor of ``shape``, its target a constant."""
    if len(reshape.inputs) != 2:
        return None
    target = ctx.const(reshape.inputs[1])
    if target is None:
        return None
    return _reshaped(shape, target, bool(attr_int(reshape, "allowzero", 0)))


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
        shuffle, groups = found
        channels = known_shape(conv.outputs[0])[1]  # type: ignore[index]
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
