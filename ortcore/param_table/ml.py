"""``ai.onnx.ml``: per-feature attributes."""

from __future__ import annotations

import numpy as np

from ..param_rules import Attr, AttrCount, AttrGiven, AttrLength, Dim
from ._entry import ML, Example, OpRules

RULES: tuple[OpRules, ...] = (
    # ai.onnx.ml: per-feature attributes
    OpRules(
        "Scaler",
        ("X",),
        (
            AttrLength("attr:offset", n=Dim("X", -1, "features"), one=True),
            AttrLength("attr:scale", n=AttrCount("offset"), when=AttrGiven("offset")),
            AttrLength("attr:scale", n=Dim("X", -1, "features"), one=True),
        ),
        Example({"X": (3, 4)}, {"offset": [0.0, 1.0, 2.0, 3.0], "scale": [2.0, 1.0, 0.5, 3.0]}),
        domain=ML,
        variants=(Example({"X": (3, 4)}, {"scale": [2.0, 1.0, 0.5, 3.0]}),),
    ),
    OpRules(
        "Imputer",
        ("X",),
        (
            AttrLength("attr:imputed_value_floats", n=Dim("X", -1, "features"), one=True),
            AttrLength("attr:imputed_value_int64s", n=Dim("X", -1, "features"), one=True),
        ),
        Example(
            {"X": np.array([[1, np.nan, 3, 4]], np.float32)},
            {"imputed_value_floats": [0.0, 9.0, 0.0, 0.0], "replaced_value_float": float("nan")},
        ),
        domain=ML,
        variants=(
            Example(
                {"X": np.array([[1, -1, 3]], np.int64)},
                {"imputed_value_int64s": [7, 8, 9], "replaced_value_int64": -1},
            ),
        ),
    ),
    OpRules(
        "LinearRegressor",
        ("X",),
        (
            AttrLength("attr:coefficients", n=Attr("targets", 1) * Dim("X", -1, "features")),
            AttrLength("attr:intercepts", n=Attr("targets", 1)),
        ),
        Example(
            {"X": (3, 4)},
            {
                "coefficients": [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5],
                "intercepts": [1.0, -1.0],
                "targets": 2,
            },
        ),
        domain=ML,
    ),
)
"""The entries of this family, in the table's order."""
