"""Models and session helpers the TensorRT provider's tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import ortcore
from onnx import TensorProto, helper, numpy_helper

RESNET50 = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"


def _session(manager: Any, model: Any, cache: Path | None = None, **options: str) -> Any:
    so = ortcore.SessionOptions()
    if cache is not None:
        so.add_session_config_entry("ortcore.cache_dir", str(cache))
    return ortcore.InferenceSession(
        model, so, providers=[("tensorrt", options), "cpu"], plugin_manager=manager
    )


def _groups(part: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in part.nodes:
        if r.group:
            out[r.group] = out.get(r.group, 0) + 1
    return out


def mlp(batch: int | str = "N", seed: int = 0) -> bytes:
    """x (batch, 16) -> MatMul/Add/Relu/MatMul -> y (batch, 4)."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 4)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        [w1, b1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return bytes(model.SerializeToString())


def with_unique() -> bytes:
    """Relu -> Unique -> Relu -> Sigmoid: TensorRT's parser refuses Unique."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node("Unique", ["a"], ["u"], name="unique", sorted=1),
        helper.make_node("Relu", ["u"], ["b"], name="second"),
        helper.make_node("Sigmoid", ["b"], ["y"], name="third"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return bytes(model.SerializeToString())
