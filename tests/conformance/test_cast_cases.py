"""onnx's cast node tests graded on what ONNX defines: a float cast to an
integer type out of range (NaN, infinities) is undefined, and the generated
expected outputs there follow the installed ml_dtypes release."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from conformance.cast_reference import cast_exact, defined_casts_only


def _cast_model(src: int, dst: int, op: str = "Cast") -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", src, [None])]
    if op == "CastLike":
        inputs.append(helper.make_tensor_value_info("like", dst, [1]))
        node = helper.make_node("CastLike", ["x", "like"], ["y"])
    else:
        node = helper.make_node("Cast", ["x"], ["y"], to=dst)
    output = helper.make_tensor_value_info("y", dst, [None])
    graph = helper.make_graph([node], "g", inputs, [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])


def test_out_of_range_floats_are_replaced_by_in_range_ones() -> None:
    x = np.array([-9.5, -8.9, -3.2, 0.0, 7.9, 8.0, 100.0, np.nan, np.inf, -np.inf], np.float32)
    stale = np.zeros(x.shape, ml_dtypes.int4)  # whatever a release answered
    [(ins, outs)] = defined_casts_only(
        _cast_model(TensorProto.FLOAT, TensorProto.INT4), [([x], [stale])]
    )
    want_in = np.array([-8.0, -8.9, -3.2, 0.0, 7.9, 7.0, 7.0, 0.0, 7.0, -8.0], np.float32)
    np.testing.assert_array_equal(ins[0], want_in)
    assert ins[0].dtype == np.float32
    np.testing.assert_array_equal(outs[0], cast_exact(ins[0], ml_dtypes.int4))
    assert outs[0].astype(np.int64).tolist() == [-8, -8, -3, 0, 7, 7, 7, 0, 7, -8]


def test_castlike_and_a_bound_the_input_type_cannot_hold() -> None:
    # float32 cannot hold int32's largest value (2**31 - 1 rounds up, out of range)
    x = np.array([3e9, -3e9, 12.5], np.float32)
    like = np.zeros(1, np.int32)
    [(ins, outs)] = defined_casts_only(
        _cast_model(TensorProto.FLOAT, TensorProto.INT32, "CastLike"),
        [([x, like], [np.zeros(3, np.int32)])],
    )
    assert ins[0].tolist()[2] == 12.5 and ins[1] is like
    assert outs[0].tolist() == [0, -2147483648, 12]


def test_in_range_data_and_other_models_are_left_alone() -> None:
    x = np.array([-3.0, 2.5], np.float32)
    want = np.array([-3, 2], np.int8)
    sets = [([x], [want])]
    assert defined_casts_only(_cast_model(TensorProto.FLOAT, TensorProto.INT8), sets) is not sets
    [(ins, outs)] = defined_casts_only(_cast_model(TensorProto.FLOAT, TensorProto.INT8), sets)
    assert ins[0] is x and outs[0] is want
    to_float = _cast_model(TensorProto.FLOAT, TensorProto.FLOAT16)
    assert defined_casts_only(to_float, sets) is sets
    relu = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
            [helper.make_tensor_value_info("y", TensorProto.INT8, [None])],
        )
    )
    assert defined_casts_only(relu, sets) is sets
