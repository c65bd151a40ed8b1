"""Quantization: scales and zero points, per tensor, per axis, blocked; the
integer matrix products.
"""

from __future__ import annotations

from ..param_rules import Scalar
from ._entry import Example, OpRules, _f, _u8
from ._pieces import _col_param, _quantize, _row_param

RULES: tuple[OpRules, ...] = (
    # quantization
    OpRules(
        "QuantizeLinear",
        ("x", "y_scale", "y_zero_point"),
        _quantize("x", "y_scale", "y_zero_point", False),
        Example({"x": (2, 4, 3), "y_scale": _f(4), "y_zero_point": _u8(4)}, opset=13),
        since=10,
        until=20,
        variants=(Example({"x": (2, 4, 3), "y_scale": _f(), "y_zero_point": _u8(1)}, opset=13),),
    ),
    OpRules(
        "QuantizeLinear",
        ("x", "y_scale", "y_zero_point"),
        _quantize("x", "y_scale", "y_zero_point", True),
        Example(
            {"x": (2, 4, 6), "y_scale": _f(2, 4, 3), "y_zero_point": _u8(2, 4, 3)},
            {"axis": 2, "block_size": 2},
        ),
        since=21,
        variants=(
            Example({"x": (2, 4, 3), "y_scale": _f(4), "y_zero_point": _u8(4)}),
            Example({"x": (2, 4, 3), "y_scale": _f(), "y_zero_point": _u8(1)}),
        ),
    ),
    OpRules(
        "DequantizeLinear",
        ("x", "x_scale", "x_zero_point"),
        _quantize("x", "x_scale", "x_zero_point", False),
        Example({"x": _u8(2, 4, 3), "x_scale": _f(4), "x_zero_point": _u8(4)}, opset=13),
        since=10,
        until=20,
        variants=(Example({"x": _u8(2, 4, 3), "x_scale": _f(), "x_zero_point": _u8(1)}, opset=13),),
    ),
    OpRules(
        "DequantizeLinear",
        ("x", "x_scale", "x_zero_point"),
        _quantize("x", "x_scale", "x_zero_point", True),
        Example(
            {"x": _u8(2, 4, 6), "x_scale": _f(2, 4, 3), "x_zero_point": _u8(2, 4, 3)},
            {"axis": 2, "block_size": 2},
        ),
        since=21,
        variants=(
            Example({"x": _u8(2, 4, 3), "x_scale": _f(4), "x_zero_point": _u8(4)}),
            Example({"x": _u8(2, 4, 3), "x_scale": _f(), "x_zero_point": _u8(1)}),
        ),
    ),
    OpRules(
        "MatMulInteger",
        ("A", "B", "a_zero_point", "b_zero_point"),
        (
            *_row_param("a_zero_point", "A"),
            *_col_param("b_zero_point", "B"),
        ),
        Example({"A": _u8(3, 5), "B": _u8(5, 2), "a_zero_point": _u8(3), "b_zero_point": _u8(2)}),
        since=10,
    ),
    OpRules(
        "QLinearMatMul",
        ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"),
        (
            *_row_param("a_scale", "a"),
            *_row_param("a_zero_point", "a"),
            *_col_param("b_scale", "b"),
            *_col_param("b_zero_point", "b"),
            Scalar("y_scale"),
            Scalar("y_zero_point"),
        ),
        Example(
            {
                "a": _u8(3, 5),
                "a_scale": _f(value=0.1),
                "a_zero_point": _u8(),
                "b": _u8(5, 2),
                "b_scale": _f(2, value=0.2),
                "b_zero_point": _u8(2),
                "y_scale": _f(value=4.0),
                "y_zero_point": _u8(),
            }
        ),
        since=10,
        variants=(
            Example(
                {
                    "a": _u8(2, 3, 5),
                    "a_scale": _f(2, 3, 1, value=0.1),
                    "a_zero_point": _u8(2, 3, 1),
                    "b": _u8(2, 5, 2),
                    "b_scale": _f(2, 1, 2, value=0.2),
                    "b_zero_point": _u8(2, 1, 2),
                    "y_scale": _f(value=4.0),
                    "y_zero_point": _u8(),
                },
                opset=21,
            ),
        ),
    ),
)
"""The entries of this family, in the table's order."""
