"""What OpenVINO would compute wrong is declined, with a reason; the rest stays on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper

OV = "OpenVINOExecutionProvider"
CPU = "CPUExecutionProvider"
LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: Any = ()) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def _session(model: bytes | str, manager: Any) -> Any:
    return ortcore.InferenceSession(
        model, ortcore.SessionOptions(), providers=["openvino", "cpu"], plugin_manager=manager
    )


def _records(sess: Any) -> dict[str, Any]:
    return {r.node: r for r in sess.get_partition().nodes}


def add_model(dtype: int) -> bytes:
    vi = [helper.make_tensor_value_info(n, dtype, [4]) for n in "aby"]
    return _model([helper.make_node("Add", ["a", "b"], ["y"], name="add")], vi[:2], vi[2:])


@pytest.mark.parametrize(
    ("dtype", "reason"),
    [
        (TensorProto.DOUBLE, "OpenVINO's CPU plugin computes float64 in float32"),
        (TensorProto.INT8, "OpenVINO's CPU plugin saturates int8/uint8 Add where ONNX wraps"),
    ],
)
def test_what_openvino_computes_otherwise_runs_on_cpu_with_the_reason(
    manager: Any, dtype: int, reason: str
) -> None:
    sess = _session(add_model(dtype), manager)
    record = _records(sess)["add"]
    assert record.provider == CPU
    assert record.declined[OV].startswith(reason)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    a = np.array([127, 1, -3, 100], np_type)
    b = np.array([1, 2, 3, 100], np_type)
    np.testing.assert_array_equal(sess.run(None, {"a": a, "b": b})[0], a + b)  # wraps on CPU


def test_a_float32_add_stays_on_openvino(manager: Any) -> None:
    record = _records(_session(add_model(TensorProto.FLOAT), manager))["add"]
    assert record.provider == OV and not record.declined


def test_int64_shape_arithmetic_stays_and_int64_data_arithmetic_is_declined(
    manager: Any,
) -> None:
    """Shape -> Gather -> Mul -> Reshape stays on OpenVINO (dimensions fit in
    int32); an Add of int64 data fed by the user does not."""
    inits = [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "one"], ["cols"], name="gather"),
        helper.make_node("Mul", ["cols", "two"], ["twice"], name="mul"),
        helper.make_node("Concat", ["minus1", "twice"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
        helper.make_node("Add", ["ids", "ids"], ["ids2"], name="add_ids"),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, [3]),
    ]
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("ids2", TensorProto.INT64, [3]),
    ]
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ortcore.InferenceSession(
        _model(nodes, inputs, outputs, inits),
        so,
        providers=["openvino", "cpu"],
        plugin_manager=manager,
    )
    records = _records(sess)
    for name in ("shape", "gather", "mul", "concat", "reshape"):
        assert records[name].provider == OV, name
    assert records["add_ids"].provider == CPU
    assert "int64 Add in int32" in records["add_ids"].declined[OV]
    ids = np.array([2**40, -(2**35), 7], np.int64)
    y, ids2 = sess.run(None, {"x": np.ones((4, 3), np.float32), "ids": ids})
    assert y.shape == (2, 6)
    np.testing.assert_array_equal(ids2, ids + ids)


@pytest.mark.parametrize("stem", ["resnet50", "squeezenet"])
def test_light_models_stay_one_openvino_group(manager: Any, stem: str) -> None:
    sess = _session(str(LIGHT / f"light_{stem}.onnx"), manager)
    records = sess.get_partition().nodes
    assert {r.provider for r in records} == {OV}
    assert len({r.group for r in records}) == 1


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "pads", "declined"),
    [
        (2, 1, 2, [0, 0, 0, 0], True),  # the last window would start past the input
        (2, 3, 3, [1, 1, 1, 1], True),
        (5, 2, 2, [0, 0, 0, 0], False),
        (6, 3, 2, [1, 1, 0, 0], False),
    ],
)
def test_maxpool_ceil_mode_is_declined_only_where_the_output_sizes_differ(
    manager: Any, size: int, kernel: int, stride: int, pads: list[int], declined: bool
) -> None:
    node = helper.make_node(
        "MaxPool",
        ["x"],
        ["y"],
        name="pool",
        kernel_shape=[kernel, kernel],
        strides=[stride, stride],
        pads=pads,
        ceil_mode=1,
    )
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    sess = _session(_model([node], [x], [y]), manager)
    record = _records(sess)["pool"]
    assert (record.provider == CPU) is declined
    if declined:
        assert "ceil_mode=1 keeps a last window" in record.declined[OV]


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "extra", "declined"),
    [
        ("ReduceMax", [2, 0, 4], TensorProto.FLOAT, {}, "of an empty set"),
        ("ReduceMin", [2, 0, 4], TensorProto.FLOAT, {}, "of an empty set"),
        ("ReduceMax", [2, 0, 4], TensorProto.FLOAT16, {}, None),  # -inf, as ONNX
        ("ReduceMax", [2, 3, 4], TensorProto.FLOAT, {}, None),
        ("Gather", [0, 3], TensorProto.FLOAT, {"axis": 1}, "zero-size dimension"),
        ("Gather", [2, 3], TensorProto.FLOAT, {"axis": 1}, None),
        ("Unique", [0], TensorProto.INT64, {}, "zero-size dimension"),
        ("ReduceMax", [0, 3], TensorProto.FLOAT, {}, None),  # the output is empty
        ("CumSum", [2, 8], TensorProto.BFLOAT16, {}, "bfloat16 CumSum"),
        ("CumSum", [2, 8], TensorProto.FLOAT, {}, None),
    ],
)
def test_node_level_declines_found_by_the_exploration(
    manager: Any, op: str, shape: list[Any], dtype: int, extra: dict[str, Any], declined: Any
) -> None:
    """Each rule declines the node it is for and not its near neighbour."""
    x = helper.make_tensor_value_info("x", dtype, shape)
    inits: list[Any] = []
    inputs: tuple[str, ...] = ()
    if op in ("ReduceMax", "ReduceMin", "Gather", "CumSum"):
        inits = [numpy_helper.from_array(np.array([1] if op != "CumSum" else 1, np.int64), "c")]
        inputs = ("c",)
    node = helper.make_node(op, ["x", *inputs], ["y"], name="n", **extra)
    y = helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)
    record = _records(_session(_model([node], [x], [y], inits), manager))["n"]
    if declined is None:
        assert record.provider == OV, record.declined
    else:
        assert record.provider == CPU
        assert declined in record.declined[OV]
