"""QOperator format and dynamic quantization: float operators replaced by quantized ones.

Static (QLinearOps): QLinearConv, QLinearMatMul and com.microsoft QGemm,
QLinearAdd/Mul, QLinearConcat, QLinear(Global)AveragePool, QLinearSigmoid,
QLinearLeakyRelu, QLinearSoftmax; pass-through operators (Reshape, MaxPool...)
run on the quantized tensor; Relu/Clip vanish into their producer's range.
Dynamic (IntegerOps): DynamicQuantizeLinear + MatMulInteger/ConvInteger + Cast
+ Mul (+ Add bias), QAttention, quantized Gather tables. A quantized tensor a
float operator reads is dequantized in front of it. Names and per-op rules
follow onnxruntime's ONNXQuantizer.
"""

from __future__ import annotations

from collections.abc import Callable

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
from .qoperator_ops import HANDLERS_DYNAMIC, HANDLERS_STATIC, QV
from .quant_utils import NP_TYPES, QuantizationMode, ms_domain

__all__ = ["QOperatorQuantizer", "QV"]


class QOperatorQuantizer:
    """Quantizes one graph (and, with EnableSubgraph, its subgraphs) in QOperator form."""

    def __init__(
        self,
        model: onnx.ModelProto | ir.Model,
        opts: Options,
        mode: QuantizationMode,
        static: bool,
        tensors_range: TensorsData | None,
        parent: QOperatorQuantizer | None = None,
        graph: ir.Graph | None = None,
    ) -> None:
        self.opts = opts
        self.mode = mode
        self.static = static
        self.parent = parent
        self.model = model if isinstance(model, ir.Model) else ir.serde.deserialize_model(model)
        self.graph = graph if graph is not None else self.model.graph
        self.ed: Editor = Editor(self.graph, parent.ed if parent else None)
        self.opset = self.model.opset_imports.get("", 13)
        if not static and parent is None:
            _replace_gemm_with_matmul(self.model.graph)
            self.ed = Editor(self.graph)
        self.matmul_const_b_only = bool(opts.extra.get("MatMulConstBOnly", False))
        self.subgraphs = bool(opts.extra.get("EnableSubgraph", False))
        self.force = bool(opts.extra.get("ForceQuantizeNoInputCheck", False))
        # {tensor: (zero_point, scale, qtype)}, shared with subgraphs.
        self.params: dict[str, tuple[np.ndarray, np.ndarray, int]]
        if parent is not None:
            self.params = parent.params
        elif tensors_range is not None:
            self.params = activation_params(
                opts, adjust_tensor_ranges(opts, self.graph, tensors_range)
            )
        else:
            self.params = {}
        self.qmap: dict[str, QV] = {}
        self.orphans: dict[str, ir.Value] = {}
        self.handlers: dict[str, Callable[[QOperatorQuantizer, ir.Node], bool]] = (
            HANDLERS_DYNAMIC if mode == QuantizationMode.IntegerOps else HANDLERS_STATIC
        )

    # -- lookups ---------------------------------------------------------------------------------
    def is_valid_weight(self, name: str) -> bool:
        """A float initializer here (or in an outer scope, with EnableSubgraph)."""
        if self.ed.is_initializer(name):
            return self.ed.is_float(name)
        return self.subgraphs and self.parent is not None and self.parent.is_valid_weight(name)

    def initializer_in_path(self, name: str) -> bool:
        return self.ed.is_initializer(name) or (
            self.parent is not None and self.parent.initializer_in_path(name)
        )

    def is_float(self, name: str) -> bool:
        if self.ed.is_initializer(name):
            return self.is_valid_weight(name)
        return self.ed.is_float(name)

    def find_quantized(self, name: str) -> QV | None:
        if name in self.qmap:
            return self.qmap[name]
        return self.parent.find_quantized(name) if self.parent is not None else None

    def elem_type(self, name: str) -> int:
        t = self.ed.elem_type(name)
        if t:
            return t
        if "DefaultTensorType" in self.opts.extra:
            return int(self.opts.extra["DefaultTensorType"])
        raise RuntimeError(
            f"unable to find the element type of tensor {name!r}: shape inference gave "
            "none (an operator of another domain?). Set "
            "extra_options['DefaultTensorType'] (usually onnx.TensorProto.FLOAT)."
        )

    # -- quantizing values -----------------------------------------------------------------------
    def output_params(
        self, name: str, use_scale: float | None = None, use_zp: int | None = None
    ) -> tuple[str, str] | None:
        """The ``(scale, zero_point)`` initializer names of a node output (None: no range)."""
        if name not in self.params:
            return None
        zp, scale, qtype = self.params[name]
        if use_scale is not None and use_zp is not None:
            zp, scale = np.asarray(use_zp), np.asarray(use_scale, dtype=scale.dtype)
        s = self.ed.add_initializer(
            f"{name}_scale", np.asarray(scale).reshape(()), where=self.ed.root()
        ).name
        z = self.ed.add_initializer(
            f"{name}_zero_point",
            np.asarray(zp).astype(NP_TYPES[qtype]).reshape(()),
            where=self.ed.root(),
        ).name
        return s or "", z or ""

    def quantize_initializer(
        self, name: str, qtype: int, reduce_range: bool, axis: int | None = None
    ) -> QV:
        if name in self.qmap:
            return self.qmap[name]
        owner = self
        while not owner.ed.is_initializer(name) and owner.parent is not None:
            owner = owner.parent
        data = owner.ed.initializer(name)
        if data is None:
            raise ValueError(f"{name!r} is not an initializer")
        if qtype == self.opts.weight_qtype:
            symmetric = self.opts.weight_symmetric(qtype)
        else:
            symmetric = self.opts.activation_symmetric
        if axis is not None:
            axis = axis + data.ndim if axis < 0 else axis
            if not 0 <= axis < data.ndim:
                raise ValueError(
                    f"weight {name!r}: per-channel axis {axis} is out of bounds "
                    f"for rank {data.ndim}"
                )
            symmetric = self.opts.weight_symmetric(qtype)
        zp, scale, q = weight_params(
            data,
            qtype,
            symmetric,
            self.opts.reduce_range and reduce_range,
            axis,
            self.opts.min_real_range,
        )
        shape = () if axis is None else (data.shape[axis],)
        owner.ed.add_initializer(f"{name}_quantized", q)
        owner.ed.add_initializer(f"{name}_scale", np.asarray(scale, data.dtype).reshape(shape))
        owner.ed.add_initializer(
            f"{name}_zero_point", np.asarray(zp).astype(NP_TYPES[qtype]).reshape(shape)
        )
        qv = QV(f"{name}_quantized", f"{name}_scale", f"{name}_zero_point", axis)
        owner.qmap[name] = qv
        return qv

    def _quantize_tensor(self, name: str, qtype: int) -> QV | None:
        """QuantizeLinear (static) or DynamicQuantizeLinear in front of a float tensor."""
        out = f"{name}_quantized"
        node_name = f"{name}_QuantizeLinear"
        found = self.output_params(name)
        if found is not None:
            self.ed.node("QuantizeLinear", [name, found[0], found[1]], [out], node_name)
            qv = QV(out, found[0], found[1])
        elif self.static:
            return None
        elif qtype == TensorProto.UINT8 and self.opset > 10:
            self.ed.node(
                "DynamicQuantizeLinear",
                [name],
                [out, f"{name}_scale", f"{name}_zero_point"],
                node_name,
            )
            qv = QV(out, f"{name}_scale", f"{name}_zero_point")
        else:
            raise NotImplementedError(
                f"dynamic quantization of {name!r} to {qtype} needs opset > 10 and uint8"
            )
        self.qmap[name] = qv
        return qv

    def quantize_inputs(
        self,
        node: ir.Node,
        indices: list[int],
        weight: bool = False,
        reduce_range: bool = False,
        per_channel: bool = False,
        axis: int = -1,
    ) -> list[QV | None] | None:
        """The quantized form of the node's inputs at ``indices`` (None if one cannot be)."""
        out: list[QV | None] = []
        ins, _ = io_names(node)
        for i in indices:
            name = ins[i] if i < len(ins) else ""
            if not name:
                out.append(None)
                continue
            qv = self._resolve(name, weight, reduce_range, per_channel, axis)
            if qv is None:
                return None
            out.append(qv)
        return out

    def _resolve(
        self, name: str, weight: bool, reduce_range: bool, per_channel: bool, axis: int
    ) -> QV | None:
        if name in self.qmap:
            return self.qmap[name]
        qtype = self.opts.weight_qtype if weight else self.opts.activation_qtype
        if self.ed.is_initializer(name):
            return self.quantize_initializer(
                name, qtype, reduce_range, axis if self.opts.per_channel and per_channel else None
            )
        if name in self.ed.values:
            return self._quantize_tensor(name, self.opts.activation_qtype)
        if self.parent is not None:
            return self.parent._resolve(name, weight, reduce_range, per_channel, axis)
        raise ValueError(f"invalid tensor name to quantize: {name!r} in graph {self.graph.name!r}")

    # -- replacing nodes -------------------------------------------------------------------------
    def replace(self, node: ir.Node, quantized_outputs: dict[int, QV] | None = None) -> None:
        """Drop ``node``.

        Outputs now quantized become orphans (dequantized if read); others were re-made.
        """
        _, out_names = io_names(node)
        for i, (out, out_name) in enumerate(zip(node.outputs, out_names, strict=True)):
            if quantized_outputs and i in quantized_outputs:
                self.qmap[out_name] = quantized_outputs[i]
                self.orphans[out_name] = out
            else:
                new = self.ed.values.get(out_name)
                if new is not None and new is not out:
                    self.ed.redirect(out, new, graph_outputs=True)
        self.ed.drop(node)

    def clone(
        self, node: ir.Node, inputs: list[str], outputs: list[str], name: str = ""
    ) -> ir.Node:
        """A copy of ``node`` reading/writing other tensors."""
        attrs = {k: a for k, a in node.attributes.items()}
        return self.ed.node(
            node.op_type, inputs, outputs, name or (node.name or ""), node.domain, attrs=attrs
        )

    def _dequantize_orphans(self) -> None:
        for name, value in self.orphans.items():
            if not value.uses() and not value.is_graph_output():
                continue
            qv = self.qmap[name]
            value.name = f"{name}__float"
            dq = self.ed.node(
                "DequantizeLinear",
                [qv.q_name, qv.scale, qv.zero_point],
                [name],
                f"{name}_DequantizeLinear",
                axis=qv.axis,
            )
            self.ed.redirect(value, dq.outputs[0], graph_outputs=True)

    def quantize_model(self) -> onnx.ModelProto | None:
        """Quantize every node it can; the model (None for a subgraph quantizer)."""
        for node in list(self.graph):
            if self.subgraphs:
                for a in node.attributes.values():
                    if a.type == ir.AttributeType.GRAPH:
                        QOperatorQuantizer(
                            self.model, self.opts, self.mode, self.static, None, self, a.value
                        ).quantize_model()
                    elif a.type == ir.AttributeType.GRAPHS:
                        for g in a.value:
                            QOperatorQuantizer(
                                self.model, self.opts, self.mode, self.static, None, self, g
                            ).quantize_model()
            handler = self.handlers.get(node.op_type)
            if handler is not None and self.opts.should_quantize_node(node):
                handler(self, node)
        self._dequantize_orphans()
        if self.parent is not None:
            return None
        self.ed.clean_initializers()
        if (
            any(n.domain == ms_domain for n in self.model.graph.all_nodes())
            and ms_domain not in self.model.opset_imports
        ):
            self.model.opset_imports[ms_domain] = 1
        return to_proto(self.model)


def _replace_gemm_with_matmul(graph: ir.Graph) -> None:
    """Gemm (alpha = beta = 1, no transA) as MatMul (+ Add): what dynamic quantization handles."""
    ed = Editor(graph)
    done: dict[str, str] = {}
    for node in list(graph):
        for a in node.attributes.values():
            if a.type == ir.AttributeType.GRAPH:
                _replace_gemm_with_matmul(a.value)
            elif a.type == ir.AttributeType.GRAPHS:
                for g in a.value:
                    _replace_gemm_with_matmul(g)
        if node.op_type != "Gemm" or node.domain not in ("", "ai.onnx"):
            continue
        if (
            attr(node, "alpha", 1.0) != 1.0
            or attr(node, "beta", 1.0) != 1.0
            or attr(node, "transA", 0)
        ):
            continue
        a_in, b_in = node.inputs[0], node.inputs[1]
        assert a_in is not None and b_in is not None
        ins, outs = io_names(node)
        b_name = ins[1]
        if attr(node, "transB", 0):
            data = ed.initializer(b_name)
            if data is not None:
                if b_name not in done:
                    new, n = f"{b_name}_Transposed", 0
                    while any(
                        new + s in ed.values for s in ("", "_quantized", "_scale", "_zero_point")
                    ):
                        n += 1
                        new = f"{b_name}_Transposed_{n}"
                    ed.add_initializer(new, np.ascontiguousarray(data.T))
                    done[b_name] = new
                b_name = done[b_name]
            else:
                t = ed.node(
                    "Transpose",
                    [b_in],
                    [f"{b_name}_Transposed"],
                    f"{node.name}_Transpose" if node.name else "",
                )
                b_name = t.outputs[0].name or ""
        out = node.outputs[0]
        has_bias = len(node.inputs) > 2 and node.inputs[2] is not None
        old_name = outs[0]
        mm_name = old_name + ("_MatMul" if has_bias else "")
        out.name = f"{old_name}__gemm"
        mm = ed.node(
            "MatMul", [a_in, b_name], [mm_name], f"{node.name}_MatMul" if node.name else ""
        )
        if out.dtype is not None:
            mm.outputs[0].dtype = out.dtype
        final = mm.outputs[0]
        if has_bias:
            add = ed.node(
                "Add",
                [mm_name, node.inputs[2]],
                [old_name],
                f"{node.name}_Add" if node.name else "",
            )
            if out.dtype is not None:
                add.outputs[0].dtype = out.dtype
            final = add.outputs[0]
        ed.redirect(out, final, graph_outputs=True)
        ed.drop(node)
    graph.sort()
