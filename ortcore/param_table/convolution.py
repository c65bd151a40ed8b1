"""The convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv and their
parameters.
"""

from __future__ import annotations

import numpy as np

from ..param_rules import Attr, Dim, Holds, Length, ProdDims, Rank, Scalar
from ._entry import Example, OpRules, _f, _u8
from ._pieces import _CONV_EXAMPLE, _WINDOW, _conv, _conv_transpose

RULES: tuple[OpRules, ...] = (
    # convolutions
    OpRules("Conv", ("X", "W", "B"), _conv("X", "W", "B"), _CONV_EXAMPLE),
    OpRules(
        "ConvTranspose",
        ("X", "W", "B"),
        _conv_transpose("X", "W", "B"),
        Example(
            {"X": (1, 4, 3, 3), "W": (4, 3, 2, 2), "B": (3,)},
            {
                "kernel_shape": [2, 2],
                "strides": [2, 2],
                "dilations": [1, 1],
                "output_padding": [1, 0],
                "pads": [0, 1, 0, 0],
            },
        ),
        variants=(
            Example(
                {"X": (1, 4, 3, 3), "W": (4, 3, 2, 2), "B": (6,)},
                {"group": 2, "strides": [2, 2], "output_shape": [6, 7]},
            ),
        ),
    ),
    OpRules(
        "ConvInteger",
        ("x", "w", "x_zero_point", "w_zero_point"),
        (
            *_conv("x", "w", None),
            Scalar("x_zero_point"),
            Length("w_zero_point", n=Dim("w", 0, "output channels"), one=True, scalar=True),
        ),
        Example(
            {
                "x": _u8(1, 4, 4, 4),
                "w": _u8(6, 4, 3, 3),
                "x_zero_point": _u8(),
                "w_zero_point": _u8(6),
            },
            {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [1, 1, 1, 1]},
        ),
        since=10,
        variants=(Example({"x": _u8(1, 4, 4, 4), "w": _u8(6, 2, 3, 3)}, {"group": 2}),),
    ),
    OpRules(
        "QLinearConv",
        (
            "x",
            "x_scale",
            "x_zero_point",
            "w",
            "w_scale",
            "w_zero_point",
            "y_scale",
            "y_zero_point",
            "B",
        ),
        (
            *_conv("x", "w", "B"),
            Scalar("x_scale"),
            Scalar("x_zero_point"),
            Scalar("y_scale"),
            Scalar("y_zero_point"),
            Length("w_scale", n=Dim("w", 0, "output channels"), one=True, scalar=True),
            Length("w_zero_point", n=Dim("w", 0, "output channels"), one=True, scalar=True),
        ),
        Example(
            {
                "x": _u8(1, 4, 4, 4),
                "x_scale": _f(value=0.1),
                "x_zero_point": _u8(),
                "w": _u8(6, 2, 3, 3),
                "w_scale": _f(6, value=0.02),
                "w_zero_point": _u8(6),
                "y_scale": _f(value=0.5),
                "y_zero_point": _u8(),
                "B": np.arange(6, dtype=np.int32),
            },
            {"group": 2, **_WINDOW},
        ),
        since=10,
    ),
    OpRules(
        "DeformConv",
        ("X", "W", "offset", "B", "mask"),
        (
            *_conv("X", "W", "B"),
            Holds(
                "attr:offset_group",
                a=Dim("X", 1, "channels"),
                relation="divides",
                b=Attr("offset_group", 1),
            ),
            Holds(
                "offset",
                a=Dim("offset", 1),
                b=Attr("offset_group", 1) * ProdDims("W", 2) * (Rank("W") - 2),
            ),
            Holds("mask", a=Dim("mask", 1), b=Attr("offset_group", 1) * ProdDims("W", 2)),
            Holds("offset", a=Dim("offset", 0), b=Dim("X", 0, "batches")),
            Holds("mask", a=Dim("mask", 0), b=Dim("X", 0, "batches")),
        ),
        Example(
            {
                "X": (1, 4, 4, 4),
                "W": (2, 4, 2, 2),
                "offset": (1, 16, 3, 3),
                "B": (2,),
                "mask": (1, 8, 3, 3),
            },
            {
                "offset_group": 2,
                "kernel_shape": [2, 2],
                "strides": [1, 1],
                "dilations": [1, 1],
                "pads": [0, 0, 0, 0],
            },
        ),
        since=19,
        variants=(
            Example(
                {"X": (1, 4, 4, 4), "W": (4, 2, 2, 2), "offset": (1, 8, 3, 3), "B": (4,)},
                {"group": 2},
            ),
        ),
    ),
)
"""The entries of this family, in the table's order."""
