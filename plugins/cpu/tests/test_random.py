"""Random generators: shapes, dtypes, seeding, and the distributions' moments."""

from __future__ import annotations

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper


def _session(
    node: object, inputs: list, outputs: list, opset: int = 17
) -> ortcore.InferenceSession:
    graph = helper.make_graph([node], "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])


def _out(name: str, elem: int = TensorProto.FLOAT) -> object:
    return helper.make_tensor_value_info(name, elem, None)


@pytest.mark.parametrize(
    ("op", "mean", "std"), [("RandomNormal", 2.0, 3.0), ("RandomUniform", 1.5, 0.866)]
)
def test_seeded_generators_repeat_and_have_the_right_moments(
    op: str, mean: float, std: float
) -> None:
    attrs = {"mean": 2.0, "scale": 3.0} if op == "RandomNormal" else {"low": 0.0, "high": 3.0}
    node = helper.make_node(op, [], ["y"], shape=[200, 500], seed=3.0, **attrs)
    sess = _session(node, [], [_out("y")])
    (a,), (b,) = sess.run(None, {}), sess.run(None, {})
    assert a.shape == (200, 500) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert abs(float(a.mean()) - mean) < 0.05
    assert abs(float(a.std()) - std) < 0.05


def test_unseeded_generator_draws_fresh_values() -> None:
    node = helper.make_node("RandomUniform", [], ["y"], shape=[64], dtype=TensorProto.DOUBLE)
    sess = _session(node, [], [_out("y", TensorProto.DOUBLE)])
    (a,), (b,) = sess.run(None, {}), sess.run(None, {})
    assert a.dtype == np.float64 and not np.array_equal(a, b)
    assert ((a >= 0) & (a < 1)).all()


def test_like_forms_take_shape_and_type_from_the_input() -> None:
    node = helper.make_node("RandomNormalLike", ["x"], ["y"], seed=1.0)
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4])
    sess = _session(node, [x], [_out("y", TensorProto.DOUBLE)])
    (y,) = sess.run(None, {"x": np.zeros((3, 4))})
    assert y.shape == (3, 4) and y.dtype == np.float64


def test_multinomial_follows_the_probabilities() -> None:
    node = helper.make_node("Multinomial", ["x"], ["y"], sample_size=1000, seed=2.0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    sess = _session(node, [x], [_out("y", TensorProto.INT32)])
    logits = np.log(np.array([[1e-9, 1.0, 1e-9], [0.25, 0.25, 0.5]], np.float32))
    (y,) = sess.run(None, {"x": logits})
    assert y.shape == (2, 1000) and y.dtype == np.int32
    assert (y[0] == 1).all()
    assert abs(float((y[1] == 2).mean()) - 0.5) < 0.06


def test_bernoulli_extremes_and_dtype() -> None:
    node = helper.make_node("Bernoulli", ["p"], ["y"], dtype=TensorProto.INT64)
    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, [4])
    sess = _session(node, [p], [_out("y", TensorProto.INT64)], opset=15)
    (y,) = sess.run(None, {"p": np.array([0.0, 1.0, 0.0, 1.0], np.float32)})
    assert y.dtype == np.int64 and y.tolist() == [0, 1, 0, 1]
