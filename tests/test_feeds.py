"""Feed checking on its own: names, types, ranks and fixed dims, in plan order."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

from ortcore import InvalidArgument, OrtValue
from ortcore.feeds import FeedValidator
from ortcore.model import load_model

from .conftest import fvi, make_model

W = np.full((3,), 2.0, np.float32)


def _validator() -> FeedValidator:
    """x: float [2, "n"], k: int64 of unknown shape, w: an overridable initializer."""
    data = make_model(
        [],
        [fvi("x", [2, "n"]), fvi("k", None, TensorProto.INT64), fvi("w", [3])],
        [fvi("x", [2, "n"])],
        [numpy_helper.from_array(W, "w")],
    )
    graph = load_model(data).graph
    inputs = [v for v in graph.inputs if v.name != "w"]
    overridable = [v for v in graph.inputs if v.name == "w"]
    return FeedValidator(inputs, overridable, {})


def test_feeds_come_in_plan_order_with_initializer_defaults() -> None:
    v = _validator()
    assert v.required == ["x", "k"]
    x = np.ones((2, 5), np.float32)
    feeds = v.prepare({"k": [1, 2], "x": x})
    assert feeds[0] is x and feeds[1].dtype == np.int64
    np.testing.assert_array_equal(feeds[2], W)
    w = np.zeros(3, np.float32)
    assert v.prepare({"x": x, "k": np.array(1), "w": w})[2] is w
    host, devices = v.prepare_ortvalues({"x": OrtValue(x), "k": np.array(3)})
    assert host[0] is x and all(d.is_host for d in devices)


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        ({"x": np.ones((2, 5), np.float32)}, r"Required inputs \(\['k'\]\) are missing"),
        ({"x": np.ones((2, 5)), "k": np.array(1)}, r"Actual: \(tensor\(double\)\) , expected"),
        ({"x": np.ones(2, np.float32), "k": np.array(1)}, "Invalid rank for input: x Got: 1"),
        (
            {"x": np.ones((3, 5), np.float32), "k": np.array(1)},
            "invalid dimensions for input: x for the following indices\n index: 0 Got: 3",
        ),
        ({"x": np.ones((2, 5), np.float32), "k": 1, "y": 1}, "Invalid input name: y"),
    ],
)
def test_feed_errors_use_onnxruntime_messages(feed: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        _validator().prepare(feed)


def test_check_name_accepts_overridable_initializers() -> None:
    v = _validator()
    v.check_name("w")
    with pytest.raises(InvalidArgument, match=r"Invalid input name: y. Model inputs: \['x', 'k'\]"):
        v.check_name("y")
