"""What the QDQ and QOperator quantizers share.

Options, the graph editor, weight and activation parameters.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto

from ._calib_data import TensorData, TensorsData
from .quant_utils import (
    NP_TYPES,
    compute_data_quant_params,
    compute_scale_zp,
    get_qmin_qmax_for_qType,
    quantize_array,
)

__all__ = ["Editor", "Options", "check_extra_options", "io_names"]

FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)

# extra_options keys this package acts on.
SUPPORTED_KEYS = frozenset(
    {
        "ActivationSymmetric",
        "ActivationRestrictedAsymmetric",
        "WeightSymmetric",
        "EnableSubgraph",
        "ForceQuantizeNoInputCheck",
        "MatMulConstBOnly",
        "AddQDQPairToWeight",
        "DedicatedQDQPair",
        "QDQOpTypePerChannelSupportToAxis",
        "CalibTensorRangeSymmetric",
        "CalibMovingAverage",
        "CalibMovingAverageConstant",
        "CalibMaxIntermediateOutputs",
        "CalibPercentile",
        "CalibStridedMinMax",
        "DefaultTensorType",
        "OpTypesToExcludeOutputQuantization",
        "QuantizeBias",
        "UseQDQContribOps",
        "MinimumRealRange",
        "QDQKeepRemovableActivations",
        "QDQDisableWeightAdjustForInt32Bias",
        "extra.Sigmoid.nnapi",
    }
)
# onnxruntime's keys this package does not implement: a clear error rather than a silent difference.
UNSUPPORTED_KEYS = frozenset(
    {"SmoothQuant", "SmoothQuantAlpha", "SmoothQuantFolding", "TensorQuantOverrides", "BlockSize"}
)
_warned: set[str] = set()


def check_extra_options(extra_options: dict[str, Any]) -> None:
    """Warn once per unknown key; NotImplementedError for onnxruntime keys not implemented here."""
    for key, value in extra_options.items():
        if key in SUPPORTED_KEYS:
            continue
        if key in UNSUPPORTED_KEYS:
            if value in (False, None, 0, {}, []) or (
                key == "SmoothQuantAlpha" or key == "SmoothQuantFolding"
            ):
                continue
            raise NotImplementedError(
                f"extra_options[{key!r}] is not supported by ortcore.quantization"
            )
        if key not in _warned:
            _warned.add(key)
            warnings.warn(
                f"extra_options: unknown key {key!r} is ignored", UserWarning, stacklevel=3
            )


@dataclass
class Options:
    """The quantization request, normalized."""

    per_channel: bool
    reduce_range: bool
    weight_qtype: int
    activation_qtype: int
    nodes_to_quantize: Sequence[str]
    nodes_to_exclude: Sequence[str]
    op_types_to_quantize: Sequence[str]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def activation_symmetric(self) -> bool:
        return bool(self.extra.get("ActivationSymmetric", False))

    @property
    def min_real_range(self) -> float | None:
        return self.extra.get("MinimumRealRange")

    def weight_symmetric(self, qtype: int) -> bool:
        """WeightSymmetric, by default True for the signed types."""
        explicit = self.extra.get("WeightSymmetric")
        if explicit is not None:
            return bool(explicit)
        return qtype in (
            TensorProto.INT4,
            TensorProto.INT8,
            TensorProto.INT16,
            TensorProto.FLOAT8E4M3FN,
        )

    def should_quantize_node(self, node: ir.Node) -> bool:
        if self.nodes_to_quantize and node.name not in self.nodes_to_quantize:
            return False
        if node.op_type not in self.op_types_to_quantize:
            return False
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            return False
        return not (self.nodes_to_exclude and node.name in self.nodes_to_exclude)


def attr(node: ir.Node, name: str, default: Any = None) -> Any:
    """An attribute's Python value."""
    a = node.attributes.get(name)
    return default if a is None else a.value


def io_names(node: ir.Node) -> tuple[list[str], list[str]]:
    """``node``'s input and output names, "" for an omitted optional one.

    A value without a name (one built in memory, never serialized) cannot be
    quantized by name: ValueError naming the node and the position.
    """

    def name(v: ir.Value | None, kind: str, i: int) -> str:
        if v is None:
            return ""
        if v.name is None:
            raise ValueError(
                f"node {node.name!r} ({node.op_type}): {kind} {i} has no name; "
                "quantization refers to tensors by name (name every value of the model)"
            )
        return v.name

    ins = [name(v, "input", i) for i, v in enumerate(node.inputs)]
    outs = [name(v, "output", i) for i, v in enumerate(node.outputs)]
    return ins, outs


def snap_uint8(
    rmin: Any, rmax: Any, qmin: int, qmax: int, min_real_range: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """ActivationRestrictedAsymmetric parameters.

    Zero point at qmin (rmin >= 0) or mid-range, scale covering both halves.
    """
    mid = (qmin + qmax + 1) // 2
    lo = min(float(np.squeeze(rmin)), 0.0)
    hi = max(float(np.squeeze(rmax)), 0.0)
    if min_real_range:
        hi = max(hi, lo + float(min_real_range))
    if hi <= lo:
        zp = qmin if lo >= 0 else mid
        absmax = max(abs(lo), abs(hi)) or 1.0
        denom = (qmax - qmin) if zp == qmin else max(1, (qmax - qmin) // 2)
        scale = absmax / max(1, denom)
    elif lo >= 0:
        zp, scale = qmin, hi / (qmax - qmin)
    else:
        zp, scale = mid, max(-lo / (mid - qmin), hi / (qmax - mid))
    if min_real_range and scale < min_real_range / (qmax - qmin):
        scale = min_real_range / (qmax - qmin)
    return np.array(zp, dtype=np.uint8), np.array(scale, dtype=np.float32)


def activation_params(
    opts: Options, tensors_range: TensorsData
) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """``{tensor: (zero_point, scale, qtype)}`` from the calibrated ranges."""
    out: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
    qtype = opts.activation_qtype
    symmetric = opts.activation_symmetric
    for name, td in tensors_range.items():
        if qtype == TensorProto.FLOAT8E4M3FN:
            from .quant_utils import _float8_scale

            zp, scale = _float8_scale(td.avg_std[1])
        else:
            rmin, rmax = td.range_value
            qmin, qmax = get_qmin_qmax_for_qType(qtype, reduce_range=False, symmetric=symmetric)
            zp, scale = compute_scale_zp(
                np.asarray(rmin), np.asarray(rmax), qmin, qmax, symmetric, opts.min_real_range
            )
            if (
                opts.extra.get("ActivationRestrictedAsymmetric")
                and qtype == TensorProto.UINT8
                and not symmetric
            ):
                zp, scale = snap_uint8(rmin, rmax, int(qmin), int(qmax), opts.min_real_range)
        out[name] = (np.asarray(zp).squeeze(), np.asarray(scale).squeeze(), qtype)
    return out


def adjust_tensor_ranges(opts: Options, graph: ir.Graph, tensors_range: TensorsData) -> TensorsData:
    """A Relu/Clip's producer takes the Relu's range (the Relu disappears).

    Softmax outputs [0, 1].
    """
    ranges = TensorsData(tensors_range.calibration_method, dict(tensors_range.items()))
    for node in graph:
        if not opts.should_quantize_node(node):
            continue
        if node.op_type in ("Clip", "Relu"):
            src = node.inputs[0]
            if src is None or len(src.uses()) != 1:
                continue
            ins, outs = io_names(node)
            if ins[0] in ranges and outs[0] in ranges:
                ranges[ins[0]] = ranges[outs[0]]
        elif node.op_type == "Softmax":
            _, outs = io_names(node)
            if outs[0] in ranges:
                ranges[outs[0]] = TensorData(lowest=np.float32(0.0), highest=np.float32(1.0))
    return ranges


def weight_params(
    data: np.ndarray,
    qtype: int,
    symmetric: bool,
    reduce_range: bool,
    axis: int | None,
    min_real_range: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(zero_point, scale, quantized)`` of a weight, per tensor (``axis`` None) or per channel."""
    if axis is None:
        zp, scale = compute_data_quant_params(
            data.ravel(), qtype, symmetric, reduce_range, min_real_range
        )
        return zp, scale, quantize_array(qtype, data, scale, zp)
    zps, scales, slices = [], [], []
    for i in range(data.shape[axis]):
        chunk = data.take(i, axis)
        zp, scale = compute_data_quant_params(
            chunk.ravel(), qtype, symmetric, reduce_range, min_real_range
        )
        zps.append(zp)
        scales.append(scale)
        slices.append(np.expand_dims(quantize_array(qtype, chunk, scale, zp), axis))
    quantized = np.concatenate(slices, axis) if slices else np.zeros(data.shape, NP_TYPES[qtype])
    return np.asarray(zps).reshape(-1), np.asarray(scales).reshape(-1), quantized


class Editor:
    """Name-based editing of an onnx-ir graph (and its outer scopes, for subgraphs)."""

    def __init__(self, graph: ir.Graph, parent: Editor | None = None) -> None:
        self.graph = graph
        self.parent = parent
        self.values: dict[str, ir.Value] = {}
        for v in graph.inputs:
            self.values[v.name or ""] = v
        for name, v in graph.initializers.items():
            self.values[name] = v
        for node in graph:
            for out in node.outputs:
                if out.name:
                    self.values[out.name] = out

    def root(self) -> Editor:
        return self if self.parent is None else self.parent.root()

    def find(self, name: str) -> ir.Value | None:
        """The value of that name here or in an outer scope."""
        v = self.values.get(name)
        if v is None and self.parent is not None:
            return self.parent.find(name)
        return v

    def value(self, name: str) -> ir.Value:
        v = self.find(name)
        if v is None:
            raise KeyError(f"no tensor named {name!r} in graph {self.graph.name!r}")
        return v

    def initializer(self, name: str, outer: bool = False) -> np.ndarray | None:
        """An initializer's array (here, or also in outer scopes with ``outer``)."""
        v = self.graph.initializers.get(name)
        if v is not None and v.const_value is not None:
            return v.const_value.numpy()
        if outer and self.parent is not None:
            return self.parent.initializer(name, outer=True)
        return None

    def is_initializer(self, name: str) -> bool:
        return name in self.graph.initializers

    def elem_type(self, name: str) -> int | None:
        v = self.find(name)
        if v is None:
            return None
        if v.const_value is not None:
            return int(v.const_value.dtype)
        return int(v.dtype) if v.dtype is not None else None

    def is_float(self, name: str) -> bool:
        return self.elem_type(name) in FLOAT_TYPES

    def add_initializer(
        self, name: str, array: np.ndarray, where: Editor | None = None
    ) -> ir.Value:
        """Register ``array`` as an initializer (kept if one of that name exists)."""
        ed = where or self
        existing = ed.graph.initializers.get(name)
        if existing is not None:
            return existing
        v = ir.Value(name=name, const_value=ir.tensor(np.asarray(array), name=name))
        ed.graph.register_initializer(v)
        ed.values[name] = v
        return v

    def node(
        self,
        op_type: str,
        inputs: Sequence[str | ir.Value | None],
        outputs: Sequence[str],
        name: str = "",
        domain: str = "",
        attrs: Mapping[str, Any] | None = None,
        **attributes: Any,
    ) -> ir.Node:
        """Append a node reading named (or given) values; its outputs get ``outputs``' names.

        Its attributes are ``attrs`` (copied from another node: ``ir.Attr`` values) and the
        keyword ``attributes``; None values are left out.
        """
        ins: list[ir.Value | None] = []
        for i in inputs:
            if i is None or i == "":
                ins.append(None)
            else:
                ins.append(i if isinstance(i, ir.Value) else self.value(i))
        given = {**(attrs or {}), **attributes}
        kept = {k: v for k, v in given.items() if v is not None}
        node = ir.node(
            op_type, ins, kept, domain=domain, num_outputs=len(outputs), name=name or None
        )
        for out, out_name in zip(node.outputs, outputs, strict=True):
            out.name = out_name
            self.values[out_name] = out
        self.graph.append(node)
        return node

    def drop(self, node: ir.Node) -> None:
        """Remove a node, detaching its inputs (its outputs keep their uses)."""
        for i in range(len(node.inputs)):
            node.replace_input_with(i, None)
        self.graph.remove(node, safe=False)

    def redirect(
        self,
        old: ir.Value,
        new: ir.Value,
        skip: ir.Node | None = None,
        graph_outputs: bool = False,
        same_graph: bool = False,
    ) -> None:
        """Every use of ``old`` reads ``new``.

        Except ``skip``'s; with ``same_graph`` only this graph's nodes.
        """
        for use in list(old.uses()):
            if use.node is not skip and not (same_graph and use.node.graph is not self.graph):
                use.node.replace_input_with(use.idx, new)
        if graph_outputs:
            if new.type is None:
                new.type, new.shape = old.type, old.shape
            for i, out in enumerate(self.graph.outputs):
                if out is old:
                    self.graph.outputs[i] = new

    def consumers(self, name: str) -> list[ir.Node]:
        v = self.find(name)
        return [] if v is None else [u.node for u in v.uses()]

    def is_graph_output(self, name: str) -> bool:
        return any(o.name == name for o in self.graph.outputs)

    def is_graph_input(self, name: str) -> bool:
        return any(i.name == name for i in self.graph.inputs)

    def clean_initializers(self) -> None:
        """Drop initializers nothing reads."""
        for name, v in list(self.graph.initializers.items()):
            if not v.uses() and not v.is_graph_output():
                del self.graph.initializers[name]
                self.values.pop(name, None)


def to_proto(model: ir.Model) -> onnx.ModelProto:
    """The model sorted and serialized, stamped as onnxruntime's tool stamps it."""
    model.graph.sort()
    proto = ir.serde.serialize_model(model)
    proto.producer_name = "onnx.quantize"
    proto.producer_version = "0.1.0"
    return proto
