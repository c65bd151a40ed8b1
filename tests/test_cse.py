"""Common-subexpression elimination (basic level)."""

from __future__ import annotations

import numpy as np
from onnx import helper

import ortcore

from .conftest import fvi, level_session, make_model, op_types

Level = ortcore.GraphOptimizationLevel
X = np.array([[1.0, -2.0], [3.0, -4.0]], np.float32)


def test_equal_nodes_are_merged_with_equal_outputs(cpu: str) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Relu", ["x"], ["b"]),
        helper.make_node("LeakyRelu", ["a"], ["c"], alpha=0.5),
        helper.make_node("LeakyRelu", ["b"], ["d"], alpha=0.5),
        helper.make_node("Add", ["c", "d"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 2])], [fvi("y", [2, 2])])
    plain = level_session(model, Level.ORT_DISABLE_ALL, cpu)
    basic = level_session(model, Level.ORT_ENABLE_BASIC, cpu)
    assert op_types(plain) == ["Add", "LeakyRelu", "LeakyRelu", "Relu", "Relu"]
    assert op_types(basic) == ["Add", "LeakyRelu", "Relu"]
    np.testing.assert_array_equal(basic.run(None, {"x": X})[0], plain.run(None, {"x": X})[0])


def test_different_attributes_or_random_ops_are_not_merged(cpu: str) -> None:
    """Counter-patterns: other attribute values, and two random draws."""
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.5),
        helper.make_node("LeakyRelu", ["x"], ["b"], alpha=0.25),
        helper.make_node("RandomNormalLike", ["x"], ["r1"], seed=1.0),
        helper.make_node("RandomNormalLike", ["x"], ["r2"], seed=1.0),
        helper.make_node("Sub", ["r1", "r2"], ["d"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 2])], [fvi("y", [2, 2]), fvi("d", [2, 2])])
    sess = level_session(model, Level.ORT_ENABLE_BASIC, cpu)
    ops = op_types(sess)
    assert ops.count("LeakyRelu") == 2
    assert ops.count("RandomNormalLike") == 2


def test_duplicate_graph_output_keeps_its_name(cpu: str) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y1"]), helper.make_node("Relu", ["x"], ["y2"])]
    model = make_model(nodes, [fvi("x", [2, 2])], [fvi("y1", [2, 2]), fvi("y2", [2, 2])])
    sess = level_session(model, Level.ORT_ENABLE_ALL, cpu)
    assert [o.name for o in sess.get_outputs()] == ["y1", "y2"]
    y1, y2 = sess.run(None, {"x": X})
    np.testing.assert_array_equal(y1, np.maximum(X, 0))
    np.testing.assert_array_equal(y2, np.maximum(X, 0))
