"""QDQ format: QuantizeLinear/DequantizeLinear pairs around the float operators.

Each operator marks the tensors it wants quantized (activations with their
calibrated parameters, weights quantized once into initializers, biases to
int32 at input_scale * weight_scale, pass-through operators sharing their
input's parameters); then the pairs are inserted. Names, shapes of the
scale/zero-point initializers and per-op rules follow onnxruntime's QDQQuantizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto

from ._base import (
    Editor,
    Options,
    activation_params,
    adjust_tensor_ranges,
    attr,
    io_names,
    to_proto,
    weight_params,
)
from ._calib_data import TensorsData
from .quant_utils import NP_TYPES, ms_domain, quantize_array, quantize_bias_int32

__all__ = ["QDQQuantizer"]

_DIRECT_8BIT = {
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "AveragePool",
    "Slice",
    "TopK",
    "Resize",
}
_NORMS = {"InstanceNormalization", "LayerNormalization", "BatchNormalization"}


@dataclass
class _Info:
    weight: bool = False
    axis: int | None = None
    provider: tuple[str, str] | None = (
        None  # (input tensor, consumer node) whose parameters are shared
    )


@dataclass
class _Quantized:
    q_name: str | None
    scale: str
    zero_point: str
    axis: int | None = None


class QDQQuantizer:
    """Static quantization in QDQ format."""

    def __init__(
        self, model: onnx.ModelProto, opts: Options, tensors_range: TensorsData | None
    ) -> None:
        self.opts = opts
        self.model = ir.serde.deserialize_model(model)
        self.ed = Editor(self.model.graph)
        self.opset = next(i.version for i in model.opset_import if i.domain in ("", "ai.onnx"))
        extra = opts.extra
        self.exclude_output_ops = set(extra.get("OpTypesToExcludeOutputQuantization", []))
        self.qdq_pair_to_weight = bool(extra.get("AddQDQPairToWeight", False))
        self.quantize_bias = bool(extra.get("QuantizeBias", True))
        self.dedicated = bool(extra.get("DedicatedQDQPair", False))
        self.per_channel_axis: dict[str, int] = dict(
            extra.get("QDQOpTypePerChannelSupportToAxis", {})
        )
        self.keep_removable = bool(extra.get("QDQKeepRemovableActivations", False))
        self.no_bias_adjust = bool(extra.get("QDQDisableWeightAdjustForInt32Bias", False))
        self.force = bool(extra.get("ForceQuantizeNoInputCheck", False))
        self.domain = ms_domain if extra.get("UseQDQContribOps", False) else ""
        wide = (TensorProto.UINT16, TensorProto.INT16, TensorProto.UINT4, TensorProto.INT4)
        if self.opset < 21 and (opts.activation_qtype in wide or opts.weight_qtype in wide):
            # ONNX Q/DQ take 16/4-bit types from opset 21; onnxruntime's contrib Q/DQ before.
            self.domain = ms_domain
        ranges = (
            adjust_tensor_ranges(opts, self.model.graph, tensors_range) if tensors_range else None
        )
        self.act_params = activation_params(opts, ranges) if ranges else {}
        self.to_quantize: dict[str, _Info] = {}
        self.bias_to_quantize: dict[str, tuple[str, str, str, float]] = {}
        self.receivers: dict[str, list[ir.Node]] = {}
        self.quantized: dict[str, _Quantized] = {}
        self.init_params: dict[str, tuple[np.ndarray, np.ndarray, int, int | None]] = {}

    # -- marking -------------------------------------------------------------------------------
    def _quantizable(self, name: str) -> bool:
        return bool(name) and self.ed.is_float(name)

    def mark(
        self, name: str, weight: bool = False, provider: tuple[str, str] | None = None
    ) -> None:
        if not self._quantizable(name):
            return
        if provider is not None:
            self.to_quantize[name] = _Info(weight=weight, provider=provider)
        elif name not in self.to_quantize:
            self.to_quantize[name] = _Info(weight=weight)

    def mark_weight_per_channel(self, name: str, axis: int) -> None:
        if self.ed.is_initializer(name) and self.ed.is_float(name):
            self.to_quantize[name] = _Info(weight=True, axis=axis)

    def is_quantized(self, name: str) -> bool:
        return name in self.to_quantize or name in self.bias_to_quantize

    def per_channel_axis_of(
        self, name: str, default_axis: int, op_type: str | None = None
    ) -> int | None:
        data = self.ed.initializer(name)
        if data is None or not self.opts.per_channel:
            return None
        axis = self.per_channel_axis.get(op_type, default_axis) if op_type else default_axis
        axis = axis + data.ndim if axis < 0 else axis
        return axis if 0 <= axis < data.ndim else None

    def mark_weight(self, name: str, default_axis: int, op_type: str | None = None) -> None:
        axis = self.per_channel_axis_of(name, default_axis, op_type)
        if axis is not None:
            self.mark_weight_per_channel(name, axis)
        else:
            self.mark(name, weight=True)

    def mark_bias(self, node: ir.Node, bias: str, inp: str, weight: str, beta: float = 1.0) -> None:
        data = self.ed.initializer(bias)
        if data is None or self.ed.elem_type(bias) not in (TensorProto.FLOAT, TensorProto.FLOAT16):
            return
        actual = bias
        if bias in self.bias_to_quantize:
            # One bias read by two nodes gets a copy per node: each has its own scale.
            n = 1
            while f"{bias}{n}" in self.ed.values:
                n += 1
            actual = f"{bias}{n}"
            copy = self.ed.add_initializer(actual, data)
            for i, v in enumerate(node.inputs):
                if v is not None and v.name == bias:
                    node.replace_input_with(i, copy)
        self.bias_to_quantize[actual] = (node.name or "", inp, weight, beta)

    def _out(self, node: ir.Node) -> bool:
        return node.op_type not in self.exclude_output_ops

    def _share(self, node: ir.Node, out: str, inp: str) -> None:
        self.mark(out, provider=(inp, node.name or ""))

    def _replace_upstream(self, node: ir.Node) -> bool:
        up, out = node.inputs[0], node.outputs[0]
        if (
            up is None
            or out.name not in self.act_params
            or up.name not in self.act_params
            or len(up.uses()) != 1
            or up.is_graph_output()
            or up.is_graph_input()
        ):
            return False
        out_name = out.name
        self.ed.redirect(out, up, graph_outputs=True)
        self.ed.drop(node)
        out.name = f"{out_name}__removed"
        self.to_quantize.pop(up.name or "", None)
        up.name = out_name
        self.ed.values[out_name] = up
        return True

    def mark_node(self, node: ir.Node) -> None:
        op = node.op_type
        ins, outs = io_names(node)
        if op in ("Conv", "ConvTranspose"):
            self.mark(ins[0])
            if self._out(node):
                self.mark(outs[0])
            self.mark_weight(ins[1], 0 if op == "Conv" else 1)
            if len(ins) > 2 and ins[2]:
                self.mark_bias(node, ins[2], ins[0], ins[1])
        elif op == "Gemm":
            self.mark(ins[0])
            if self._out(node):
                self.mark(outs[0])
            self.mark_weight(ins[1], 0 if attr(node, "transB", 0) else 1)
            if len(ins) > 2 and ins[2] and self.ed.is_initializer(ins[2]):
                self.mark_bias(node, ins[2], ins[0], ins[1], float(attr(node, "beta", 1.0)))
                if "beta" in node.attributes:
                    node.attributes["beta"] = ir.AttrFloat32("beta", 1.0)
        elif op == "MatMul":
            names = ins + (outs if self._out(node) else [])
            for name in names:
                if self.ed.is_initializer(name):
                    self.mark_weight(name, 1, op)
                else:
                    self.mark(name)
        elif op in ("Clip", "Relu"):
            if not self.is_quantized(ins[0]):
                return
            if (
                self.opts.activation_symmetric
                or self.keep_removable
                or not self._replace_upstream(node)
            ):
                self.mark(ins[0])
                if self._out(node):
                    self.mark(outs[0])
            elif self._out(node):
                self.mark(outs[0])
        elif op in _DIRECT_8BIT or (op == "MaxPool" and self.opset >= 12):
            if self.force:
                self.mark(ins[0])
                if self._out(node):
                    self._share(node, outs[0], ins[0])
            elif self.is_quantized(ins[0]) and self._out(node):
                self._share(node, outs[0], ins[0])
        elif op == "MaxPool":
            return
        elif op == "Split":
            self.mark(ins[0])
            if self._out(node):
                for o in outs:
                    self._share(node, o, ins[0])
        elif op in ("Gather", "GatherElements"):
            if (self.ed.is_initializer(ins[0]) and self.ed.is_float(ins[0])) or self.force:
                self.mark(ins[0])
                self._share(node, outs[0], ins[0])
            elif self.is_quantized(ins[0]):
                self._share(node, outs[0], ins[0])
        elif op in _NORMS:
            self.mark(ins[0])
            if self.per_channel_axis_of(ins[1], 1, op) is not None:
                self.mark_weight(ins[1], 1, op)
            elif self.ed.is_initializer(ins[1]):
                self.mark(ins[1], weight=True)
            else:
                self.mark(ins[1])
            if len(ins) > 2 and ins[2]:
                self.mark_bias(node, ins[2], ins[0], ins[1])
            if self._out(node):
                for o in outs:
                    self.mark(o)
        else:
            for name in ins + (outs if self._out(node) else []):
                self.mark(name)

    # -- parameters ------------------------------------------------------------------------------
    def _initializer_params(self) -> None:
        for name, info in self.to_quantize.items():
            data = self.ed.initializer(name)
            if data is None:
                continue
            qtype = self.opts.weight_qtype if info.weight else self.opts.activation_qtype
            per_channel = info.axis is not None
            symmetric = per_channel or (
                self.opts.weight_symmetric(qtype) if info.weight else self.opts.activation_symmetric
            )
            zp, scale, _ = weight_params(
                data, qtype, symmetric, self.opts.reduce_range, info.axis, self.opts.min_real_range
            )
            self.init_params[name] = (zp, scale, qtype, info.axis)

    def _adjust_weights_for_bias(self) -> None:
        if self.no_bias_adjust:
            return
        qrange = float(np.iinfo(np.int32).max) - float(np.iinfo(np.int32).min + 1)
        for bias, (_node, inp, weight, _beta) in self.bias_to_quantize.items():
            if (
                inp not in self.act_params
                or inp not in self.to_quantize
                or weight not in self.init_params
            ):
                continue
            zp, scale, qtype, axis = self.init_params[weight]
            if qtype not in (TensorProto.INT8, TensorProto.INT16) or zp.any():
                continue
            input_scale = float(self.act_params[inp][1])
            data = np.asarray(self.ed.initializer(bias), dtype=np.float64)
            scale = scale.copy()
            # (channel, |bias| max); channel None for a per-tensor scale.
            targets: list[tuple[int | None, float]]
            if axis is None:
                absmax = max(abs(min(data.min(initial=0), 0)), abs(max(data.max(initial=0), 0)))
                targets = [(None, float(absmax))]
            else:
                targets = [(i, float(abs(data[i]))) for i in range(scale.shape[0])]
            changed = False
            for i, absmax in targets:
                smallest = 1.0001 * (2.0 * absmax) / qrange
                current = float(scale if i is None else scale[i])
                candidate = input_scale * current
                if 0.0 < candidate < smallest:
                    new = np.array(current * smallest / candidate).astype(scale.dtype)
                    if i is None:
                        scale = new
                    else:
                        scale[i] = new
                    changed = True
            if changed:
                self.init_params[weight] = (zp, scale, qtype, axis)

    # -- insertion -------------------------------------------------------------------------------
    def _scale_zp_inits(
        self, name: str, zp: np.ndarray, scale: np.ndarray, suffix: str = ""
    ) -> tuple[str, str]:
        zp_name, scale_name = f"{name}_zero_point{suffix}", f"{name}_scale{suffix}"
        self.ed.add_initializer(zp_name, np.asarray(zp))
        self.ed.add_initializer(scale_name, np.asarray(scale))
        return scale_name, zp_name

    def _qdq_nodes(
        self,
        src: ir.Value,
        q_out: str,
        q_name: str,
        dq_out: str,
        dq_name: str,
        s: str,
        z: str,
        axis: int | None = None,
    ) -> tuple[ir.Node, ir.Node]:
        q = self.ed.node(
            "QuantizeLinear", [src, s, z], [q_out], q_name, domain=self.domain, axis=axis
        )
        dq = self.ed.node(
            "DequantizeLinear", [q_out, s, z], [dq_out], dq_name, domain=self.domain, axis=axis
        )
        return q, dq

    def _add_for_initializer(self, name: str) -> None:
        zp, scale, qtype, axis = self.init_params[name]
        s, z = self._scale_zp_inits(name, zp.astype(NP_TYPES[qtype]), scale)
        old = self.ed.value(name)
        dq_out = f"{name}_DequantizeLinear_Output"
        if self.qdq_pair_to_weight:
            q, dq = self._qdq_nodes(
                old,
                f"{name}_QuantizeLinear_Output",
                f"{name}_QuantizeLinear",
                dq_out,
                f"{name}_DequantizeLinear",
                s,
                z,
                axis,
            )
            self.ed.redirect(old, dq.outputs[0], skip=q, same_graph=True)
            q_name = None
        else:
            data = self.ed.initializer(name)
            assert data is not None
            if axis is None:
                qdata = quantize_array(qtype, data, scale, zp)
            else:
                shape = [1] * data.ndim
                shape[axis] = -1
                qdata = quantize_array(
                    qtype, data, scale.reshape(shape), zp.astype(np.float32).reshape(shape)
                )
            q_name = f"{name}_quantized"
            self.ed.add_initializer(q_name, qdata)
            dq = self.ed.node(
                "DequantizeLinear",
                [q_name, s, z],
                [dq_out],
                f"{name}_DequantizeLinear",
                domain=self.domain,
                axis=axis,
            )
            self.ed.redirect(old, dq.outputs[0], skip=dq, same_graph=True)
        self.quantized[name] = _Quantized(q_name, s, z, axis)

    def _add_for_activation(self, name: str, s: str, z: str) -> None:
        v = self.ed.value(name)
        receivers = self.receivers.get(name, [])
        if self.dedicated and len(receivers) > 1:
            for i, node in enumerate(receivers):
                sfx = f"_{i + 1}"
                _, dq = self._qdq_nodes(
                    v,
                    f"{name}_QuantizeLinear_Output{sfx}",
                    f"{name}_QuantizeLinear{sfx}",
                    f"{name}_DequantizeLinear_Output{sfx}",
                    f"{name}_DequantizeLinear{sfx}",
                    s,
                    z,
                )
                for j, inp in enumerate(node.inputs):
                    if inp is v:
                        node.replace_input_with(j, dq.outputs[0])
                if i == 0:
                    self.quantized[name] = _Quantized(dq.outputs[0].name, s, z)
            return
        if v.is_graph_output():
            v.name = f"{name}_QuantizeLinear_Input"
            self.ed.values[v.name] = v
            q, dq = self._qdq_nodes(
                v,
                f"{name}_QuantizeLinear_Output",
                f"{name}_QuantizeLinear",
                name,
                f"{name}_DequantizeLinear",
                s,
                z,
            )
            self.ed.redirect(v, dq.outputs[0], skip=q, graph_outputs=True, same_graph=True)
            self.quantized[name] = _Quantized(name, s, z)
        else:
            dq_out = f"{name}_DequantizeLinear_Output"
            q, dq = self._qdq_nodes(
                v,
                f"{name}_QuantizeLinear_Output",
                f"{name}_QuantizeLinear",
                dq_out,
                f"{name}_DequantizeLinear",
                s,
                z,
            )
            self.ed.redirect(v, dq.outputs[0], skip=q, same_graph=True)
            self.quantized[name] = _Quantized(dq_out, s, z)

    def _quantize_normal(self) -> None:
        for name, info in list(self.to_quantize.items()):
            if name in self.quantized or info.provider is not None:
                continue
            if name in self.init_params:
                self._add_for_initializer(name)
            else:
                if name not in self.act_params:
                    raise ValueError(
                        f"no calibrated range for tensor {name!r}: static quantization needs "
                        "the ranges of the inputs and outputs of every node it quantizes "
                        "(is it produced by the calibration data?)"
                    )
                zp, scale, qtype = self.act_params[name]
                s, z = self._scale_zp_inits(name, zp.astype(NP_TYPES[qtype]), scale)
                self._add_for_activation(name, s, z)
            del self.to_quantize[name]

    def _quantize_shared(self) -> None:
        while self.to_quantize:
            progressed = False
            for name, info in list(self.to_quantize.items()):
                assert info.provider is not None
                src = self.quantized.get(info.provider[0])
                if src is None:
                    continue
                del self.to_quantize[name]
                progressed = True
                if self.ed.is_initializer(name):
                    raise ValueError(
                        f"cannot share quantization parameters with initializer {name!r}"
                    )
                self._add_for_activation(name, src.scale, src.zero_point)
            if not progressed:
                raise ValueError(
                    f"tensors {sorted(self.to_quantize)} share parameters with tensors "
                    "never quantized"
                )

    def _quantize_biases(self) -> None:
        for bias, (_node, inp, weight, beta) in self.bias_to_quantize.items():
            if bias in self.quantized:
                continue
            w, x = self.quantized.get(weight), self.quantized.get(inp)
            if w is None or x is None:
                missing = weight if w is None else inp
                raise ValueError(
                    f"bias {bias!r}: {missing!r} is not quantized, so the bias scale is unknown"
                )
            weight_scale = self.ed.initializer(w.scale)
            input_scale = self.ed.initializer(x.scale)
            data = self.ed.initializer(bias)
            assert weight_scale is not None and input_scale is not None and data is not None
            bias_scale = input_scale * weight_scale * beta
            q_name = f"{bias}_quantized"
            self.ed.add_initializer(q_name, quantize_bias_int32(data, bias_scale))
            s = self.ed.add_initializer(
                f"{q_name}_scale", np.asarray(bias_scale, data.dtype).reshape(-1)
            ).name
            zp = (
                np.zeros(bias_scale.size, np.int32)
                if bias_scale.size > 1
                else np.array(0, np.int32)
            )
            z = self.ed.add_initializer(f"{q_name}_zero_point", zp).name
            axis = 0 if bias_scale.size > 1 else None
            old = self.ed.value(bias)
            del self.model.graph.initializers[bias]
            old.name = f"{bias}__float"
            dq = self.ed.node(
                "DequantizeLinear",
                [q_name, s, z],
                [bias],
                f"{bias}_DequantizeLinear",
                domain=self.domain,
                axis=axis,
            )
            self.ed.redirect(old, dq.outputs[0])
            self.quantized[bias] = _Quantized(q_name, s or "", z or "", axis)

    def quantize_model(self) -> onnx.ModelProto:
        """Mark, compute the parameters, insert the pairs; the quantized model."""
        for node in list(self.model.graph):
            if self.opts.should_quantize_node(node):
                ins = [v.name for v in node.inputs if v is not None]
                self.mark_node(node)
                if node.graph is not None:
                    for name in ins:
                        self.receivers.setdefault(name or "", []).append(node)
        self._initializer_params()
        self._adjust_weights_for_bias()
        self._quantize_normal()
        self._quantize_shared()
        if self.quantize_bias:
            self._quantize_biases()
        if not self.qdq_pair_to_weight:
            self.ed.clean_initializers()
        if self.domain == ms_domain:
            self.model.opset_imports[ms_domain] = 1
        return to_proto(self.model)
