"""How values cross into and out of OpenVINO (``ortcore_openvino._engine``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import ortcore
from onnx import TensorProto, helper

OV = "OpenVINOExecutionProvider"


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], opset: int = 18) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)]
    ).SerializeToString()


def _session(model: bytes, manager: Any, cache: Path | None = None) -> Any:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    if cache is not None:
        so.add_session_config_entry("ortcore.cache_dir", str(cache))
    sess = ortcore.InferenceSession(model, so, providers=["openvino"], plugin_manager=manager)
    assert set(sess.get_partition().counts()) == {OV}
    return sess


def test_a_0d_input_is_fed_as_it_is(manager: Any) -> None:
    vi = helper.make_tensor_value_info
    model = _model(
        [helper.make_node("Mul", ["x", "s"], ["y"])],
        [vi("x", TensorProto.FLOAT, [3]), vi("s", TensorProto.FLOAT, [])],
        [vi("y", TensorProto.FLOAT, [3])],
    )
    x = np.array([1.0, -2.0, 3.0], np.float32)
    (y,) = _session(model, manager).run(None, {"x": x, "s": np.array(2.5, np.float32)})
    np.testing.assert_array_equal(y, x * 2.5)


def test_an_input_openvino_drops_is_not_fed(manager: Any) -> None:
    """OpenVINO reads an empty ``axes`` input as "no axes" and drops it."""
    vi = helper.make_tensor_value_info
    model = _model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
        [vi("x", TensorProto.FLOAT, [2, 3]), vi("axes", TensorProto.INT64, [0])],
        [vi("y", TensorProto.FLOAT, [])],
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = _session(model, manager).run(None, {"x": x, "axes": np.zeros(0, np.int64)})
    np.testing.assert_array_equal(y, np.float32(15.0))


def passthrough_model() -> bytes:
    """``Dropout`` passes ``x`` through: OpenVINO names that input ``y``."""
    vi = helper.make_tensor_value_info
    return _model(
        [helper.make_node("Dropout", ["x"], ["y"]), helper.make_node("Neg", ["z"], ["w"])],
        [vi("z", TensorProto.FLOAT, [2]), vi("x", TensorProto.FLOAT, [3])],
        [vi("y", TensorProto.FLOAT, [3]), vi("w", TensorProto.FLOAT, [2])],
    )


def test_an_input_openvino_renames_is_fed_by_position_also_from_the_cache(
    manager: Any, counts: dict[str, Any], tmp_path: Path
) -> None:
    x = np.array([1.5, -2.0, 4.0], np.float32)
    z = np.array([3.0, -1.0], np.float32)
    for _ in range(2):
        y, w = _session(passthrough_model(), manager, tmp_path).run(None, {"x": x, "z": z})
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(w, -z)
    assert (counts["builds"], counts["loads"]) == (2, 2)  # two groups: built, then loaded


def test_bfloat16_and_int4_values_keep_their_bits(manager: Any) -> None:
    vi = helper.make_tensor_value_info
    model = _model(
        [
            helper.make_node("Neg", ["b"], ["nb"]),
            helper.make_node("Cast", ["f"], ["fb"], to=TensorProto.BFLOAT16),
            helper.make_node("QuantizeLinear", ["f", "scale", "zero"], ["q"]),
            helper.make_node("DequantizeLinear", ["q4", "scale", "zero4"], ["d"]),
        ],
        [
            vi("b", TensorProto.BFLOAT16, [3]),
            vi("f", TensorProto.FLOAT, [5]),
            vi("scale", TensorProto.FLOAT, []),
            vi("zero", TensorProto.INT4, []),
            vi("q4", TensorProto.INT4, [5]),
            vi("zero4", TensorProto.INT4, []),
        ],
        [
            vi("nb", TensorProto.BFLOAT16, [3]),
            vi("fb", TensorProto.BFLOAT16, [5]),
            vi("q", TensorProto.INT4, [5]),
            vi("d", TensorProto.FLOAT, [5]),
        ],
        opset=21,
    )
    b = np.array([0.5, -2.75, 3.0], ml_dtypes.bfloat16)
    f = np.array([0.5, -1.0, 2.0, 3.0, -7.0], np.float32)
    q4 = np.array([1, -2, 7, -8, 0], ml_dtypes.int4)
    int4 = ml_dtypes.int4
    feeds = {
        "b": b,
        "f": f,
        "scale": np.array(1.0, np.float32),
        "zero": np.array(0, int4),
        "q4": q4,
        "zero4": np.array(1, int4),
    }
    nb, fb, q, d = _session(model, manager).run(None, feeds)
    assert nb.dtype == fb.dtype == ml_dtypes.bfloat16 and q.dtype == int4
    np.testing.assert_array_equal(nb.astype(np.float32), -b.astype(np.float32))
    np.testing.assert_array_equal(fb.astype(np.float32), f)
    assert q.shape == (5,)
    np.testing.assert_array_equal(q.astype(np.int8), [0, -1, 2, 3, -7])  # ties to even
    np.testing.assert_array_equal(d, q4.astype(np.float32) - 1)
