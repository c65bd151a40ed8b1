"""Fold per-channel affine ops that follow a Conv into the Conv's weights.

``Conv -> BatchNormalization`` (inference), ``Conv -> Mul(c)`` and
``Conv -> Add(c)`` with constant per-output-channel (or scalar) ``c`` become
one Conv with rescaled weights and a new bias. Applied at the extended level,
where onnxruntime applies its ConvBNFusion, ConvMulFusion and ConvAddFusion.
Every parameter folded (the weight, the bias, ``c``, the BatchNormalization
statistics) must be a constant no feed may replace: folding an overridable
one would bake in numbers the user may change at run time.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
import onnx_ir as ir

from ._common import constant
from ._pass import OptimizerPass
from .constant_folding import const_tensor

__all__ = ["ConvAffineFoldingPass", "fold_conv_affine"]


def _per_channel(c: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """``c`` as a length-``channels`` vector if it broadcasts per output channel."""
    if c.size == 1:
        return np.full(channels, c.reshape(()).item(), dtype=c.dtype)
    shape = c.shape
    # Broadcasting aligns ``c`` to the right of (N, M, *spatial): every spatial
    # dim must be 1, the next one M, and anything before it 1.
    spatial = rank - 2
    if len(shape) < spatial + 1:
        return None
    if any(d != 1 for d in shape[len(shape) - spatial :]):
        return None
    lead = shape[: len(shape) - spatial]
    if lead[-1] != channels or any(d != 1 for d in lead[:-1]):
        return None
    return c.reshape(channels)


def _affine_of(
    node: ir.Node, conv_out: ir.Value, channels: int, rank: int, overridable: Set[ir.Value]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(scale, shift)`` per channel if ``node`` is a foldable affine op on ``conv_out``."""
    if node.domain != "":
        return None
    if node.op_type == "BatchNormalization":
        if len(node.outputs) > 1 and any(o.uses() for o in node.outputs[1:]):
            return None
        if (
            node.attributes.get("training_mode") is not None
            and node.attributes["training_mode"].value
        ):
            return None
        if node.inputs[0] is not conv_out:
            return None
        params = [constant(v, overridable) for v in node.inputs[1:5]]
        if any(p is None or p.shape != (channels,) for p in params):
            return None
        scale, bias, mean, var = (np.asarray(p, np.float64) for p in params)  # type: ignore[arg-type]
        eps_attr = node.attributes.get("epsilon")
        eps = float(eps_attr.value) if eps_attr is not None else 1e-5
        k = scale / np.sqrt(var + eps)
        return k, bias - mean * k
    if node.op_type in ("Mul", "Add") and len(node.inputs) == 2:
        other = node.inputs[1] if node.inputs[0] is conv_out else node.inputs[0]
        if other is conv_out:
            return None
        c = constant(other, overridable)
        if c is None or c.ndim > rank:
            return None
        vec = _per_channel(c, channels, rank)
        if vec is None:
            return None
        vec = vec.astype(np.float64)
        if node.op_type == "Mul":
            return vec, np.zeros(channels)
        return np.ones(channels), vec
    return None


def fold_conv_affine(graph: ir.Graph, overridable: Set[ir.Value] = frozenset()) -> int:
    """Fold BatchNormalization/Mul/Add after Conv into the Conv; returns folds done.

    Args:
        overridable: initializers a feed may replace; never folded.
    """
    outputs = set(graph.outputs)
    folded = 0
    for conv in list(graph):
        if conv.domain != "" or conv.op_type != "Conv" or conv.graph is not graph:
            continue
        while True:
            w_val = conv.inputs[1]
            w = constant(w_val, overridable)
            if w is None or w.dtype not in (np.float32, np.float64) or w.ndim < 3:
                break
            y = conv.outputs[0]
            uses = list(y.uses())
            if len(uses) != 1 or y in outputs:
                break
            nxt = uses[0].node
            if nxt.graph is not graph:
                break
            channels = w.shape[0]
            affine = _affine_of(nxt, y, channels, w.ndim, overridable)
            if affine is None:
                break
            k, shift = affine
            b_val = conv.inputs[2] if len(conv.inputs) > 2 else None
            b = constant(b_val, overridable) if b_val is not None else np.zeros(channels, w.dtype)
            if b is None:
                break
            # scale in the weight's own dtype: a float64 copy of all of a
            # CNN's weights costs more than the rest of session creation
            new_w = np.multiply(w, k.astype(w.dtype).reshape(-1, *([1] * (w.ndim - 1))))
            new_b = (b.astype(np.float64) * k + shift).astype(w.dtype)
            assert w_val is not None
            conv.replace_input_with(1, _initializer(graph, f"{w_val.name}_folded", new_w))
            if len(conv.inputs) < 3:
                conv.resize_inputs(3)
            conv.replace_input_with(2, _initializer(graph, f"{y.name}_bias_folded", new_b))
            out = nxt.outputs[0]
            ir.convenience.replace_all_uses_with(out, y, replace_graph_outputs=out in outputs)
            if out in outputs:
                name = out.name
                graph.remove(nxt, safe=True)
                y.name = name
                outputs = set(graph.outputs)
            else:
                graph.remove(nxt, safe=True)
            folded += 1
    return folded


def _initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    base, i = name, 0
    while name in graph.initializers:
        i += 1
        name = f"{base}_{i}"
    v = ir.Value(
        name=name,
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
        const_value=const_tensor(array),
    )
    graph.register_initializer(v)
    return v


class ConvAffineFoldingPass(OptimizerPass):
    """Fold BatchNormalization/Mul/Add into a preceding Conv (:func:`fold_conv_affine`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`fold_conv_affine` on the main graph."""
        return fold_conv_affine(model.graph, self.overridable)
