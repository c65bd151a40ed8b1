"""What OpenVINO runs but does not compute as ONNX says: those nodes are declined.

``Core.query_model`` says which ops OpenVINO *can* run; it accepts many it
then runs with other semantics. Each rule here declines such nodes, with a
reason naming OpenVINO, the type or attribute and what goes wrong, so that a
model's node falls back to the next provider (the CPU provider) instead of
giving wrong numbers. Each rule was found by a failing conformance case
(``ortcore conformance --provider openvino``) or, for the siblings of a
failing op (int64 Div next to int64 Add), by running the op on OpenVINO's CPU
plugin against ONNX's reference; see "Declines and waivers" in the plugin's
README.

The rules stay narrow so that real models stay in few groups: the int64 rule
leaves shape arithmetic (values computed from ``Shape`` and small constants)
to OpenVINO, and no rule looks at float32 or float16 ops in general.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import onnx_ir as ir
from ep_sdk.capability import GraphContext
from ep_sdk.graph import is_constant

__all__ = ["decline_reason"]

T = ir.DataType

# -- types: values OpenVINO's CPU plugin holds in another type ----------------------

_EVERYWHERE: dict[ir.DataType, str] = {
    T.DOUBLE: "OpenVINO's CPU plugin computes float64 in float32 (precision is lost and "
    "values beyond 3.4e38 saturate)",
    T.UINT64: "OpenVINO's CPU plugin holds uint64 in 32 bits (values of 2^31 and above "
    "come out wrong, even through Reshape)",
    T.STRING: "OpenVINO's CPU plugin does not compute on strings",
}

_ARITHMETIC = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Sign", "Pow", "Sum", "Mean",
        "Max", "Min", "Clip", "CumSum", "MatMul", "Gemm", "Einsum",
        "ReduceSum", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
        "ReduceMax", "ReduceMin", "ReduceMean",
    }
)  # fmt: skip
_SATURATING = frozenset(
    {"Add", "Sub", "Mul", "Neg", "Abs", "Pow", "Sum", "CumSum", "MatMul", "Gemm", "Einsum"}
    | {"ReduceSum", "ReduceProd", "ReduceSumSquare"}
)
_ORDERED = frozenset(
    {
        "Div", "Mod", "Max", "Min", "Clip", "Abs", "Sign", "Pow", "MatMul", "Gemm",
        "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "ArgMax", "ArgMin", "TopK",
        "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceMean",
    }
)  # fmt: skip
_WIDE_16 = frozenset({"MatMul", "Gemm", "Einsum", "ReduceSum", "ReduceProd", "ReduceMax"})
_INTEGERS = frozenset({T.INT8, T.UINT8, T.INT16, T.UINT16, T.INT32, T.UINT32, T.INT64, T.UINT64})
_FLOAT8 = frozenset({T.FLOAT8E4M3FN, T.FLOAT8E5M2, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2FNUZ})

# -- shape arithmetic: int64 values that hold dimensions -----------------------------

_SHAPE_SOURCES = frozenset({"Shape", "Size"})
_SHAPE_OPS = frozenset(
    {
        "Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Reshape", "Identity", "Cast",
        "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Neg", "Abs", "Where", "Expand",
        "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "ConstantOfShape", "Range",
    }
)  # fmt: skip
_INT32_RANGE = (-(2**31), 2**31 - 1)
# ops OpenVINO's CPU plugin fails on when a data input has a zero-size dimension
_EMPTY_BROKEN: dict[str, str] = {
    "Gather": "crashes the process (a division by zero)",
    "MatMulInteger": "fails to compile",
    "Unique": "fails at run time",
    "ReduceMax": "gives the lowest finite value, not -inf",
    "ReduceMin": "gives the highest finite value, not inf",
}


def decline_reason(node: ir.Node, graph: GraphContext) -> str | None:
    """Why OpenVINO would run ``node`` wrong (``None``: no known reason)."""
    for check in _CHECKS:
        reason = check(node, graph)
        if reason:
            return reason
    return None


def _values(values: Iterable[ir.Value | None]) -> list[ir.Value]:
    return [v for v in values if v is not None]


def _dtypes(node: ir.Node) -> set[ir.DataType]:
    return {v.dtype for v in _values([*node.inputs, *node.outputs]) if v.dtype is not None}


def _data_dtypes(node: ir.Node) -> set[ir.DataType]:
    """The types of the node's data: its outputs and its first input (not
    the axes, shapes or indices that come after)."""
    values = _values([*node.inputs[:1], *node.outputs])
    return {v.dtype for v in values if v.dtype is not None}


def _attr(node: ir.Node, name: str, default: object = None) -> object:
    attr = node.attributes.get(name)
    return default if attr is None else attr.value


def _constant(value: ir.Value | None) -> np.ndarray | None:
    """The value's content when it is a constant (an initializer no feed
    replaces, or a ``Constant`` node's output)."""
    if value is None:
        return None
    if is_constant(value) and value.const_value is not None:
        return value.const_value.numpy()
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and not producer.domain:
        tensor = _attr(producer, "value")
        if isinstance(tensor, ir.TensorProtocol):
            return tensor.numpy()
        for name in ("value_int", "value_ints"):
            if name in producer.attributes:
                return np.asarray(producer.attributes[name].value, np.int64)
    return None


def _dims(value: ir.Value, memo: dict[ir.Value, bool] | None = None, depth: int = 0) -> bool:
    """Whether an integer value holds dimensions (or numbers as small): a
    constant in int32's range, or computed from ``Shape``/``Size`` and such
    constants by shape arithmetic (looked up to 32 producers back)."""
    memo = {} if memo is None else memo
    if value not in memo:
        memo[value] = False  # while being looked at
        memo[value] = _computes_dims(value, memo, depth)
    return memo[value]


def _computes_dims(value: ir.Value, memo: dict[ir.Value, bool], depth: int) -> bool:
    content = _constant(value)
    if content is not None:
        if content.dtype.kind not in "iub":
            return False
        return bool(
            content.size == 0
            or _INT32_RANGE[0] <= content.min() <= content.max() <= _INT32_RANGE[1]
        )
    producer = value.producer()
    if producer is None or depth > 32 or producer.domain:
        return False
    if producer.op_type in _SHAPE_SOURCES:
        return True
    if producer.op_type not in _SHAPE_OPS:
        return False
    ints = [v for v in _values(producer.inputs) if v.dtype in _INTEGERS]
    return all(_dims(v, memo, depth + 1) for v in ints)


# -- the checks, in order ------------------------------------------------------------


def _non_tensors(node: ir.Node, graph: GraphContext) -> str | None:
    """Sequences and optionals inside a group are OpenVINO's business; fed
    from the model's inputs or returned as its outputs, they would have to
    cross the bridge, which passes only arrays."""
    for v in _values([*node.inputs, *node.outputs]):
        if v.type is None or isinstance(v.type, ir.TensorType):
            continue
        if v.is_graph_input() or v.is_graph_output():
            return f"the OpenVINO bridge passes only tensors, not {v.type} ({v.name!r})"
    return None


def _everywhere(node: ir.Node, graph: GraphContext) -> str | None:
    for dtype in sorted(_dtypes(node) & _EVERYWHERE.keys(), key=int):
        return _EVERYWHERE[dtype]
    return None


def _integer_arithmetic(node: ir.Node, graph: GraphContext) -> str | None:
    if node.domain:
        return None
    op, data = node.op_type, _data_dtypes(node)
    if op == "Pow" and any(v.dtype in _INTEGERS for v in _values(node.outputs)):
        return "OpenVINO computes integer Pow in floating point (wrong beyond 2^24)"
    if op in _SATURATING and data & {T.INT8, T.UINT8}:
        return (
            f"OpenVINO's CPU plugin saturates int8/uint8 {op} where ONNX wraps around "
            "(127 + 1 gives 127, not -128)"
        )
    if op in _WIDE_16 and data & {T.INT16, T.UINT16}:
        return f"OpenVINO's CPU plugin saturates or refuses int16/uint16 {op}"
    if op in _ORDERED and T.UINT32 in data:
        return (
            f"OpenVINO's CPU plugin computes uint32 {op} as int32 (values of 2^31 and "
            "above count as negative)"
        )
    if op in _ARITHMETIC and T.INT64 in data:
        ints = [v for v in _values(node.inputs) if v.dtype in _INTEGERS]
        memo: dict[ir.Value, bool] = {}
        if not all(_dims(v, memo) for v in ints):
            return (
                f"OpenVINO's CPU plugin computes int64 {op} in int32 (results beyond "
                "±2^31 come out wrong); shape arithmetic stays on OpenVINO"
            )
    return None


def _casts(node: ir.Node, graph: GraphContext) -> str | None:
    if node.domain or node.op_type not in ("Cast", "CastLike"):
        return None
    target = node.outputs[0].dtype if node.outputs else None
    if target in _FLOAT8 and _attr(node, "saturate", 1):
        return (
            "OpenVINO's Cast to float8 ignores saturate=1: values beyond the type's "
            "range become NaN or inf, not its largest value"
        )
    if target in (T.INT4, T.UINT4):
        return "OpenVINO's Cast to int4/uint4 wraps out-of-range values around"
    if target == T.FLOAT4E2M1:
        return "OpenVINO's Cast to float4e2m1 turns NaN into 6"
    return None


def _semantics(node: ir.Node, graph: GraphContext) -> str | None:
    """Ops whose attributes or inputs OpenVINO reads otherwise than ONNX."""
    if node.domain:
        return None
    op = node.op_type
    if op == "DFT":
        return (
            "OpenVINO's DFT differs from ONNX's (onesided and inverse outputs, the axis "
            "input, output shapes)"
        )
    if op == "Tile" and len(node.inputs) > 1 and _constant(node.inputs[1]) is None:
        shape = node.inputs[0].shape if node.inputs[0] is not None else None
        if shape is None or len(shape) >= 4:
            return (
                "OpenVINO's CPU plugin gives wrong values for Tile of rank 4 and more "
                "whose repeats are not constant"
            )
    if op == "TopK" and len(node.inputs) > 1 and _constant(node.inputs[1]) is None:
        return (
            "OpenVINO's TopK with k computed at run time orders equal values otherwise than "
            "ONNX (lower index first)"
        )
    if op in ("LSTM", "GRU", "RNN") and _attr(node, "layout", 0):
        return f"OpenVINO's {op} ignores layout=1 (batch-first inputs)"
    if op == "LSTM" and len(node.inputs) > 7 and node.inputs[7] is not None:
        return "OpenVINO's LSTM ignores the peephole weights (input P)"
    if op in ("ReduceMax", "ReduceMin"):
        if _empty_reduction(node):
            return f"OpenVINO's {op} of an empty set {_EMPTY_BROKEN[op]}"
    elif op in _EMPTY_BROKEN:
        data = node.inputs[:2] if op == "MatMulInteger" else node.inputs[:1]
        if any(0 in (_static_dims(v) or ()) for v in data):
            return f"OpenVINO's {op} on a tensor with a zero-size dimension {_EMPTY_BROKEN[op]}"
    if op == "STFT" and not any(v is not None for v in node.inputs[2:4]):
        return (
            "OpenVINO's STFT without window and frame_length takes another frame length "
            "(ONNX: the signal's length)"
        )
    if op == "CumSum" and T.BFLOAT16 in _data_dtypes(node):
        return "OpenVINO's CPU plugin sums bfloat16 CumSum in bfloat16 (long sums drift)"
    if op == "Resize":
        return _resize(node)
    if op == "MaxPool" and _attr(node, "ceil_mode", 0):
        return _ceil_pool(node)
    if op == "BitShift" and _data_dtypes(node) & {T.INT8, T.INT16, T.INT32, T.INT64}:
        return (
            "OpenVINO's BitShift on signed integers differs from ONNX for negative "
            "values and out-of-range shifts (-1 >> 1 gives 0, not -1)"
        )
    if op == "SpaceToDepth" and str(_attr(node, "mode", "DCR")).upper() == "CRD":
        return "OpenVINO's SpaceToDepth ignores mode=CRD"
    if op == "RoiAlign" and _attr(node, "mode", "avg") == "max":
        return "OpenVINO's RoiAlign mode=max pools otherwise than ONNX's definition"
    if op == "RoiAlign" and not _attr(node, "sampling_ratio", 0):
        return (
            "OpenVINO's RoiAlign with sampling_ratio=0 (adaptive) samples some regions "
            "otherwise than ONNX"
        )
    if op == "Softmax" and graph.opset("") in (11, 12) and not _last_axis(node, 1):
        return (
            "OpenVINO's Softmax of opset 11-12 normalizes over the axis alone; ONNX "
            "flattens the input to 2D at the axis (the same only for the last axis)"
        )
    if op == "ReduceLogSum" and _attr(node, "noop_with_empty_axes", 0) and _no_axes(node):
        return "OpenVINO's ReduceLogSum ignores noop_with_empty_axes=1 (it reduces every axis)"
    if op == "Shrink" and _data_dtypes(node) & _INTEGERS:
        return "OpenVINO's Shrink on integers differs from ONNX's (values near lambd)"
    if op == "BatchNormalization" and _attr(node, "training_mode", 0):
        if 0 in (_static_dims(node.inputs[0] if node.inputs else None) or ()):
            return (
                "OpenVINO's BatchNormalization in training mode on an empty batch gives "
                "numbers for the batch statistics; ONNX's are NaN"
            )
    if op == "Attention":
        return _attention(node, graph)
    return None


def _last_axis(node: ir.Node, default: int) -> bool:
    """Whether the node's ``axis`` attribute is its input's last axis (the
    input's rank known)."""
    dims = node.inputs[0].shape if node.inputs and node.inputs[0] is not None else None
    if dims is None:
        return False
    rank = len(dims)
    axis = int(_attr(node, "axis", default))  # type: ignore[call-overload]
    return rank > 0 and axis % rank == rank - 1


def _no_axes(node: ir.Node) -> bool:
    """Whether a reduction is given no axes (attribute or input), or an empty list."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = _constant(node.inputs[1])
        return axes is not None and axes.size == 0
    axes_attr = _attr(node, "axes")
    return axes_attr is None or len(axes_attr) == 0  # type: ignore[arg-type]


def _resize(node: ir.Node) -> str | None:
    if _attr(node, "antialias", 0):
        return "OpenVINO's Resize ignores antialias=1"
    if _attr(node, "keep_aspect_ratio_policy", "stretch") != "stretch":
        return "OpenVINO's Resize ignores keep_aspect_ratio_policy"
    if _attr(node, "exclude_outside", 0):
        return "OpenVINO's Resize ignores exclude_outside=1"
    if _attr(node, "coordinate_transformation_mode", "half_pixel") == "align_corners":
        if _downsamples(node) is not False:
            return (
                "OpenVINO's Resize downsamples with align_corners otherwise than ONNX "
                "(it downsamples here, or may: the sizes are not known before run time)"
            )
    return None


def _downsamples(node: ir.Node) -> bool | None:
    """Whether a Resize makes some dimension smaller (``None``: unknown)."""
    x, y = node.inputs[0], node.outputs[0]
    before = _static_dims(x)
    after = _static_dims(y)
    if before is not None and after is not None and len(before) == len(after):
        return any(b < a for a, b in zip(before, after))
    scales = _constant(node.inputs[2]) if len(node.inputs) > 2 else None
    if scales is not None and scales.size:
        return bool((scales < 1).any())
    sizes = _constant(node.inputs[3]) if len(node.inputs) > 3 else None
    if sizes is not None and before is not None and len(before) == sizes.size:
        return any(int(b) < a for a, b in zip(before, sizes.reshape(-1)))
    return None


def _empty_reduction(node: ir.Node) -> bool:
    """Whether a ReduceMax/ReduceMin is known to reduce over a zero-size
    dimension: its axes constant (or all) and its data's shape known there.
    Only float32 and bfloat16: float16 turns the lowest float32 into -inf,
    ONNX's answer (and with axes fed at run time OpenVINO gets some right)."""
    x = node.inputs[0] if node.inputs else None
    dims = _static_dims(x)
    if x is None or dims is None or x.dtype not in (T.FLOAT, T.BFLOAT16) or 0 not in dims:
        return False
    axes: object = _attr(node, "axes")
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = _constant(node.inputs[1])
        if axes is None:
            return False
    if axes is None or len(axes) == 0:  # type: ignore[arg-type]
        if _attr(node, "noop_with_empty_axes", 0):
            return False
        axes = range(len(dims))
    reduced = {int(a) % len(dims) for a in axes}  # type: ignore[attr-defined]
    kept = [d for i, d in enumerate(dims) if i not in reduced]
    return 0 not in kept and any(dims[i] == 0 for i in reduced)  # else the output is empty


def _static_dims(value: ir.Value | None) -> list[int] | None:
    """The value's shape when every dimension is known."""
    if value is None or value.shape is None:
        return None
    dims = [d for d in value.shape if isinstance(d, int)]
    return dims if len(dims) == len(value.shape) else None


def _ceil_pool(node: ir.Node) -> str | None:
    """ONNX drops a last output whose window would start past the input and
    its begin padding; OpenVINO's MaxPool keeps it (its AveragePool does
    not). Declined where that happens or cannot be known."""
    shape = node.inputs[0].shape if node.inputs and node.inputs[0] is not None else None
    kernel = list(_attr(node, "kernel_shape", []) or [])  # type: ignore[call-overload]
    reason = (
        "OpenVINO's MaxPool with ceil_mode=1 keeps a last window that starts past the "
        "input, which ONNX drops"
    )
    if shape is None or len(shape) != len(kernel) + 2:
        return reason
    n = len(kernel)
    strides = list(_attr(node, "strides", None) or [1] * n)  # type: ignore[call-overload]
    dilations = list(_attr(node, "dilations", None) or [1] * n)  # type: ignore[call-overload]
    pads = list(_attr(node, "pads", None) or [0] * (2 * n))  # type: ignore[call-overload]
    if _attr(node, "auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return None  # the output size does not depend on ceil_mode
    for i, dim in enumerate(list(shape)[2:]):
        if not isinstance(dim, int):
            return reason
        span = dim + pads[i] + pads[i + n] - ((kernel[i] - 1) * dilations[i] + 1)
        out = math.ceil(span / strides[i]) + 1
        if (out - 1) * strides[i] >= dim + pads[i]:
            return reason
    return None


def _attention(node: ir.Node, graph: GraphContext) -> str | None:
    for name in ("left_window_size", "right_window_size"):
        if int(_attr(node, name, -1)) >= 0:  # type: ignore[call-overload]
            return f"OpenVINO's Attention ignores {name}"
    past = len(node.inputs) > 4 and node.inputs[4] is not None
    mask = len(node.inputs) > 3 and node.inputs[3] is not None
    if _attr(node, "is_causal", 0) and past and mask:
        return (
            "OpenVINO's Attention with is_causal=1, an attn_mask and a past key cache "
            "masks otherwise than ONNX"
        )
    return None


_CHECKS: tuple[Callable[[ir.Node, GraphContext], str | None], ...] = (
    _non_tensors,
    _everywhere,
    _integer_arithmetic,
    _casts,
    _semantics,
)
