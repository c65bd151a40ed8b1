"""Per-operator rules of the QOperator and dynamic quantizers (onnxruntime's operators/*)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir
from onnx import TensorProto

from ._base import attr, io_names
from .quant_utils import ms_domain, quantize_bias_int32

if TYPE_CHECKING:
    from .qoperator import QOperatorQuantizer

__all__ = ["HANDLERS_DYNAMIC", "HANDLERS_STATIC", "QV"]


@dataclass
class QV:
    """A quantized tensor: its integer value and scale/zero-point names."""

    q_name: str
    scale: str
    zero_point: str
    axis: int | None = None


Handler = Callable[["QOperatorQuantizer", ir.Node], bool]


def _names(node: ir.Node) -> tuple[list[str], list[str]]:
    return io_names(node)


def _quant_name(node: ir.Node) -> str:
    """The name of the node that replaces ``node`` (onnxruntime's ``<name>_quant``)."""
    return f"{node.name}_quant" if node.name else ""


def _qv_inputs(v: QV) -> tuple[str, str, str]:
    """A quantized input as a QLinear op reads it: value, scale, zero point."""
    return v.q_name, v.scale, v.zero_point


def _qv(q: QOperatorQuantizer, name: str, scale: str, zp: str) -> QV:
    return QV(name, scale, zp)


def _default_ok(q: QOperatorQuantizer, node: ir.Node) -> bool:
    ins, _ = _names(node)
    return bool(ins) and q.is_float(ins[0])


def _matmul_ok(q: QOperatorQuantizer, node: ir.Node) -> bool:
    ins, _ = _names(node)
    if not q.is_float(ins[1]) and not q.is_float(ins[0]):
        return False
    return not (q.matmul_const_b_only and not q.initializer_in_path(ins[1]))


def _integer_tail(
    q: QOperatorQuantizer, node: ir.Node, op: str, qs: list[QV], out_name: str, with_bias: bool
) -> None:
    """ConvInteger/MatMulInteger -> Cast -> Mul(scale product) (-> bias Add).

    Writes the float output.
    """
    ins, outs = _names(node)
    name = _quant_name(node)
    int_out = f"{outs[0]}_output_quantized"
    attrs = {k: a for k, a in node.attributes.items()}
    q.ed.node(
        op,
        [qs[0].q_name, qs[1].q_name, qs[0].zero_point, qs[1].zero_point],
        [int_out],
        name,
        attrs=attrs,
    )
    cast_out = f"{int_out}_cast_output"
    q.ed.node("Cast", [int_out], [cast_out], f"{int_out}_cast", to=q.elem_type(outs[0]))
    mul_name = f"{name}_scales_mul" if name else f"{qs[0].scale}_{qs[1].scale}_mul"
    scales = f"{mul_name}:0"
    if scales not in q.ed.values:
        q.ed.node("Mul", [qs[0].scale, qs[1].scale], [scales], mul_name)
    scaled = f"{outs[0]}quant_scaled_output" if with_bias else outs[0]
    q.ed.node("Mul", [cast_out, scales], [scaled], f"{name}_output_scale_mul" if name else "")
    if with_bias:
        w = q.ed.initializer(ins[1], outer=True)
        assert w is not None
        shape = np.ones(w.ndim, dtype=np.int64)
        shape[1] = -1
        q.ed.add_initializer(f"{outs[0]}_bias_reshape_shape", shape)
        q.ed.node(
            "Reshape", [ins[2], f"{outs[0]}_bias_reshape_shape"], [f"{outs[0]}_bias_reshape_output"]
        )
        q.ed.node(
            "Add", [scaled, f"{outs[0]}_bias_reshape_output"], [outs[0]], f"{outs[0]}_bias_add"
        )


def conv_integer(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _default_ok(q, node):
        return False
    a = q.quantize_inputs(node, [0])
    if a is None:
        return False
    w = q.quantize_inputs(node, [1], weight=True, reduce_range=q.opts.reduce_range)
    assert w is not None and a[0] is not None and w[0] is not None
    ins, _ = _names(node)
    _integer_tail(q, node, "ConvInteger", [a[0], w[0]], "", len(ins) == 3 and bool(ins[2]))
    q.replace(node)
    return True


def matmul_integer(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _matmul_ok(q, node):
        return False
    a = q.quantize_inputs(node, [0])
    w = q.quantize_inputs(node, [1], weight=True, reduce_range=True, per_channel=True)
    if a is None or w is None or a[0] is None or w[0] is None:
        return False
    _integer_tail(q, node, "MatMulInteger", [a[0], w[0]], "", False)
    q.replace(node)
    return True


def attention(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if "qkv_hidden_sizes" in node.attributes:
        return False
    ins, outs = _names(node)
    a = q.quantize_inputs(node, [0])
    w = q.quantize_inputs(node, [1], weight=True, reduce_range=True, per_channel=True)
    if a is None or w is None or a[0] is None or w[0] is None:
        return False
    name = _quant_name(node)
    inputs = [
        a[0].q_name,
        w[0].q_name,
        ins[2],
        a[0].scale,
        w[0].scale,
        ins[3] if len(ins) > 3 else "",
        a[0].zero_point,
        w[0].zero_point,
        ins[4] if len(ins) > 4 else "",
    ]
    attrs = {k: v for k, v in node.attributes.items()}
    q.ed.node("QAttention", inputs, outs, name, domain=ms_domain, attrs=attrs)
    q.replace(node)
    return True


def embed_layernorm(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if len(node.outputs) > 2:
        return False
    ins, outs = _names(node)
    qs = q.quantize_inputs(node, [2, 3, 4, 5, 6])
    if qs is None or any(v is None for v in qs):
        return False
    inputs = [ins[0], ins[1], *(v.q_name for v in qs if v), ins[7] if len(ins) > 7 else ""]
    inputs += [v.scale for v in qs if v] + [v.zero_point for v in qs if v]
    attrs = {k: v for k, v in node.attributes.items()}
    q.ed.node(
        "QEmbedLayerNormalization",
        inputs,
        outs,
        _quant_name(node),
        domain=ms_domain,
        attrs=attrs,
    )
    q.replace(node)
    return True


def gather(q: QOperatorQuantizer, node: ir.Node) -> bool:
    ins, outs = _names(node)
    if not q.is_valid_weight(ins[0]):
        return False
    qs = q.quantize_inputs(node, [0])
    if qs is None or qs[0] is None:
        return False
    out = f"{outs[0]}_quantized"
    q.clone(node, [qs[0].q_name, *ins[1:]], [out])
    q.replace(node, {0: _qv(q, out, qs[0].scale, qs[0].zero_point)})
    return True


def direct_8bit(q: QOperatorQuantizer, node: ir.Node) -> bool:
    ins, outs = _names(node)
    if not q.force:
        src = q.find_quantized(ins[0])
        if src is None:
            return False
    else:
        if not q.is_valid_weight(ins[0]) and not q.is_float(ins[0]):
            return False
        qs = q.quantize_inputs(node, [0])
        if qs is None or qs[0] is None:
            return False
        src = qs[0]
    out = f"{outs[0]}_quantized"
    q.clone(node, [src.q_name, *ins[1:]], [out])
    q.replace(node, {0: _qv(q, out, src.scale, src.zero_point)})
    return True


def maxpool(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if q.opset < 12 or q.opts.activation_qtype == TensorProto.FLOAT8E4M3FN:
        return False
    return direct_8bit(q, node)


def _qlinear(
    q: QOperatorQuantizer,
    node: ir.Node,
    op: str,
    indices: list[int],
    out_params: tuple[str, str] | None,
    layout: str,
    extra_attrs: dict | None = None,
    drop_attrs: tuple[str, ...] = (),
) -> bool:
    """A QLinear* op: quantized inputs, the output's scale/zero point (layout: 'io' or 'concat')."""
    _, outs = _names(node)
    if out_params is None:
        return False
    qs = q.quantize_inputs(node, indices)
    if qs is None or any(v is None for v in qs):
        return False
    s, z = out_params
    if layout == "concat":
        inputs = [s, z]
        for v in qs:
            assert v is not None
            inputs += [v.q_name, v.scale, v.zero_point]
    else:
        inputs = []
        for v in qs:
            assert v is not None
            inputs += [v.q_name, v.scale, v.zero_point]
        inputs += [s, z]
    out = f"{outs[0]}_quantized"
    attrs = {k: v for k, v in node.attributes.items() if k not in drop_attrs}
    attrs.update(extra_attrs or {})
    q.ed.node(op, inputs, [out], _quant_name(node), domain=ms_domain, attrs=attrs)
    q.replace(node, {0: _qv(q, out, s, z)})
    return True


def binary(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _default_ok(q, node):
        return False
    _, outs = _names(node)
    return _qlinear(q, node, "QLinear" + node.op_type, [0, 1], q.output_params(outs[0]), "io")


def pool(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _default_ok(q, node):
        return False
    _, outs = _names(node)
    return _qlinear(q, node, "QLinear" + node.op_type, [0], q.output_params(outs[0]), "io")


def activation(q: QOperatorQuantizer, node: ir.Node) -> bool:
    ins, outs = _names(node)
    if not _default_ok(q, node):
        return False
    if node.op_type in ("Relu", "Clip"):
        src = q.qmap.get(ins[0])
        if src is None or q.opts.activation_symmetric:
            return False
        q.replace(node, {0: src})
        return True
    nnapi = node.op_type == "Sigmoid" and q.opts.extra.get("extra.Sigmoid.nnapi", False)
    params = q.output_params(outs[0], 1 / 256.0, 0) if nnapi else q.output_params(outs[0])
    return _qlinear(q, node, "QLinear" + node.op_type, [0], params, "io")


def global_avgpool(q: QOperatorQuantizer, node: ir.Node) -> bool:
    ins, outs = _names(node)
    if not _default_ok(q, node):
        return False
    src = q.qmap.get(ins[0])
    if src is None:
        return False
    params = q.output_params(outs[0]) or (src.scale, src.zero_point)
    return _qlinear(q, node, "QLinearGlobalAveragePool", [0], params, "io", {"channels_last": 0})


def concat(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _default_ok(q, node):
        return False
    _, outs = _names(node)
    return _qlinear(
        q, node, "QLinearConcat", list(range(len(node.inputs))), q.output_params(outs[0]), "concat"
    )


def softmax(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _default_ok(q, node):
        return False
    _, outs = _names(node)
    zp = 0 if q.opts.activation_qtype == TensorProto.UINT8 else -128
    params = q.output_params(outs[0], 1 / 256.0, zp)
    return _qlinear(q, node, "QLinearSoftmax", [0], params, "io", {"opset": q.opset})


def _weighted(
    q: QOperatorQuantizer,
    node: ir.Node,
    per_channel_axis: int | None,
    qtype: int | None,
    reduce_range: bool,
    op_level: bool,
) -> tuple[QV, QV] | None:
    ins, _ = _names(node)
    a = q.quantize_inputs(node, [0])
    if per_channel_axis is not None and q.ed.is_initializer(ins[1]) and q.opts.per_channel:
        w: QV | None = q.quantize_initializer(
            ins[1], qtype or q.opts.weight_qtype, reduce_range, per_channel_axis
        )
    else:
        ws = q.quantize_inputs(
            node, [1], weight=True, reduce_range=reduce_range, per_channel=op_level
        )
        w = ws[0] if ws else None
    if a is None or a[0] is None or w is None:
        return None
    return a[0], w


def _bias(
    q: QOperatorQuantizer, bias: str, inp: QV, weight_name: str, w: QV, beta: float = 1.0
) -> str:
    """The int32 bias at input_scale * weight_scale.

    The weight scale is raised if the bias would overflow.
    """
    qname = f"{bias}_quantized"
    if qname in q.ed.values:
        return qname
    x_scale = q.ed.initializer(inp.scale, outer=True)
    w_scale = q.ed.initializer(w.scale, outer=True)
    w_zp = q.ed.initializer(w.zero_point, outer=True)
    data = q.ed.initializer(bias, outer=True)
    assert x_scale is not None and w_scale is not None and data is not None and w_zp is not None
    if w_zp.size and not w_zp.any() and q.opts.weight_qtype == TensorProto.INT8:
        w_scale = _adjust_weight_scale(q, weight_name, w, x_scale, w_scale, data)
    bias_scale = x_scale * w_scale * beta
    q.ed.add_initializer(qname, quantize_bias_int32(data, bias_scale))
    return qname


def _adjust_weight_scale(
    q: QOperatorQuantizer,
    weight_name: str,
    w: QV,
    x_scale: np.ndarray,
    w_scale: np.ndarray,
    bias: np.ndarray,
) -> np.ndarray:
    qrange = float(np.iinfo(np.int32).max) - float(np.iinfo(np.int32).min + 1)
    scale = np.array(w_scale, copy=True)
    per_channel = q.opts.per_channel and scale.ndim == 1
    # (channel, |bias| max); channel None for a per-tensor scale.
    targets: list[tuple[int | None, float]]
    if per_channel:
        targets = [(i, abs(float(bias[i]))) for i in range(scale.shape[0])]
    else:
        targets = [
            (
                None,
                max(
                    abs(min(float(bias.min(initial=0)), 0.0)),
                    abs(max(float(bias.max(initial=0)), 0.0)),
                ),
            )
        ]
    changed = False
    for i, absmax in targets:
        smallest = 1.0001 * (2.0 * absmax) / qrange
        current = float(scale if i is None else scale[i])
        cand = float(x_scale) * current
        if 0.0 < cand < smallest:
            new = np.array(current * smallest / cand).astype(scale.dtype)
            if i is None:
                scale = new
            else:
                scale[i] = new
            changed = True
    if changed:
        from .quant_utils import quantize_array

        data = q.ed.initializer(weight_name, outer=True)
        zp = q.ed.initializer(w.zero_point, outer=True)
        assert data is not None and zp is not None
        if w.axis is None:
            qdata = quantize_array(q.opts.weight_qtype, data, scale, zp)
        else:
            shape = [1] * data.ndim
            shape[w.axis] = -1
            qdata = quantize_array(
                q.opts.weight_qtype,
                data,
                scale.reshape(shape),
                zp.astype(np.float32).reshape(shape),
            )
        for name, arr in ((w.scale, scale), (w.q_name, qdata)):
            v = q.ed.root().find(name) or q.ed.find(name)
            assert v is not None
            v.const_value = ir.tensor(np.asarray(arr), name=name)
    return scale


def qlinear_conv(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _default_ok(q, node):
        return False
    ins, outs = _names(node)
    params = q.output_params(outs[0])
    pair = _weighted(q, node, 0, TensorProto.INT8, q.opts.reduce_range, False)
    if params is None or pair is None:
        return False
    a, w = pair
    inputs = [*_qv_inputs(a), *_qv_inputs(w), *params]
    if len(ins) == 3 and ins[2]:
        inputs.append(_bias(q, ins[2], a, ins[1], w))
    out = f"{outs[0]}_quantized"
    attrs = {k: v for k, v in node.attributes.items()}
    q.ed.node("QLinearConv", inputs, [out], _quant_name(node), attrs=attrs)
    q.replace(node, {0: _qv(q, out, *params)})
    return True


def qlinear_matmul(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _matmul_ok(q, node):
        return False
    _, outs = _names(node)
    pair = _weighted(q, node, None, None, True, True)
    params = q.output_params(outs[0])
    if params is None or pair is None:
        return False
    a, w = pair
    inputs = [*_qv_inputs(a), *_qv_inputs(w), *params]
    domain = ms_domain if q.opts.weight_qtype == TensorProto.FLOAT8E4M3FN else ""
    out = f"{outs[0]}_quantized"
    q.ed.node("QLinearMatMul", inputs, [out], _quant_name(node), domain=domain)
    q.replace(node, {0: _qv(q, out, *params)})
    return True


def qgemm(q: QOperatorQuantizer, node: ir.Node) -> bool:
    if not _matmul_ok(q, node):
        return False
    ins, outs = _names(node)
    params = q.output_params(outs[0])
    pair = _weighted(q, node, 0 if attr(node, "transB", 0) else 1, None, q.opts.reduce_range, False)
    if params is None or pair is None:
        return False
    a, w = pair
    bias = ""
    if len(ins) == 3 and ins[2]:
        if not q.ed.is_initializer(ins[2]):
            return False
        bias = _bias(q, ins[2], a, ins[1], w, float(attr(node, "beta", 1.0)))
    inputs = [*_qv_inputs(a), *_qv_inputs(w), bias, *params]
    out = f"{outs[0]}_quantized"
    attrs = {k: v for k, v in node.attributes.items() if k != "beta"}
    q.ed.node(
        "QGemm",
        inputs,
        [out],
        _quant_name(node),
        domain=ms_domain,
        attrs=attrs,
    )
    q.replace(node, {0: _qv(q, out, *params)})
    return True


HANDLERS_DYNAMIC: dict[str, Handler] = {
    "Conv": conv_integer,
    "MatMul": matmul_integer,
    "Attention": attention,
    "Gather": gather,
    "Transpose": direct_8bit,
    "EmbedLayerNormalization": embed_layernorm,
}

HANDLERS_STATIC: dict[str, Handler] = {
    "Conv": qlinear_conv,
    "Gemm": qgemm,
    "MatMul": qlinear_matmul,
    "Add": binary,
    "Mul": binary,
    "Relu": activation,
    "Clip": activation,
    "LeakyRelu": activation,
    "Sigmoid": activation,
    "MaxPool": maxpool,
    "GlobalAveragePool": global_avgpool,
    "Reshape": direct_8bit,
    "Squeeze": direct_8bit,
    "Unsqueeze": direct_8bit,
    "Flatten": direct_8bit,
    "Transpose": direct_8bit,
    "AveragePool": pool,
    "Concat": concat,
    "Softmax": softmax,
    "Gather": gather,
    "EmbedLayerNormalization": embed_layernorm,
}
