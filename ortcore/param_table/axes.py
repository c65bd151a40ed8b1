"""Per-axis attribute and input lists (pads, windows, axes, scales), and inputs
that must be scalars.
"""

from __future__ import annotations

import numpy as np

from ..param_rules import (
    AttrCount,
    AttrLength,
    AttrStr,
    Const,
    Dim,
    Holds,
    Len,
    Length,
    Present,
    ProdValues,
    Rank,
    SameShape,
    Scalar,
    eq,
    select,
)
from ._entry import Example, OpRules, _f, _i64, _s
from ._pieces import _WINDOW, _window

RULES: tuple[OpRules, ...] = (
    # per-axis lists
    OpRules(
        "Resize",
        ("X", "scales"),
        (Length("scales", n=Rank("X")),),
        Example({"X": (1, 2, 3, 3), "scales": _f(4, value=2.0)}),
        since=10,
        until=10,
    ),
    OpRules(
        "Resize",
        ("X", "roi", "scales", "sizes"),
        (
            Length("scales", n=Rank("X"), when=Present("scales", nonempty=True)),
            Length("sizes", n=Rank("X"), when=Present("sizes", nonempty=True)),
            Length(
                "roi",
                n=2 * Rank("X"),
                when=eq(AttrStr("coordinate_transformation_mode"), "tf_crop_and_resize"),
            ),
        ),
        Example({"X": (1, 2, 3, 3), "roi": None, "scales": np.array([1, 1, 2, 2], np.float32)}),
        since=11,
        until=17,
        variants=(
            Example(
                {
                    "X": (1, 2, 3, 3),
                    "roi": np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32),
                    "scales": np.zeros(0, np.float32),
                    "sizes": _i64(1, 2, 4, 5),
                },
                {"coordinate_transformation_mode": "tf_crop_and_resize", "mode": "linear"},
            ),
        ),
    ),
    OpRules(
        "Resize",
        ("X", "roi", "scales", "sizes"),
        (
            Length("scales", n=AttrCount("axes", Rank("X")), when=Present("scales", nonempty=True)),
            Length("sizes", n=AttrCount("axes", Rank("X")), when=Present("sizes", nonempty=True)),
            Length(
                "roi",
                n=2 * AttrCount("axes", Rank("X")),
                when=eq(AttrStr("coordinate_transformation_mode"), "tf_crop_and_resize"),
            ),
        ),
        Example(
            {"X": (1, 2, 3, 3), "roi": None, "scales": np.array([2, 2], np.float32)},
            {"axes": [2, 3]},
        ),
        since=18,
        variants=(
            Example(
                {
                    "X": (1, 2, 3, 3),
                    "roi": np.array([0, 0, 1, 1], np.float32),
                    "scales": None,
                    "sizes": _i64(4, 5),
                },
                {
                    "axes": [2, 3],
                    "coordinate_transformation_mode": "tf_crop_and_resize",
                    "mode": "linear",
                },
            ),
        ),
    ),
    OpRules(
        "Upsample",
        ("X",),
        (AttrLength("attr:scales", n=Rank("X")),),
        Example({"X": (1, 2, 3, 3)}, {"scales": [1.0, 1.0, 2.0, 2.0]}),
        since=7,
        until=8,
    ),
    OpRules(
        "Upsample",
        ("X", "scales"),
        (Length("scales", n=Rank("X")),),
        Example({"X": (1, 2, 3, 3), "scales": np.array([1, 1, 2, 2], np.float32)}),
        since=9,
        until=9,
    ),
    OpRules(
        "Pad",
        ("data",),
        (AttrLength("attr:pads", n=2 * Rank("data")),),
        Example({"data": (2, 3)}, {"pads": [0, 1, 1, 0]}),
        since=2,
        until=10,
    ),
    OpRules(
        "Pad",
        ("data", "pads", "constant_value"),
        (
            Length("pads", n=2 * Rank("data")),
            Scalar("constant_value"),
        ),
        Example({"data": (2, 3), "pads": _i64(0, 1, 1, 0), "constant_value": _f(value=2.0)}),
        since=11,
        until=17,
    ),
    OpRules(
        "Pad",
        ("data", "pads", "constant_value", "axes"),
        (
            Length("pads", n=2 * select(Present("axes"), Len("axes"), Rank("data"))),
            Scalar("constant_value"),
        ),
        Example(
            {"data": (2, 3), "pads": _i64(1, 2), "constant_value": _f(value=2.0), "axes": _i64(1)}
        ),
        since=18,
    ),
    OpRules(
        "Slice",
        ("data",),
        (
            AttrLength("attr:ends", n=AttrCount("starts")),
            AttrLength("attr:axes", n=AttrCount("starts")),
        ),
        Example({"data": (4, 5)}, {"starts": [1, 0], "ends": [3, 4], "axes": [0, 1]}),
        since=1,
        until=9,
    ),
    OpRules(
        "Slice",
        ("data", "starts", "ends", "axes", "steps"),
        (
            Holds(
                "starts",
                a=Len("starts"),
                relation="<=",
                b=Rank("data"),
                when=eq(Present("axes"), False),
            ),
            Length("ends", n=Len("starts")),
            Length("axes", n=Len("starts")),
            Length("steps", n=Len("starts")),
        ),
        Example(
            {
                "data": (4, 5),
                "starts": _i64(1, 0),
                "ends": _i64(3, 4),
                "axes": _i64(0, 1),
                "steps": _i64(1, 2),
            }
        ),
        since=10,
        variants=(Example({"data": (4, 5), "starts": _i64(1, 0), "ends": _i64(3, 4)}),),
    ),
    OpRules(
        "Tile",
        ("input", "repeats"),
        (Length("repeats", n=Rank("input")),),
        Example({"input": (2, 3), "repeats": _i64(2, 1)}),
        since=6,
    ),
    OpRules(
        "CenterCropPad",
        ("input_data", "shape"),
        (Length("shape", n=AttrCount("axes", Rank("input_data"))),),
        Example({"input_data": (4, 5, 2), "shape": _i64(3, 6)}, {"axes": [0, 1]}),
        since=18,
    ),
    OpRules(
        "Col2Im",
        ("input", "image_shape", "block_shape"),
        (
            Length("image_shape", n=Len("block_shape")),
            Holds("input", a=Dim("input", 1), relation="divides", b=ProdValues("block_shape")),
            *_window("input", Len("block_shape"), ("strides", "dilations")),
        ),
        Example(
            {"input": (1, 8, 9), "image_shape": _i64(4, 4), "block_shape": _i64(2, 2)},
            {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]},
        ),
        since=18,
    ),
    OpRules(
        "MaxUnpool",
        ("X", "I", "output_shape"),
        (
            SameShape("I", other="X"),
            Length("output_shape", n=Rank("X")),
            *_window("X", Rank("X") - 2, ("kernel_shape", "strides")),
        ),
        Example(
            {
                "X": (1, 1, 2, 2),
                "I": np.array([[[[5, 7], [13, 15]]]], np.int64),
                "output_shape": _i64(1, 1, 4, 4),
            },
            {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0]},
        ),
        since=9,
    ),
    *(
        OpRules(
            pool,
            ("X",),
            _window("X", Rank("X") - 2),
            Example({"X": (1, 2, 5, 5)}, {**_WINDOW, "kernel_shape": [2, 2]}, opset=opset),
        )
        for pool, opset in (("MaxPool", 13), ("AveragePool", 19), ("LpPool", 18))
    ),
    # inputs that must be scalars
    OpRules(
        "Clip",
        ("input", "min", "max"),
        (Scalar("min"), Scalar("max")),
        Example({"input": (2, 3), "min": _f(value=0.2), "max": _f(value=0.7)}),
        since=11,
    ),
    OpRules(
        "TopK",
        ("X", "K"),
        (Scalar("K"),),
        Example({"X": (2, 5), "K": _i64(2)}, outputs=2),
        since=10,
    ),
    OpRules(
        "OneHot",
        ("indices", "depth", "values"),
        (Scalar("depth"), Length("values", n=Const(2))),
        Example({"indices": _i64(0, 2, 1), "depth": _s(3), "values": np.array([0, 1], np.float32)}),
        since=9,
    ),
    OpRules(
        "CumSum", ("x", "axis"), (Scalar("axis"),), Example({"x": (2, 3), "axis": _s(1)}), since=11
    ),
    OpRules(
        "Range",
        ("start", "limit", "delta"),
        (Scalar("start"), Scalar("limit"), Scalar("delta")),
        Example({"start": _f(value=0.0), "limit": _f(value=5.0), "delta": _f(value=1.5)}),
        since=11,
    ),
    OpRules(
        "Trilu", ("input", "k"), (Scalar("k"),), Example({"input": (3, 4), "k": _s(1)}), since=14
    ),
    OpRules(
        "DFT",
        ("input", "dft_length"),
        (Scalar("dft_length"),),
        Example({"input": (1, 8, 1), "dft_length": _s(8)}),
        since=17,
        until=19,
    ),
    OpRules(
        "DFT",
        ("input", "dft_length", "axis"),
        (Scalar("dft_length"), Scalar("axis")),
        Example({"input": (1, 8, 1), "dft_length": _s(8), "axis": _s(1)}),
        since=20,
    ),
)
"""The entries of this family, in the table's order."""
