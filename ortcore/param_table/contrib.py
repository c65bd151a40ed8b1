"""onnxruntime's contrib ops (``com.microsoft``) the CPU provider runs, and
ortcore's fused ops (``com.ortcore``, :mod:`ep_sdk.fused_ops`), which a model
may hold too.
"""

from __future__ import annotations

from ..param_rules import Attr, Broadcast, BroadcastsTo, Dim, Holds, Length, Rank, Shape, eq, select
from ._entry import FUSED, MS, Example, OpRules
from ._pieces import _BN, _BN_EXAMPLE, _CHANNELS, _CONV_EXAMPLE, _conv, _per_channel

RULES: tuple[OpRules, ...] = (
    # onnxruntime's contrib ops the CPU provider runs
    OpRules(
        "BiasGelu",
        ("A", "B"),
        (Length("B", n=Dim("A", -1, "features"), noun="bias"),),
        Example({"A": (2, 3, 4), "B": (4,)}),
        domain=MS,
    ),
    OpRules(
        "FastGelu",
        ("X", "bias"),
        (Length("bias", n=Dim("X", -1, "features")),),
        Example({"X": (2, 3, 4), "bias": (4,)}),
        domain=MS,
    ),
    # ortcore's fused ops (ep_sdk.fused_ops): a model may hold them too
    OpRules("FusedConv", ("X", "W", "B"), _conv("X", "W", "B"), _CONV_EXAMPLE, domain=FUSED),
    OpRules(
        "FusedConvPool",
        ("X", "W", "B"),
        _conv("X", "W", "B"),
        Example(_CONV_EXAMPLE.inputs, {**_CONV_EXAMPLE.attrs, "pool_kernel_shape": [2, 2]}),
        domain=FUSED,
    ),
    OpRules(
        "FusedConvShuffle",
        ("X", "W", "B"),
        (
            *_conv("X", "W", "B"),
            Holds(
                "attr:shuffle_groups",
                a=Dim("W", 0, "output channels"),
                relation="divides",
                b=Attr("shuffle_groups", 1),
            ),
        ),
        Example(_CONV_EXAMPLE.inputs, {**_CONV_EXAMPLE.attrs, "shuffle_groups": 3}),
        domain=FUSED,
    ),
    OpRules(
        "FusedConvConcat",
        ("X", "W", "B", "Into"),
        _conv("X", "W", "B"),
        Example(_CONV_EXAMPLE.inputs, {**_CONV_EXAMPLE.attrs, "channels": 6}),
        domain=FUSED,
    ),
    OpRules(
        "FusedConvAdd",
        ("X", "W", "Z", "B"),
        (
            *_conv("X", "W", "B"),
            Holds("Z", a=Rank("Z"), b=Rank("X")),
            Holds("Z", a=Dim("Z", 0), b=Dim("X", 0, "batches")),
            Holds("Z", a=Dim("Z", 1), b=Dim("W", 0, "output channels")),
        ),
        Example(
            {"X": (1, 4, 5, 5), "W": (6, 2, 3, 3), "Z": (1, 6, 5, 5), "B": (6,)},
            _CONV_EXAMPLE.attrs,
        ),
        domain=FUSED,
    ),
    OpRules("FusedBatchNorm", _BN, _per_channel(_BN[1:], _CHANNELS), _BN_EXAMPLE, domain=FUSED),
    OpRules(
        "FusedGemm",
        ("A", "B", "C"),
        (
            BroadcastsTo(
                "C",
                shape=Shape(
                    (
                        select(eq(Attr("transA", 0), 0), Dim("A", 0), Dim("A", 1)),
                        select(eq(Attr("transB", 0), 0), Dim("B", 1), Dim("B", 0)),
                    )
                ),
            ),
        ),
        Example({"A": (3, 5), "B": (5, 2), "C": (2,)}),
        domain=FUSED,
    ),
    OpRules(
        "BiasGelu",
        ("X", "bias"),
        (BroadcastsTo("bias", shape=Shape(input="X")),),  # Add's broadcasting, X's shape kept
        Example({"X": (2, 3, 4), "bias": (4,)}),
        domain=FUSED,
    ),
    OpRules(
        "FusedLayerNorm",
        ("X", "Scale", "B"),
        (
            BroadcastsTo("Scale", shape=Shape(input="X")),
            BroadcastsTo("B", shape=Shape(input="X"), noun="bias"),
        ),
        Example({"X": (2, 3, 4), "Scale": (4,), "B": (4,)}),
        domain=FUSED,
    ),
    OpRules(
        "FusedRMSNorm",
        ("X", "scale"),
        (BroadcastsTo("scale", shape=Shape(input="X")),),
        Example({"X": (2, 3, 4), "scale": (4,)}),
        domain=FUSED,
    ),
    OpRules(
        "SkipLayerNormalization",
        ("X", "skip", "gamma", "beta", "bias"),
        (
            BroadcastsTo("gamma", shape=Broadcast("X", "skip")),
            BroadcastsTo("beta", shape=Broadcast("X", "skip")),
            BroadcastsTo("bias", shape=Broadcast("X", "skip")),
        ),
        Example({"X": (2, 3, 4), "skip": (2, 3, 4), "gamma": (4,), "beta": (4,), "bias": (4,)}),
        domain=FUSED,
    ),
)
"""The entries of this family, in the table's order."""
