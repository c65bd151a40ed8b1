"""The fused operators: ortcore's optimizer emits them, providers run them.

They live in the ``com.ortcore`` domain (:data:`DOMAIN`, version
:data:`VERSION`). Their schemas are registered with onnx
(``onnx.defs.register_schema``, :func:`register_fused_schemas`) on first use,
so onnx's checker and shape inference accept an optimized model, and a model
saved through ``SessionOptions.optimized_model_filepath`` loads again. A
provider runs them by registering kernels for ``domain=DOMAIN``; the
extended-level optimizer emits one only for nodes whose provider has such a
kernel::

    from ep_sdk.fused_ops import ACTIVATIONS, DOMAIN

    @registry.kernel("FusedGemm", domain=DOMAIN, types={"T": FLOAT_TYPES})
    def fused_gemm(info):
        activation = info.attrs["activation"]  # "" or one of ACTIVATIONS
        ...

| Operator | What it computes |
| --- | --- |
| ``FusedConv`` | Conv (its attributes) + ``activation`` |
| ``FusedConvAdd`` | ``activation(Conv(X, W, B) + Z)``; inputs ``X, W, Z[, B]``, ``Z`` as Y |
| ``FusedConvConcat`` | FusedConv into channels ``channel_offset``.. of Y (``Into`` or new) |
| ``FusedConvShuffle`` | FusedConv, its channels shuffled in ``shuffle_groups`` groups |
| ``FusedConvPool`` | FusedConv, then MaxPool (its ``pool_*`` attributes) of its output |
| ``GrowingConcat`` | Concat of ``X`` and ``Y`` along axis 1, room kept for ``capacity`` channels |
| ``FusedBatchNorm`` | BatchNormalization in inference (``epsilon``) + ``activation`` |
| ``FusedGemm`` | Gemm (its attributes) + ``activation`` |
| ``FusedMatMul`` | ``activation(A @ B + bias)``, bias optional |
| ``FusedGelu`` | onnx Gelu-20 for models of opset < 20 |
| ``BiasGelu`` | ``Gelu(X + bias)`` |
| ``FusedSwish`` | onnx Swish-24 (``X * sigmoid(alpha * X)``) for opset < 24 |
| ``FusedLayerNorm`` | onnx LayerNormalization-17 for opset < 17 |
| ``FusedRMSNorm`` | onnx RMSNormalization-23 for opset < 23 |
| ``SkipLayerNormalization`` | ``LayerNormalization(X + skip [+ bias])``; output 1, the sum |
| ``FusedAttention`` | ``softmax(Q @ Kt * scale + mask) @ V``, Transposes folded in (``perm_*``) |

No name repeats an onnx operator's: ``onnx.reference`` (the test oracle,
and the torch exporter's optimizer) refuses one name in two domains.

``activation`` is ``""`` (none) or one of :data:`ACTIVATIONS`; ``activation_params`` holds its
attributes in order (Clip: min, max; LeakyRelu: alpha; HardSigmoid: alpha,
beta).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

import onnx
import onnx.defs
import onnx.shape_inference

from .registry import reset_schema_cache

__all__ = [
    "ACTIVATIONS",
    "DOMAIN",
    "POOL_ATTRIBUTES",
    "VERSION",
    "fused_from",
    "register_fused_schemas",
]

DOMAIN = "com.ortcore"
"""The fused operators' domain."""
VERSION = 1
"""The version of :data:`DOMAIN` that the schemas have (the model's opset import)."""
ACTIVATIONS = ("Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh")
"""Activations FusedConv, FusedBatchNorm, FusedGemm and FusedMatMul apply to their result."""

_S = onnx.defs.OpSchema
_A = _S.AttrType
_FLOAT_TYPES = ["tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"]


def _p(name: str, optional: bool = False) -> Any:
    opt = _S.FormalParameterOption.Optional if optional else _S.FormalParameterOption.Single
    return _S.FormalParameter(name, "T", "", param_option=opt)


def _attr(name: str, kind: Any, default: Any = None) -> Any:
    if default is None:
        return _S.Attribute(name, kind, "", required=False)
    return _S.Attribute(name, onnx.helper.make_attribute(name, default), "")


_ACT_ATTRS = [_attr("activation", _A.STRING, ""), _attr("activation_params", _A.FLOATS)]


def _like(op_type: str, n_inputs: int, attrs: tuple[str, ...]) -> Callable[[Any], None]:
    """Inference that runs onnx's own inference of ``op_type`` (Conv, Gemm, MatMul)."""

    def infer(ctx: Any) -> None:
        names = [f"i{i}" for i in range(n_inputs) if i < ctx.get_num_inputs() and ctx.has_input(i)]
        types = {n: ctx.get_input_type(i) for i, n in enumerate(names)}
        kwargs = {}
        for a in attrs:
            proto = ctx.get_attribute(a)
            if proto is not None:
                kwargs[a] = onnx.helper.get_attribute_value(proto)
        node = onnx.helper.make_node(op_type, names, ["y"], **kwargs)
        schema = onnx.defs.get_schema(op_type, 21)
        out = onnx.shape_inference.infer_node_outputs(schema, node, types)
        if "y" in out:
            ctx.set_output_type(0, out["y"])

    return infer


def _conv_concat(ctx: Any) -> None:
    """Conv's inference, then the channel dim set to the ``channels`` attribute."""
    _like("Conv", 3, _CONV_ATTRS)(ctx)
    proto = ctx.get_attribute("channels")
    if proto is None or not ctx.get_output_type(0).tensor_type.HasField("shape"):
        return
    out = onnx.TypeProto()
    out.CopyFrom(ctx.get_output_type(0))
    dims = out.tensor_type.shape.dim
    if len(dims) > 1:
        dims[1].Clear()
        dims[1].dim_value = onnx.helper.get_attribute_value(proto)
        ctx.set_output_type(0, out)


POOL_ATTRIBUTES = {
    "pool_kernel_shape": "kernel_shape",
    "pool_strides": "strides",
    "pool_pads": "pads",
    "pool_dilations": "dilations",
    "pool_ceil_mode": "ceil_mode",
}
"""FusedConvPool's MaxPool attributes and the MaxPool attribute each one is
(the optimizer names them so, a kernel reads them back as a MaxPool's)."""


def _conv_pool(ctx: Any) -> None:
    """Conv's inference, then MaxPool's (opset 12) on its result."""
    if ctx.get_attribute("pool_kernel_shape") is None:
        raise ValueError("FusedConvPool: pool_kernel_shape is missing")
    _like("Conv", 3, _CONV_ATTRS)(ctx)
    conv_out = ctx.get_output_type(0)
    if conv_out is None or not conv_out.HasField("tensor_type"):
        return
    kwargs = {}
    for name, pool_name in POOL_ATTRIBUTES.items():
        proto = ctx.get_attribute(name)
        if proto is not None:
            kwargs[pool_name] = onnx.helper.get_attribute_value(proto)
    node = onnx.helper.make_node("MaxPool", ["c"], ["y"], **kwargs)
    out = onnx.shape_inference.infer_node_outputs(
        onnx.defs.get_schema("MaxPool", 12), node, {"c": conv_out}
    )
    if "y" in out:
        ctx.set_output_type(0, out["y"])


def _growing_concat(ctx: Any) -> None:
    """Concat's inference along axis 1."""
    types = {f"i{i}": ctx.get_input_type(i) for i in range(2)}
    node = onnx.helper.make_node("Concat", list(types), ["y"], axis=1)
    out = onnx.shape_inference.infer_node_outputs(onnx.defs.get_schema("Concat", 21), node, types)
    if "y" in out:
        ctx.set_output_type(0, out["y"])


def _same_as_input(ctx: Any) -> None:
    for i in range(ctx.get_num_outputs()):
        ctx.set_output_type(i, ctx.get_input_type(0))


_ATTENTION_PERMS = ("perm_q", "perm_kt", "perm_v", "perm_out")


def _attention(ctx: Any) -> None:
    # Q (..., S, D) @ Kt (..., D, T) -> (..., S, T); @ V (..., T, Dv) -> (..., S, Dv),
    # each operand first transposed by its perm_* if given, the result by perm_out
    def infer(op_type: str, types: dict[str, Any], **attrs: Any) -> Any:
        node = onnx.helper.make_node(op_type, list(types), ["y"], **attrs)
        out = onnx.shape_inference.infer_node_outputs(
            onnx.defs.get_schema(op_type, 21), node, types
        )
        return out.get("y")

    def permuted(t: Any, name: str) -> Any:
        proto = ctx.get_attribute(name)
        if t is None or proto is None:
            return t
        perm = list(onnx.helper.get_attribute_value(proto))
        if sorted(perm) != list(range(len(perm))):
            raise ValueError(f"FusedAttention: {name} {perm} is not a permutation")
        if t.tensor_type.HasField("shape") and len(t.tensor_type.shape.dim) != len(perm):
            rank = len(t.tensor_type.shape.dim)
            raise ValueError(f"FusedAttention: {name} {perm} does not fit a tensor of rank {rank}")
        return infer("Transpose", {"x": t}, perm=perm)

    q, kt, v = (permuted(ctx.get_input_type(i), n) for i, n in enumerate(_ATTENTION_PERMS[:3]))
    if q is None or kt is None or v is None:
        return
    scores = infer("MatMul", {"q": q, "k": kt})
    y = permuted(infer("MatMul", {"s": scores, "v": v}) if scores is not None else None, "perm_out")
    if y is not None:
        ctx.set_output_type(0, y)


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_GEMM_ATTRS = ("alpha", "beta", "transA", "transB")
_LN_ATTRS = [
    _attr("axis", _A.INT, -1),
    _attr("epsilon", _A.FLOAT, 1e-5),
    _attr("stash_type", _A.INT, 1),
]


@cache
def _schemas() -> list[Any]:
    """The table: every fused operator's schema (its replaced op, where it has
    one, in :func:`fused_from`)."""

    def schema(
        name: str,
        inputs: list[Any],
        outputs: list[Any],
        attrs: list[Any],
        infer: Callable[[Any], None],
        doc: str,
        replaces: str = "",
    ) -> Any:
        s = _S(name, DOMAIN, VERSION, doc, inputs=inputs, outputs=outputs,
               type_constraints=[("T", _FLOAT_TYPES, "")], attributes=attrs)  # fmt: skip
        s.set_type_and_shape_inference_function(infer)
        _replaces[name] = replaces
        return s

    conv_attrs = [
        _attr("auto_pad", _A.STRING, "NOTSET"),
        _attr("dilations", _A.INTS),
        _attr("group", _A.INT, 1),
        _attr("kernel_shape", _A.INTS),
        _attr("pads", _A.INTS),
        _attr("strides", _A.INTS),
    ]
    gemm_attrs = [
        _attr("alpha", _A.FLOAT, 1.0),
        _attr("beta", _A.FLOAT, 1.0),
        _attr("transA", _A.INT, 0),
        _attr("transB", _A.INT, 0),
    ]
    gelu_attr = [_attr("approximate", _A.STRING, "none")]
    return [
        schema("FusedConv", [_p("X"), _p("W"), _p("B", True)], [_p("Y")],
               conv_attrs + _ACT_ATTRS, _like("Conv", 3, _CONV_ATTRS), "Conv + activation", "Conv"),
        schema("FusedConvConcat", [_p("X"), _p("W"), _p("B", True), _p("Into", True)],
               [_p("Y")],
               [*conv_attrs, *_ACT_ATTRS, _attr("channels", _A.INT),
                _attr("channel_offset", _A.INT, 0)], _conv_concat,
               "FusedConv whose output is channels [channel_offset, channel_offset + M) of "
               "Y, a tensor of `channels` channels: Into, written in place (Y is Into), or "
               "a new tensor; a chain of them, each taking the last one's Y as Into, is a "
               "Concat of Conv outputs along the channels with no copy", "Conv"),
        schema("FusedConvShuffle", [_p("X"), _p("W"), _p("B", True)], [_p("Y")],
               [*conv_attrs, *_ACT_ATTRS, _attr("shuffle_groups", _A.INT, 1)],
               _like("Conv", 3, _CONV_ATTRS),
               "FusedConv, then ShuffleNet's channel shuffle of its output Y (N, C, ...): "
               "channel j * shuffle_groups + i of Y is channel i * C / shuffle_groups + j "
               "of the FusedConv's (a Reshape to (N, shuffle_groups, C / shuffle_groups, "
               "...), a Transpose of axes 1 and 2 and a Reshape back)", "Conv"),
        schema("FusedConvPool", [_p("X"), _p("W"), _p("B", True)], [_p("Y")],
               [*conv_attrs, *_ACT_ATTRS, _attr("pool_kernel_shape", _A.INTS),
                _attr("pool_strides", _A.INTS), _attr("pool_pads", _A.INTS),
                _attr("pool_dilations", _A.INTS), _attr("pool_ceil_mode", _A.INT, 0)],
               _conv_pool,
               "FusedConv, then a MaxPool (opset 12, no Indices output) of its output "
               "with the pool_* attributes as its kernel_shape, strides, pads, dilations "
               "and ceil_mode", "Conv"),
        schema("GrowingConcat", [_p("X"), _p("Y")], [_p("Z")], [_attr("capacity", _A.INT)],
               _growing_concat,
               "Concat(X, Y) along axis 1, a link of a chain of them (each one's Z the next "
               "one's X: DenseNet's blocks) that ends in `capacity` channels: a kernel may "
               "make the first link's Z in a tensor of `capacity` channels and the next "
               "links' Z in the same one, writing only their Y, each Z the channels "
               "before", "Concat"),
        schema("FusedConvAdd", [_p("X"), _p("W"), _p("Z"), _p("B", True)], [_p("Y")],
               conv_attrs + _ACT_ATTRS, _like("Conv", 2, _CONV_ATTRS),
               "activation(Conv(X, W, B) + Z), Z of Y's shape (a residual added in the "
               "Conv's epilogue)"),
        schema("FusedBatchNorm",
               [_p("X"), _p("scale"), _p("B"), _p("input_mean"), _p("input_var")], [_p("Y")],
               [_attr("epsilon", _A.FLOAT, 1e-5), *_ACT_ATTRS], _same_as_input,
               "BatchNormalization with the running statistics (inference) + activation",
               "BatchNormalization"),
        schema("FusedGemm", [_p("A"), _p("B"), _p("C", True)], [_p("Y")],
               gemm_attrs + _ACT_ATTRS, _like("Gemm", 3, _GEMM_ATTRS), "Gemm + activation",
               "Gemm"),
        schema("FusedMatMul", [_p("A"), _p("B"), _p("bias", True)], [_p("Y")],
               list(_ACT_ATTRS), _like("MatMul", 2, ()), "activation(A @ B + bias)",
               "MatMul"),
        schema("FusedGelu", [_p("X")], [_p("Y")], gelu_attr, _same_as_input, "onnx Gelu-20"),
        schema("BiasGelu", [_p("X"), _p("bias")], [_p("Y")], gelu_attr, _same_as_input,
               "Gelu(X + bias)"),
        schema("FusedSwish", [_p("X")], [_p("Y")], [_attr("alpha", _A.FLOAT, 1.0)],
               _same_as_input, "onnx Swish-24: X * sigmoid(alpha * X)"),
        schema("FusedLayerNorm", [_p("X"), _p("Scale"), _p("B", True)], [_p("Y")],
               list(_LN_ATTRS), _same_as_input, "onnx LayerNormalization-17 (output 0)"),
        schema("FusedRMSNorm", [_p("X"), _p("scale")], [_p("Y")],
               list(_LN_ATTRS), _same_as_input, "onnx RMSNormalization-23"),
        schema("SkipLayerNormalization",
               [_p("X"), _p("skip"), _p("gamma"), _p("beta", True), _p("bias", True)],
               [_p("Y"), _p("sum", True)], list(_LN_ATTRS), _same_as_input,
               "LayerNormalization(X + skip + bias); output 1 is the sum"),
        schema("FusedAttention", [_p("Q"), _p("Kt"), _p("V"), _p("mask", True)], [_p("Y")],
               [_attr("scale", _A.FLOAT, 1.0), *(_attr(n, _A.INTS) for n in _ATTENTION_PERMS)],
               _attention,
               "softmax(Q @ Kt * scale + mask, axis=-1) @ V; Q, Kt and V each first "
               "transposed by perm_q, perm_kt, perm_v where given, Y then by perm_out"),
    ]  # fmt: skip


_replaces: dict[str, str] = {}


@cache
def fused_from() -> Mapping[str, str]:
    """Fused operator -> the onnx operator whose node it replaces and keeps
    the name of (``FusedConv`` -> ``Conv``: the core names it after the Conv,
    plus a suffix); operators made of several nodes of no one kind are left
    out. Read off the schema table, the one place a fused operator is defined
    (the profiler reports a fused node under the model's node with it)."""
    _schemas()
    return MappingProxyType({name: op for name, op in _replaces.items() if op})


_lock = threading.Lock()
_done = False


def register_fused_schemas() -> None:
    """Register the fused operators' schemas with onnx (once per process).

    The core calls it before it emits a fused operator; a provider's test of
    its fused kernels calls it before building a model that holds one.
    """
    global _done
    with _lock:
        if _done:
            return
        for s in _schemas():
            try:
                onnx.defs.get_schema(s.name, VERSION, DOMAIN)
            except onnx.defs.SchemaError:
                onnx.defs.register_schema(s)
        # Lookups cached while the ops were unknown.
        reset_schema_cache()
        _done = True
