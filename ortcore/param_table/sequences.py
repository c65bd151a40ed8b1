"""The recurrent ops' weights and states; regions, grids, boxes and sequences."""

from __future__ import annotations

import numpy as np

from ..param_rules import (
    Attr,
    AttrLength,
    Const,
    Dim,
    Holds,
    Len,
    Length,
    Outputs,
    Present,
    ProdValues,
    Rank,
    Scalar,
    Shape,
    ShapeIs,
    Value,
)
from ._entry import Example, OpRules, _f, _i64, _s
from ._pieces import _recurrent, _rnn_example

RULES: tuple[OpRules, ...] = (
    # recurrent
    OpRules(
        "RNN",
        ("X", "W", "R", "B", "sequence_lens", "initial_h"),
        _recurrent(1, False),
        _rnn_example(1, False),
        since=7,
        variants=(_rnn_example(1, False, layout=1),),
    ),
    OpRules(
        "GRU",
        ("X", "W", "R", "B", "sequence_lens", "initial_h"),
        _recurrent(3, False),
        _rnn_example(3, False),
        since=7,
        variants=(_rnn_example(3, False, layout=1),),
    ),
    OpRules(
        "LSTM",
        ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
        _recurrent(4, True),
        _rnn_example(4, True),
        since=7,
        variants=(_rnn_example(4, True, layout=1),),
    ),
    # regions, grids, boxes, sequences
    OpRules(
        "RoiAlign",
        ("X", "rois", "batch_indices"),
        (
            ShapeIs("rois", shape=Shape((None, 4))),
            Length("batch_indices", n=Dim("rois", 0, "regions")),
        ),
        Example(
            {
                "X": (2, 3, 5, 5),
                "rois": np.array([[0, 0, 2, 2], [1, 1, 4, 4]], np.float32),
                "batch_indices": _i64(0, 1),
            }
        ),
        since=10,
    ),
    OpRules(
        "MaxRoiPool",
        ("X", "rois"),
        (ShapeIs("rois", shape=Shape((None, 5))),),
        Example(
            {"X": (2, 3, 5, 5), "rois": np.array([[0, 0, 0, 2, 2], [1, 1, 1, 4, 4]], np.float32)},
            {"pooled_shape": [2, 2]},
        ),
    ),
    OpRules(
        "GridSample",
        ("X", "grid"),
        (
            Holds("grid", a=Rank("grid"), b=Rank("X")),
            Holds("grid", a=Dim("grid", -1), b=Rank("X") - 2),
            Holds("grid", a=Dim("grid", 0), b=Dim("X", 0, "batches")),
        ),
        Example({"X": (2, 3, 4, 4), "grid": (2, 3, 3, 2)}),
        since=16,
    ),
    OpRules(
        "AffineGrid",
        ("theta", "size"),
        (ShapeIs("theta", shape=Shape((Value("size", 0), Len("size") - 2, Len("size") - 1))),),
        Example({"theta": (2, 2, 3), "size": _i64(2, 3, 4, 5)}),
        since=20,
    ),
    OpRules(
        "NonMaxSuppression",
        ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
        (
            Holds("boxes", a=Dim("boxes", 2), b=Const(4)),
            Holds("scores", a=Dim("scores", 0), b=Dim("boxes", 0, "batches")),
            Holds("scores", a=Dim("scores", 2), b=Dim("boxes", 1, "boxes")),
            Scalar("max_output_boxes_per_class"),
            Scalar("iou_threshold"),
            Scalar("score_threshold"),
        ),
        Example(
            {
                "boxes": np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]]], np.float32),
                "scores": np.array([[[0.9, 0.8, 0.7]]], np.float32),
                "max_output_boxes_per_class": _i64(2),
                "iou_threshold": _f(1, value=0.5),
                "score_threshold": _f(1, value=0.1),
            }
        ),
        since=10,
    ),
    OpRules(
        "ReverseSequence",
        ("input", "sequence_lens"),
        (Length("sequence_lens", n=Dim("input", Attr("batch_axis", 1), "batches")),),
        Example({"input": (4, 3, 2), "sequence_lens": _i64(4, 2, 1)}),
        since=10,
    ),
    OpRules(
        "Split",
        ("input",),
        (AttrLength("attr:split", n=Outputs()),),
        Example({"input": (6, 2)}, {"split": [2, 4]}, outputs=2),
        since=2,
        until=12,
    ),
    OpRules(
        "Split",
        ("input", "split"),
        (
            Length("split", n=Outputs()),
            Holds("split", a=ProdValues("split", total=True), b=Dim("input", Attr("axis", 0))),
        ),
        Example({"input": (6, 2), "split": _i64(2, 4)}, outputs=2),
        since=13,
    ),
    OpRules(
        "STFT",
        ("signal", "frame_step", "window", "frame_length"),
        (
            Scalar("frame_step"),
            Scalar("frame_length"),
            Length("window", n=Value("frame_length"), when=Present("frame_length")),
        ),
        Example(
            {"signal": (1, 16, 1), "frame_step": _s(4), "window": _f(8), "frame_length": _s(8)}
        ),
        since=17,
    ),
)
"""The entries of this family, in the table's order."""
