"""What the QDQ fusions share: reading a QuantizeLinear or DequantizeLinear
node's parameters, finding the DequantizeLinear nodes that feed an op and
the QuantizeLinear that reads it, new constants, and the rewrite itself.

A QDQ model (onnxruntime's ``quantize_static`` with ``QuantFormat.QDQ``)
writes each quantized op as float ops between ``DequantizeLinear`` (DQ) and
``QuantizeLinear`` (Q) nodes; the fusions of :mod:`ortcore.optimizer.qdq`
turn such a group into the one integer op the provider has a kernel for.
A group qualifies only where its scales and zero points are constants
(initializers no feed may replace), 8-bit (uint8 or int8), per tensor or
along the axis the fused op can take, with ``block_size`` 0.

A DQ node read by several ops stays for the others while each op that can
fuse reads its quantized input directly (what onnxruntime's
EnsureUniqueDQForNodeUnit gives, without copying nodes); the float tensors
between the op and its Q must have no other reader and not be graph
outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ._common import attr_int
from ._fusion import FusionContext, op

__all__ = [
    "FLOAT",
    "QDQ_OPS",
    "as_value",
    "INT32",
    "MS_DOMAIN",
    "QUANT_TYPES",
    "QParams",
    "consumed_only_by",
    "dq_of",
    "dq_params",
    "new_constant",
    "q_after",
    "q_params",
    "quantized_bias",
    "rank_of",
    "replace_group",
    "zero_point_of",
]

QDQ_OPS = ("DequantizeLinear", "QuantizeLinear")
"""What every QDQ pattern has one of (a QDQ fusion's ``anchored(needs=...)``):
a float graph is not walked by them."""

MS_DOMAIN = "com.microsoft"
"""onnxruntime's contrib domain, where QLinearAdd, QGemm, ... live."""

FLOAT = ir.DataType.FLOAT
INT32 = ir.DataType.INT32
QUANT_TYPES = frozenset({ir.DataType.UINT8, ir.DataType.INT8})
"""The quantized types the fused ops take."""

_INT_RANGE = {ir.DataType.UINT8: (0, 255), ir.DataType.INT8: (-128, 127)}


@dataclass(frozen=True)
class QParams:
    """The parameters of one QuantizeLinear or DequantizeLinear node.

    Attributes:
        node: the Q or DQ node.
        quantized: the 8-bit value (a DQ's input, a Q's output).
        scale: the scale input.
        zero_point: the zero-point input (``None``: absent, zero).
        scales: the scale's contents (float32).
        zero_points: the zero point's contents (zeros when absent), of the
            quantized type, the scale's shape.
        dtype: the quantized element type (uint8 or int8).
        axis: ``None`` for per-tensor parameters, else the axis (not
            negative) of the per-axis ones.
    """

    node: ir.Node
    quantized: ir.Value
    scale: ir.Value
    zero_point: ir.Value | None
    scales: np.ndarray
    zero_points: np.ndarray
    dtype: ir.DataType
    axis: int | None

    @property
    def per_tensor(self) -> bool:
        """Whether one scale and zero point cover the whole tensor."""
        return self.axis is None

    @property
    def qmin(self) -> int:
        """The smallest value of the quantized type."""
        return _INT_RANGE[self.dtype][0]

    @property
    def qmax(self) -> int:
        """The largest value of the quantized type."""
        return _INT_RANGE[self.dtype][1]

    def same_as(self, other: QParams) -> bool:
        """Whether ``other`` quantizes exactly as this does (type, axis, values)."""
        return (
            self.dtype == other.dtype
            and self.axis == other.axis
            and self.scales.size == other.scales.size
            and bool(np.array_equal(self.scales.reshape(-1), other.scales.reshape(-1)))
            and bool(np.array_equal(self.zero_points.reshape(-1), other.zero_points.reshape(-1)))
        )

    def quantize(self, x: float) -> int:
        """``x`` quantized as the Q kernel does (per tensor): float32
        division, round half to even, saturation."""
        s, z = np.float32(self.scales.reshape(-1)[0]), int(self.zero_points.reshape(-1)[0])
        q = float(np.rint(np.float32(x) / s)) if np.isfinite(x) else x
        return int(np.clip(q + z, self.qmin, self.qmax))


def rank_of(v: ir.Value | None) -> int | None:
    """The rank of ``v``'s inferred shape, if known."""
    return None if v is None or v.shape is None else len(v.shape)


def _params(ctx: FusionContext, node: ir.Node, float_side: ir.Value | None) -> QParams | None:
    if len(node.inputs) < 2 or node.inputs[1] is None or float_side is None:
        return None
    if attr_int(node, "block_size", 0) != 0 or float_side.dtype != FLOAT:
        return None
    quantized = node.inputs[0] if node.op_type == "DequantizeLinear" else node.outputs[0]
    if quantized is None or quantized.dtype not in QUANT_TYPES:
        return None
    scale = node.inputs[1]
    scales = ctx.const(scale)
    if scales is None or scales.dtype != np.float32 or scales.ndim > 1 or scales.size == 0:
        return None
    if not (np.all(np.isfinite(scales)) and np.all(scales > 0)):
        return None
    zp = node.inputs[2] if len(node.inputs) > 2 else None
    np_type = np.uint8 if quantized.dtype == ir.DataType.UINT8 else np.int8
    if zp is None:
        zps = np.zeros(scales.shape, np_type)
    else:
        z = ctx.const(zp)
        if z is None or z.dtype != np_type or z.size != scales.size:
            return None
        zps = z.reshape(scales.shape)
    axis: int | None = None
    if scales.size > 1:
        rank = rank_of(quantized)
        if rank is None or ctx.opset < 13:
            return None
        axis = attr_int(node, "axis", 1)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            return None
        dim = quantized.shape[axis] if quantized.shape is not None else None
        if isinstance(dim, int) and dim != scales.size:
            return None
    return QParams(node, quantized, scale, zp, scales, zps, quantized.dtype, axis)


def dq_params(ctx: FusionContext, node: ir.Node | None) -> QParams | None:
    """The parameters of ``node`` if it is a fusable DequantizeLinear (see the
    module docstring), else ``None``."""
    if node is None or not op(node, "DequantizeLinear") or node.graph is not ctx.graph:
        return None
    return _params(ctx, node, node.outputs[0])


def q_params(ctx: FusionContext, node: ir.Node | None) -> QParams | None:
    """The parameters of ``node`` if it is a fusable QuantizeLinear, else ``None``."""
    if node is None or not op(node, "QuantizeLinear") or node.graph is not ctx.graph:
        return None
    return _params(ctx, node, node.inputs[0])


def dq_of(ctx: FusionContext, v: ir.Value | None) -> QParams | None:
    """The parameters of the fusable DequantizeLinear that computes ``v``."""
    return None if v is None else dq_params(ctx, v.producer())


def q_after(ctx: FusionContext, v: ir.Value) -> QParams | None:
    """The parameters of the fusable QuantizeLinear that alone reads ``v``
    (``v`` no graph output)."""
    user = ctx.sole_user(v)
    if user is None or user.inputs[0] is not v:
        return None
    return q_params(ctx, user)


def consumed_only_by(ctx: FusionContext, node: ir.Node, group: Iterable[ir.Node]) -> bool:
    """Whether every output of ``node`` is read only by nodes of ``group``
    and none is a graph output (``node`` may then go with them)."""
    members = set(group)
    outputs = set(ctx.graph.outputs)
    for out in node.outputs:
        if out in outputs or any(u.node not in members for u in out.uses()):
            return False
    return True


def new_constant(ctx: FusionContext, array: np.ndarray, hint: str) -> ir.Value:
    """A new initializer of ``ctx.graph`` holding ``array``, named after ``hint``."""
    taken = set(ctx.graph.initializers)
    taken.update(v.name for n in ctx.graph for v in n.outputs if v.name)
    taken.update(v.name for v in ctx.graph.inputs if v.name)
    k = 0
    while f"{hint}_qdq{k}" in taken:
        k += 1
    value = ir.Value(
        name=f"{hint}_qdq{k}",
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
        const_value=ir.Tensor(array),
    )
    ctx.graph.register_initializer(value)
    return value


def zero_point_of(ctx: FusionContext, p: QParams) -> ir.Value:
    """``p``'s zero-point input, or a new zero of its type where it has none
    (the standard QLinear ops require one)."""
    if p.zero_point is not None:
        return p.zero_point
    return new_constant(ctx, np.zeros(p.scales.shape, p.zero_points.dtype), "zero_point")


def _dequantized(values: np.ndarray, scales: np.ndarray, zps: np.ndarray, axis: int | None):  # type: ignore[no-untyped-def]
    """``(values - zps) * scales`` in float64, per axis when ``axis`` is set."""
    shape = [1] * values.ndim
    if axis is not None and scales.size > 1:
        shape[axis] = scales.size
    s = scales.astype(np.float64).reshape(shape if scales.size > 1 else ())
    z = zps.astype(np.float64).reshape(shape if zps.size > 1 else ())
    return (values.astype(np.float64) - z) * s


def quantized_bias(
    ctx: FusionContext, bias: ir.Value, scale: np.ndarray
) -> tuple[ir.Value | np.ndarray, ir.Node | None] | None:
    """An int32 bias of scale ``scale`` (zero point 0) for ``bias`` (a value,
    or new contents to make a constant of with :func:`as_value`), and the
    DequantizeLinear node it replaces (if any).

    ``bias`` is either the output of a DequantizeLinear of int32 data whose
    scale is ``scale`` and zero point 0 (as onnxruntime's quantizer writes
    it: that data is used as it is), or a constant (a float one, or a DQ of
    a constant with other parameters), requantized to ``scale`` here: the
    result then differs from the float bias by at most half a unit of
    ``scale``, far below one unit of the op's output. ``scale`` is a scalar
    or one value per output channel, along the bias's last axis.
    """
    node = bias.producer()
    target = np.asarray(scale, np.float64)
    if node is not None and op(node, "DequantizeLinear"):
        if node.graph is not ctx.graph or bias.dtype != FLOAT or len(node.inputs) < 2:
            return None
        data = node.inputs[0]
        if data is None or data.dtype != INT32 or attr_int(node, "block_size", 0) != 0:
            return None
        s = ctx.const(node.inputs[1])
        zv = node.inputs[2] if len(node.inputs) > 2 else None
        z = np.zeros(1, np.int32) if zv is None else ctx.const(zv)
        if s is None or z is None or s.ndim > 1:
            return None
        if s.size == target.size or (s.size == 1 and target.size == 1):
            same = np.allclose(s.reshape(-1), target.reshape(-1), rtol=1e-6, atol=0)
            if same and not np.any(z):
                return data, node
        values = ctx.const(data)
        if values is None:
            return None
        axis = None
        if s.size > 1:
            axis = attr_int(node, "axis", 1)
            axis = axis + values.ndim if axis < 0 else axis
            if not 0 <= axis < values.ndim:
                return None
        floats = _dequantized(values, s, z.reshape(s.shape) if z.size > 1 else z, axis)
    else:
        c = ctx.const(bias)
        if c is None or c.dtype != np.float32:
            return None
        floats, node = c.astype(np.float64), None
    if floats.ndim == 0 or (target.size > 1 and floats.shape[-1] != target.size):
        return None
    q = np.rint(floats / target.reshape(-1))
    if np.abs(q).max(initial=0) >= 2**31 - 1:
        return None
    return q.astype(np.int32), node


def as_value(ctx: FusionContext, v: ir.Value | np.ndarray | None, hint: str) -> ir.Value | None:
    """``v``, or a new constant holding it if it is an array."""
    return new_constant(ctx, v, hint) if isinstance(v, np.ndarray) else v


def replace_group(
    ctx: FusionContext,
    inputs: Sequence[ir.Node],
    body: Sequence[ir.Node],
    fused: ir.Node,
    out: ir.Value,
) -> None:
    """Put ``fused`` in place of ``body`` (the op, any nodes after it, its Q:
    the last comes last), ``fused.outputs[0]`` taking ``out``'s place; each
    DQ of ``inputs`` that only the group reads goes too, the others stay for
    their other readers."""
    group = [*inputs, *body]
    gone = [n for n in dict.fromkeys(inputs) if consumed_only_by(ctx, n, group)]
    ctx.replace([*gone, *body], fused, [(out, fused.outputs[0])], at=body[-1])
    if fused.domain == MS_DOMAIN:
        ctx.model.opset_imports.setdefault(MS_DOMAIN, 1)
