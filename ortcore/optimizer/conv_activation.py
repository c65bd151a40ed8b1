"""Fuse ``Conv -> activation`` into ``com.ortcore.FusedConv``,
``Conv -> Add -> [activation]`` into ``com.ortcore.FusedConvAdd``, and
``BatchNormalization -> activation`` into ``com.ortcore.FusedBatchNorm``.

The activation (Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, Tanh) is applied
in place on the convolution's output, saving one pass over it and one
intermediate buffer, as onnxruntime's ConvActivationFusion does. A residual
``Add`` (or two-input ``Sum``) of a tensor of the Conv output's own shape is
added in the same pass (onnxruntime's Conv + Add + Relu fusion, ResNet's
shortcut): the Add's and the activation's passes and buffers go. A
BatchNormalization that uses its running statistics and is not folded into
a Conv (pre-activation blocks: DenseNet's BatchNormalization -> Relu ->
Conv) takes its activation into its own pass the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, activation_of, anchored, op, other_input

__all__ = [
    "ConvActivationFusionPass",
    "fuse_batchnorm_activation",
    "fuse_conv_activation",
    "fuse_conv_add_activation",
]


def _static_shape(v: ir.Value | None) -> tuple[int, ...] | None:
    if v is None or v.shape is None:
        return None
    dims = tuple(v.shape)
    return dims if all(isinstance(d, int) for d in dims) else None  # type: ignore[return-value]


@anchored("Conv")
def fuse_conv_add_activation(ctx: FusionContext) -> int:
    """Replace Conv + Add (or two-input Sum) [+ activation] of ``ctx.graph``
    with FusedConvAdd, when the Add's other operand has the Conv output's
    static shape and type (no broadcasting); returns fusions done."""
    done = 0
    for conv in list(ctx.graph):
        if conv.graph is not ctx.graph or not op(conv, "Conv"):
            continue
        y = conv.outputs[0]
        add = ctx.sole_user(y)
        if not op(add, "Add", "Sum") or add is None or len(add.inputs) != 2:
            continue
        z = other_input(add, y)
        shape = _static_shape(y)
        if z is None or z is y or shape is None or _static_shape(z) != shape:
            continue
        if z.dtype != y.dtype or _static_shape(add.outputs[0]) != shape:
            continue
        nodes = [conv, add]
        out = add.outputs[0]
        act = None
        act_node = ctx.sole_user(out)
        if act_node is not None and act_node.inputs[0] is out:
            act = activation_of(ctx, act_node)
            if act is not None:
                nodes.append(act_node)
                out = act_node.outputs[0]
        if not ctx.can_emit(nodes, "FusedConvAdd"):
            continue
        attrs = [a for a in conv.attributes.values()]
        if act is not None:
            attrs += _activation_attrs(act)
        inputs = [conv.inputs[0], conv.inputs[1], z]
        if len(conv.inputs) > 2 and conv.inputs[2] is not None:
            inputs.append(conv.inputs[2])
        fused = ir.Node(
            "com.ortcore", "FusedConvAdd", inputs, attrs,
            name=f"{conv.name}_fused", num_outputs=1,
        )  # fmt: skip
        ctx.replace(nodes, fused, [(out, fused.outputs[0])])
        done += 1
    return done


def _activation_attrs(act: tuple[str, list[float]]) -> list[ir.Attr]:
    """The ``activation`` and ``activation_params`` attributes of ``act``."""
    attrs: list[ir.Attr] = [ir.AttrString("activation", act[0])]
    if act[1]:
        attrs.append(ir.AttrFloat32s("activation_params", act[1]))
    return attrs


def _fuse_with_activation(
    ctx: FusionContext,
    accept: Callable[[ir.Node], bool],
    fused_op: str,
    kept_attrs: Callable[[ir.Node], list[ir.Attr]],
) -> int:
    """Replace each node ``accept`` takes whose output only an activation
    reads by one ``fused_op`` node (its inputs, ``kept_attrs`` of it and the
    activation's attributes); returns fusions done."""
    done = 0
    for node in list(ctx.graph):
        if node.graph is not ctx.graph or not accept(node):
            continue
        act_node = ctx.sole_user(node.outputs[0])
        if act_node is None or act_node.inputs[0] is not node.outputs[0]:
            continue
        act = activation_of(ctx, act_node)
        if act is None or not ctx.can_emit([node, act_node], fused_op):
            continue
        attrs = [*kept_attrs(node), *_activation_attrs(act)]
        fused = ir.Node(
            "com.ortcore", fused_op, list(node.inputs), attrs,
            name=f"{node.name}_fused", num_outputs=1,
        )  # fmt: skip
        ctx.replace([node, act_node], fused, [(act_node.outputs[0], fused.outputs[0])])
        done += 1
    return done


@anchored("Conv")
def fuse_conv_activation(ctx: FusionContext) -> int:
    """Replace Conv + activation pairs of ``ctx.graph``; returns fusions done."""
    return _fuse_with_activation(
        ctx, lambda n: op(n, "Conv"), "FusedConv", lambda n: list(n.attributes.values())
    )


def _inference_batchnorm(node: ir.Node) -> bool:
    """Whether ``node`` is a BatchNormalization with one output that uses its
    running statistics per channel (no ``training_mode``, no ``spatial=0``),
    all its inputs of one dtype (the fused op's schema has one type)."""
    if not op(node, "BatchNormalization") or len(node.outputs) != 1 or len(node.inputs) != 5:
        return False
    attrs = node.attributes
    if attrs.get("training_mode") is not None and attrs["training_mode"].as_int():
        return False
    if attrs.get("spatial") is not None and not attrs["spatial"].as_int():
        return False
    dtypes = {v.dtype if v is not None else None for v in node.inputs}
    return len(dtypes) == 1 and None not in dtypes


def _epsilon(node: ir.Node) -> list[ir.Attr]:
    eps = node.attributes.get("epsilon")
    return [ir.AttrFloat32("epsilon", eps.as_float() if eps is not None else 1e-5)]


@anchored("BatchNormalization")
def fuse_batchnorm_activation(ctx: FusionContext) -> int:
    """Replace BatchNormalization (inference) + activation pairs of
    ``ctx.graph`` with FusedBatchNorm; returns fusions done."""
    return _fuse_with_activation(ctx, _inference_batchnorm, "FusedBatchNorm", _epsilon)


class ConvActivationFusionPass(FusionPass):
    """Fuse Conv + Add + activation into ``FusedConvAdd``, then Conv +
    activation into ``FusedConv``, then BatchNormalization + activation
    into ``FusedBatchNorm`` (after the Conv fusions: a BatchNormalization
    folded into its Conv is gone by then)."""

    fusions = (fuse_conv_add_activation, fuse_conv_activation, fuse_batchnorm_activation)
