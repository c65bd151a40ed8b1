"""The table of quantized contrib op cases: one builder per op, called once
per point of each dimension it explores (dtype uint8/int8, attribute values,
per-tensor or per-column parameters, ranks and broadcasting, empty tensors).
Every case's oracle is its decomposition into standard ONNX ops."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .spec import (
    DTYPES,
    ONE_UNIT,
    QSpec,
    Slot,
    draw_ints,
    draw_scale,
    draw_zero,
    seeded,
)

__all__ = ["specs_elementwise"]

_n = helper.make_node


def _zp(s: QSpec, name: str, like: str, extra: list[onnx.TensorProto]) -> str:
    """The zero point input's name, or a zero of ``like``'s type when omitted."""
    if s.value(name) is not None:
        return name
    zero = f"{name}__zero"
    extra.append(numpy_helper.from_array(np.zeros((), s.value(like).dtype), zero))  # type: ignore[union-attr]
    return zero


def _per_tensor_unary(op: str, float_ops: Any, attrs: dict[str, Any] | None = None):
    """Builder for X, X_scale, X_zp, Y_scale, Y_zp ops: DQ -> float ops -> Q."""

    def make(
        dim: str,
        detail: str,
        dt: Any,
        shape: tuple[int, ...],
        a: dict[str, Any],
        omit_zero: bool = False,
        y_params: tuple[float, int] | None = None,
    ) -> QSpec:
        rng = seeded(f"{op}/{dim}/{detail}")
        ys, yz = y_params if y_params else (draw_scale(rng, lo=0.02), draw_zero(rng, dt))
        slots = [
            Slot("X", draw_ints(rng, dt, shape), fed=True),
            Slot("xs", draw_scale(rng, lo=0.03)),
            Slot("xz", None if omit_zero else draw_zero(rng, dt)),
            Slot("ys", np.asarray(ys, np.float32)),
            Slot("yz", None if omit_zero else np.asarray(yz, dt)),
        ]

        def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
            extra: list[onnx.TensorProto] = []
            nodes = [_n("DequantizeLinear", ["X", "xs", _zp(s, "xz", "X", extra)], ["xf"])]
            nodes += float_ops(s, "xf", "yf")
            nodes.append(_n("QuantizeLinear", ["yf", "ys", _zp(s, "yz", "X", extra)], [s.out()]))
            return nodes, extra

        return QSpec(
            op,
            dim,
            detail,
            slots,
            decompose,
            {**(attrs or {}), **a},
            tolerance=ONE_UNIT,
            redraw=lambda r: [draw_ints(r, dt, shape)],
        )

    return make


def _softmax_ops(s: QSpec, x: str, y: str) -> list[onnx.NodeProto]:
    return [_n("Softmax", [x], [y], axis=int(s.attrs.get("axis", -1)))]


def _pool_ops(op: str):
    def ops(s: QSpec, x: str, y: str) -> list[onnx.NodeProto]:
        attrs = {k: v for k, v in s.attrs.items() if k != "channels_last"}
        rank = s.value("X").ndim  # type: ignore[union-attr]
        if not s.attrs.get("channels_last"):
            return [_n(op, [x], [y], **attrs)]
        first = [0, rank - 1, *range(1, rank - 1)]
        back = [0, *range(2, rank), 1]
        return [
            _n("Transpose", [x], [x + "_t"], perm=first),
            _n(op, [x + "_t"], [y + "_t"], **attrs),
            _n("Transpose", [y + "_t"], [y], perm=back),
        ]

    return ops


SIGMOID = _per_tensor_unary("QLinearSigmoid", lambda s, x, y: [_n("Sigmoid", [x], [y])])
LEAKY = _per_tensor_unary(
    "QLinearLeakyRelu",
    lambda s, x, y: [_n("LeakyRelu", [x], [y], alpha=float(s.attrs.get("alpha", 0.01)))],
)
SOFTMAX = _per_tensor_unary("QLinearSoftmax", _softmax_ops, {"opset": 13})
GAP = _per_tensor_unary("QLinearGlobalAveragePool", _pool_ops("GlobalAveragePool"))
AVGPOOL = _per_tensor_unary("QLinearAveragePool", _pool_ops("AveragePool"))


def _binary(
    op: str,
    dim: str,
    detail: str,
    dt: Any,
    sa: tuple[int, ...],
    sb: tuple[int, ...],
    omit_zero: bool = False,
) -> QSpec:
    rng = seeded(f"{op}/{dim}/{detail}")
    cs = 0.05 if op == "QLinearAdd" else 0.5
    slots = [
        Slot("A", draw_ints(rng, dt, sa), fed=True),
        Slot("as", draw_scale(rng)),
        Slot("az", None if omit_zero else draw_zero(rng, dt)),
        Slot("B", draw_ints(rng, dt, sb), fed=True),
        Slot("bs", draw_scale(rng)),
        Slot("bz", None if omit_zero else draw_zero(rng, dt)),
        Slot("cs", draw_scale(rng, lo=cs)),
        Slot("cz", None if omit_zero else draw_zero(rng, dt)),
    ]

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        extra: list[onnx.TensorProto] = []
        nodes = [
            _n("DequantizeLinear", ["A", "as", _zp(s, "az", "A", extra)], ["af"]),
            _n("DequantizeLinear", ["B", "bs", _zp(s, "bz", "A", extra)], ["bf"]),
            _n(op[len("QLinear") :], ["af", "bf"], ["cf"]),
            _n("QuantizeLinear", ["cf", "cs", _zp(s, "cz", "A", extra)], [s.out()]),
        ]
        return nodes, extra

    return QSpec(
        op,
        dim,
        detail,
        slots,
        decompose,
        tolerance=ONE_UNIT,
        redraw=lambda r: [draw_ints(r, dt, sa), draw_ints(r, dt, sb)],
    )


def _requant_inputs(
    names: list[str], s: QSpec, out: str, extra: list[onnx.TensorProto], data_of: str
) -> list[onnx.NodeProto]:
    """DequantizeLinear of each (x, scale, zero) triple into ``<x>f``."""
    return [
        _n("DequantizeLinear", [x, f"{x}s", _zp(s, f"{x}z", data_of, extra)], [f"{x}f"])
        for x in names
    ]


def _where(dim: str, detail: str, dt: Any, shapes: tuple[tuple[int, ...], ...]) -> QSpec:
    rng = seeded(f"QLinearWhere/{dim}/{detail}")
    sc, sx, sy = shapes
    slots = [
        Slot("cond", rng.integers(0, 2, sc).astype(bool), fed=True),
        Slot("X", draw_ints(rng, dt, sx), fed=True),
        Slot("Xs", draw_scale(rng)),
        Slot("Xz", draw_zero(rng, dt)),
        Slot("Y", draw_ints(rng, dt, sy), fed=True),
        Slot("Ys", draw_scale(rng)),
        Slot("Yz", draw_zero(rng, dt)),
        Slot("zs", draw_scale(rng)),
        Slot("zz", draw_zero(rng, dt)),
    ]

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        extra: list[onnx.TensorProto] = []
        nodes = _requant_inputs(["X", "Y"], s, "", extra, "X")
        nodes += [
            _n("Where", ["cond", "Xf", "Yf"], ["zf"]),
            _n("QuantizeLinear", ["zf", "zs", "zz"], [s.out()]),
        ]
        return nodes, extra

    return QSpec("QLinearWhere", dim, detail, slots, decompose, tolerance=ONE_UNIT)


def _concat(
    dim: str,
    detail: str,
    dt: Any,
    shapes: list[tuple[int, ...]],
    axis: int,
    same_params: bool = False,
) -> QSpec:
    rng = seeded(f"QLinearConcat/{dim}/{detail}")
    ys, yz = draw_scale(rng), draw_zero(rng, dt)
    slots = [Slot("Ys", ys), Slot("Yz", yz)]
    for i, shape in enumerate(shapes):
        slots += [
            Slot(f"X{i}", draw_ints(rng, dt, shape), fed=True),
            Slot(f"X{i}s", ys if same_params and i == 0 else draw_scale(rng)),
            Slot(f"X{i}z", yz if same_params and i == 0 else draw_zero(rng, dt)),
        ]

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        extra: list[onnx.TensorProto] = []
        xs = [f"X{i}" for i in range(len(shapes))]
        nodes = _requant_inputs(xs, s, "", extra, "X0")
        nodes += [
            _n("Concat", [f"{x}f" for x in xs], ["yf"], axis=axis),
            _n("QuantizeLinear", ["yf", "Ys", "Yz"], [s.out()]),
        ]
        return nodes, extra

    return QSpec("QLinearConcat", dim, detail, slots, decompose, {"axis": axis}, tolerance=ONE_UNIT)


def specs_elementwise() -> Iterator[QSpec]:
    """QLinearAdd/Mul/Sigmoid/LeakyRelu/Softmax/Where/Concat and the pools."""
    for dt in DTYPES:
        t = np.dtype(dt).name
        for op in ("QLinearAdd", "QLinearMul"):
            yield _binary(op, "dtype", t, dt, (3, 17), (3, 17))
            yield _binary(op, "broadcast", f"row_{t}", dt, (2, 3, 5), (5,))
            yield _binary(op, "broadcast", f"scalar_{t}", dt, (), (4, 3))
            yield _binary(op, "broadcast", f"both_{t}", dt, (3, 1), (1, 4))
            yield _binary(op, "empty", t, dt, (0, 3), (3,))
            yield _binary(op, "zero_point", f"omitted_{t}", dt, (4, 6), (4, 6), omit_zero=True)
        yield SIGMOID("dtype", t, dt, (4, 33), {})
        yield SIGMOID("rank", f"4d_{t}", dt, (2, 3, 4, 5), {})
        yield SIGMOID("empty", t, dt, (0, 4), {})
        yield SIGMOID("zero_point", f"omitted_{t}", dt, (4, 9), {}, omit_zero=True)
        for alpha in (0.01, 0.3):
            yield LEAKY("attribute", f"alpha_{alpha}_{t}", dt, (4, 33), {"alpha": alpha})
        y_soft = (1 / 256, 0 if dt == np.uint8 else -128)
        for axis in (-1, 0, 1):
            yield SOFTMAX(
                "attribute", f"axis_{axis}_{t}", dt, (3, 4, 6), {"axis": axis}, y_params=y_soft
            )
        yield SOFTMAX("empty", t, dt, (0, 5), {"axis": -1}, y_params=y_soft)
        yield GAP("dtype", t, dt, (2, 3, 4, 5), {})
        yield GAP("rank", f"3d_{t}", dt, (2, 3, 7), {})
        yield GAP("attribute", f"channels_last_{t}", dt, (2, 4, 5, 3), {"channels_last": 1})
        pools: list[tuple[str, dict[str, Any]]] = [
            ("k2", {"kernel_shape": [2, 2]}),
            ("k3_s2_pads", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
            (
                "count_include_pad",
                {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
            ),
            ("ceil_mode", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
            ("same_upper", {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}),
            ("channels_last", {"kernel_shape": [2, 2], "channels_last": 1}),
        ]
        for tag, attrs in pools:
            yield AVGPOOL("attribute", f"{tag}_{t}", dt, (2, 3, 6, 7), attrs)
        yield AVGPOOL("rank", f"1d_{t}", dt, (2, 3, 9), {"kernel_shape": [3]})
        yield _where("dtype", t, dt, ((2, 5), (2, 5), (2, 5)))
        yield _where("broadcast", t, dt, ((3, 1), (1, 4), (3, 4)))
        yield _concat("dtype", t, dt, [(2, 3), (2, 4)], 1)
        yield _concat("attribute", f"axis_neg_{t}", dt, [(2, 3, 2), (2, 3, 5), (2, 3, 1)], -1)
        yield _concat("attribute", f"axis0_same_params_{t}", dt, [(1, 4), (3, 4)], 0, True)
        yield _concat("empty", t, dt, [(0, 4), (2, 4)], 0)
