"""The suite's oracle: onnx.reference with the operators it gets wrong replaced."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conformance.oracle import evaluator

RNG = np.random.default_rng(7)


def _model(op: str, opset: int, x: np.ndarray, consts: dict[str, Any], **attrs: Any) -> Any:
    node = helper.make_node(op, ["x", *consts], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _oracle(model: Any, x: np.ndarray) -> np.ndarray:
    return evaluator(model).run(None, {"x": x})[0]  # type: ignore[no-any-return]


def _softmax_2d(x: np.ndarray, axis: int) -> np.ndarray:
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


@pytest.mark.parametrize(("opset", "attrs", "axis"), [(9, {}, 1), (11, {"axis": 2}, 2)])
def test_softmax_before_13_coerces_to_2d(opset: int, attrs: dict[str, int], axis: int) -> None:
    x = RNG.standard_normal((2, 3, 4, 1)).astype(np.float32)
    got = _oracle(_model("Softmax", opset, x, {}, **attrs), x)
    np.testing.assert_allclose(got, _softmax_2d(x, axis), rtol=1e-6)
    # onnx.reference alone normalizes over the last axis of size 1: all ones
    if opset == 9:
        raw = ReferenceEvaluator(_model("Softmax", opset, x, {})).run(None, {"x": x})[0]
        assert np.all(raw == 1)


def test_logsoftmax_and_hardmax_before_13() -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    got = _oracle(_model("LogSoftmax", 9, x, {}), x)
    np.testing.assert_allclose(got, np.log(_softmax_2d(x, 1)), rtol=1e-5)
    hard = _oracle(_model("Hardmax", 9, x, {}), x).reshape(2, -1)
    assert hard.sum(axis=1).tolist() == [1, 1]
    assert (hard.argmax(axis=1) == x.reshape(2, -1).argmax(axis=1)).all()


def test_softmax_from_13_is_upstream() -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    model = _model("Softmax", 13, x, {})
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(_oracle(model, x), want)


def _bn_consts() -> dict[str, np.ndarray]:
    scale, bias, mean = (RNG.standard_normal(3).astype(np.float32) for _ in range(3))
    return {"s": scale, "b": bias, "m": mean, "v": RNG.uniform(0.5, 2, 3).astype(np.float32)}


@pytest.mark.parametrize("opset", [7, 9, 15])
def test_batchnorm_with_one_output_is_inference(opset: int) -> None:
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    c = _bn_consts()
    got = _oracle(_model("BatchNormalization", opset, x, c, epsilon=1e-3), x)
    r = (-1, 1, 1)
    want = c["s"].reshape(r) * (x - c["m"].reshape(r)) / np.sqrt(c["v"].reshape(r) + 1e-3)
    np.testing.assert_allclose(got, want + c["b"].reshape(r), rtol=1e-5, atol=1e-6)


def test_lrn_sums_over_channels_of_one_image() -> None:
    x = RNG.uniform(0, 3, (1, 6, 2, 2)).astype(np.float32)
    got = _oracle(_model("LRN", 13, x, {}, size=3, alpha=0.01, beta=0.75, bias=1.0), x)
    x64 = x.astype(np.float64)
    sums = np.stack([(x64[:, max(0, c - 1) : c + 2] ** 2).sum(axis=1) for c in range(6)], axis=1)
    np.testing.assert_allclose(got, x64 / (1 + 0.01 / 3 * sums) ** 0.75, rtol=1e-6)


def _cast_model(op: str, src: int, dst: int, **attrs: Any) -> Any:
    inputs = [helper.make_tensor_value_info("x", src, [None])]
    if op == "CastLike":
        inputs.append(helper.make_tensor_value_info("like", dst, [1]))
    else:
        attrs["to"] = dst
    node = helper.make_node(op, [i.name for i in inputs], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", dst, [None])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_cast_rounds_once_and_zeroes_out_of_range_whatever_ml_dtypes() -> None:
    """The answers of ml_dtypes 0.7 (older releases round float64 twice and wrap)."""
    import ml_dtypes

    x = np.array([1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8 + 2.0**-30)])
    model = _cast_model("Cast", onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)
    (y,) = evaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(y.astype(np.float64), [1 + 2.0**-7, -(1 + 2.0**-7)])
    model = _cast_model("CastLike", onnx.TensorProto.FLOAT, onnx.TensorProto.INT4)
    x32 = np.array([7.9, -9.0, 100.0, np.nan], np.float32)
    (y,) = evaluator(model).run(None, {"x": x32, "like": np.zeros(1, ml_dtypes.int4)})
    np.testing.assert_array_equal(y.astype(np.int8), [7, 0, 0, 0])
    strings = _cast_model("Cast", onnx.TensorProto.FLOAT, onnx.TensorProto.STRING)
    (text,) = evaluator(strings).run(None, {"x": np.array([0.5], np.float32)})
    assert list(text) == ["0.5"]
