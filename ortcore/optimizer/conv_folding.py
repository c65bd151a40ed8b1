"""Fold per-channel affine ops that follow a Conv into the Conv's weights.

``Conv -> BatchNormalization`` (inference), ``Conv -> Mul(c)`` and
``Conv -> Add(c)`` with constant per-output-channel (or scalar) ``c`` become
one Conv with rescaled weights and a new bias. Applied at the extended level,
where onnxruntime applies its ConvBNFusion, ConvMulFusion and ConvAddFusion.
``BatchNormalization -> Mul(c)`` and ``-> Add(c)`` (a BatchNormalization
that follows no Conv, as in pre-activation networks such as DenseNet, whose
exports often add a per-channel Mul and Add after it) become one
BatchNormalization with a rescaled ``scale`` and ``B``: one pass over the
tensor instead of three.
Every parameter folded (the weight, the bias, ``c``, the BatchNormalization
statistics) must be a constant no feed may replace: folding an overridable
one would bake in numbers the user may change at run time.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
import onnx_ir as ir

from ._common import constant
from ._pass import OptimizerPass, forget_graphs, has_op
from .constant_folding import const_tensor

__all__ = [
    "ConvAffineFoldingPass",
    "fold_batchnorm_affine",
    "fold_conv_affine",
    "new_initializer",
]


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
            nxt = _sole_user(graph, y, outputs)
            if nxt is None:
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
            conv.replace_input_with(1, new_initializer(graph, f"{w_val.name}_folded", new_w))
            if len(conv.inputs) < 3:
                conv.resize_inputs(3)
            conv.replace_input_with(2, new_initializer(graph, f"{y.name}_bias_folded", new_b))
            outputs = _bypass(graph, y, nxt, outputs)
            folded += 1
    return folded


def _sole_user(graph: ir.Graph, y: ir.Value, outputs: set[ir.Value]) -> ir.Node | None:
    """The one node of ``graph`` that reads ``y``, if ``y`` has exactly one
    use and is not a graph output (folding into it would change the output)."""
    uses = list(y.uses())
    if len(uses) != 1 or y in outputs:
        return None
    node = uses[0].node
    return node if node.graph is graph else None


def _bypass(graph: ir.Graph, y: ir.Value, node: ir.Node, outputs: set[ir.Value]) -> set[ir.Value]:
    """Make the users of ``node``'s output read ``y`` (its input, now computing
    what ``node`` did) and remove ``node``; ``y`` takes the output's name if
    that was a graph output. Returns the graph's outputs now."""
    out = node.outputs[0]
    is_output = out in outputs
    ir.convenience.replace_all_uses_with(out, y, replace_graph_outputs=is_output)
    name = out.name
    graph.remove(node, safe=True)
    if not is_output:
        return outputs
    y.name = name
    return set(graph.outputs)


def _inference_batchnorm(
    node: ir.Node, overridable: Set[ir.Value]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(scale, B)`` of a BatchNormalization in inference mode whose
    parameters are all constants and whose only output in use is Y."""
    if node.domain != "" or node.op_type != "BatchNormalization" or len(node.inputs) != 5:
        return None
    if any(o.uses() for o in node.outputs[1:]):
        return None
    mode = node.attributes.get("training_mode")
    if mode is not None and mode.value:
        return None
    params = [constant(v, overridable) for v in node.inputs[1:5]]
    if any(p is None or p.ndim != 1 for p in params):
        return None
    scale, bias = params[0], params[1]
    assert scale is not None and bias is not None
    if scale.dtype != bias.dtype or scale.dtype not in (np.float16, np.float32, np.float64):
        return None
    return scale, bias


def fold_batchnorm_affine(graph: ir.Graph, overridable: Set[ir.Value] = frozenset()) -> int:
    """Fold per-channel Mul/Add after an inference BatchNormalization into its
    ``scale`` and ``B``; returns folds done.

    ``((x - mean) / sqrt(var + eps) * scale + B) * k + s`` is
    ``(x - mean) / sqrt(var + eps) * (scale * k) + (B * k + s)``: exact but
    for rounding (the new parameters are computed in float64).

    Args:
        overridable: initializers a feed may replace; never folded.
    """
    outputs = set(graph.outputs)
    folded = 0
    for bn in list(graph):
        if bn.graph is not graph:
            continue
        while True:
            params = _inference_batchnorm(bn, overridable)
            if params is None or bn.inputs[0] is None:
                break
            x_shape = bn.inputs[0].shape
            if x_shape is None or len(x_shape) < 2:
                break
            y = bn.outputs[0]
            nxt = _sole_user(graph, y, outputs)
            if nxt is None or nxt.op_type not in ("Mul", "Add"):
                break
            scale, bias = params
            affine = _affine_of(nxt, y, scale.shape[0], len(x_shape), overridable)
            if affine is None:
                break
            # the result keeps Y's dtype and shape: c must not widen either
            out = nxt.outputs[0]
            if out.dtype != y.dtype or (out.shape is not None and out.shape != x_shape):
                break
            k, shift = affine
            new_scale = (scale.astype(np.float64) * k).astype(scale.dtype)
            new_bias = (bias.astype(np.float64) * k + shift).astype(bias.dtype)
            for index, array, tag in ((1, new_scale, "scale"), (2, new_bias, "B")):
                old = bn.inputs[index]
                assert old is not None
                folded_input = new_initializer(graph, f"{old.name}_{tag}_folded", array)
                bn.replace_input_with(index, folded_input)
            outputs = _bypass(graph, y, nxt, outputs)
            folded += 1
    return folded


def new_initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    """A new initializer of ``graph`` holding ``array``, named ``name`` (with
    a number added while another initializer has the name)."""
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
    """Fold BatchNormalization/Mul/Add into a preceding Conv (:func:`fold_conv_affine`),
    then Mul/Add into a preceding BatchNormalization (:func:`fold_batchnorm_affine`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`fold_conv_affine`, then :func:`fold_batchnorm_affine`, on
        the main graph (each only if it has a Conv, a BatchNormalization)."""
        done = 0
        if has_op(model.graph, ("Conv",)):
            done += fold_conv_affine(model.graph, self.overridable)
        if done:
            forget_graphs()  # the census of op types is out of date
        if has_op(model.graph, ("BatchNormalization",)):
            done += fold_batchnorm_affine(model.graph, self.overridable)
        return done
