"""OpenVINO compiled models in EPContext form: compiled once, loaded elsewhere
without the weights file, same outputs; a stale context refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper

OV = "OpenVINOExecutionProvider"


def _model(folder: Path) -> Path:
    """Conv, Relu, Flatten, MatMul, Add; the weights in ``weights.bin`` beside the model."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "k"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "kb"),
        numpy_helper.from_array(rng.standard_normal((4 * 6 * 6, 5)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "k", "kb"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    folder.mkdir(parents=True)
    path = folder / "cnn.onnx"
    onnx.save(proto, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def _session(model: Path, manager: Any) -> Any:
    return ortcore.InferenceSession(
        str(model), providers=["openvino", "cpu"], plugin_manager=manager
    )


@pytest.mark.parametrize("embed", [False, True])
def test_compiled_for_openvino_runs_elsewhere_without_the_weights(
    tmp_path: Path, manager: Any, counts: dict[str, Any], embed: bool
) -> None:
    path = _model(tmp_path / "src")
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    expected = _session(path, manager).run(None, {"x": x})[0]
    out = tmp_path / "src" / "cnn_ctx.onnx"
    ortcore.ModelCompiler(
        ortcore.SessionOptions(),
        str(path),
        embed_compiled_data_into_model=embed,
        flags=ortcore.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED,
        providers=["openvino", "cpu"],
        plugin_manager=manager,
    ).compile_to_file(str(out))
    proto = onnx.load(out)
    (node,) = proto.graph.node  # every node went to OpenVINO: one compiled group
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert (node.op_type, attrs["source"], attrs["embed_mode"]) == (
        "EPContext",
        OV.encode(),
        int(embed),
    )
    assert not proto.graph.initializer  # the weights are in the compiled binary
    files = [out] + ([] if embed else [tmp_path / "src" / attrs["ep_cache_context"].decode()])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for f in files:
        shutil.copy(f, elsewhere / f.name)
    assert not (elsewhere / "weights.bin").exists()
    builds = counts["builds"]
    sess = _session(elsewhere / out.name, manager)
    assert counts["builds"] == builds and counts["loads"] == 1  # imported, not built
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], expected)
    assert [r.node for r in sess.get_partition().nodes] == [
        "conv",
        "relu",
        "flatten",
        "matmul",
        "add",
    ]


def test_a_stale_openvino_context_is_refused(
    tmp_path: Path, manager: Any, counts: dict[str, Any]
) -> None:
    path = _model(tmp_path / "src")
    out = tmp_path / "src" / "cnn_ctx.onnx"
    ortcore.ModelCompiler(
        ortcore.SessionOptions(), str(path), providers=["openvino", "cpu"], plugin_manager=manager
    ).compile_to_file(str(out))
    key = f"ep_compatibility_info.{OV}"
    info = json.loads(ortcore.get_compatibility_info_from_model(out, OV))
    assert info["engine"]["engine_version"]  # OpenVINO's version, stated when compiled
    proto = onnx.load(out)
    for prop in proto.metadata_props:
        if prop.key == key:
            info["engine"]["engine_version"] = "1999.0.0-stale"
            prop.value = json.dumps(info)
    onnx.save(proto, out)
    with pytest.raises(
        ortcore.Fail,
        match=f"not supported by execution provider {OV}.*engine_version.*1999.0.0-stale",
    ):
        _session(out, manager)
    assert counts["loads"] == 0
