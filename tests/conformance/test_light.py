"""Light models with seeded random weights: the recipe, the calibration, the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conformance import light
from conformance.oracle import evaluator


def _light_style_model(path: Path) -> Path:
    """Conv → BatchNormalization → Relu → pool → Gemm → Softmax, opset 9, IR 3, with
    every weight a ConstantOfShape of 0.02 (as onnx's light models)."""
    shapes = {"W": [4, 3, 3, 3], "B": [4], "s": [4], "b": [4], "m": [4], "v": [4]}
    shapes.update(fc_w=[5, 4], fc_b=[5])
    fill = helper.make_tensor("value", TensorProto.FLOAT, [1], [0.02])
    nodes = [helper.make_node("ConstantOfShape", [f"{k}__SHAPE"], [k], value=fill) for k in shapes]
    nodes += [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(v, np.int64), f"{k}__SHAPE") for k, v in shapes.items()
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    inputs += [
        helper.make_tensor_value_info(t.name, TensorProto.INT64, [len(t.dims)]) for t in inits
    ]
    graph = helper.make_graph(
        nodes, "light", inputs, [helper.make_tensor_value_info("y", 1, [1, 5])], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    return _light_style_model(tmp_path / "light_tiny.onnx")


def test_randomize_replaces_every_weight(model_path: Path) -> None:
    model = light.randomize(onnx.load(str(model_path)))
    assert [n.op_type for n in model.graph.node if n.op_type == "ConstantOfShape"] == []
    assert [vi.name for vi in model.graph.input] == ["x"]
    assert model.ir_version >= 4
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert weights["W"].shape == (4, 3, 3, 3) and weights["fc_w"].shape == (5, 4)
    assert len(np.unique(weights["W"])) == weights["W"].size  # random, not constant
    # He initialization: variance 2 / fan_in (27)
    assert 0.3 * 2 / 27 < float(weights["W"].var()) < 3 * 2 / 27
    onnx.checker.check_model(model)
    again = light.randomize(onnx.load(str(model_path)))
    assert again.SerializeToString() == model.SerializeToString()  # seeded


def test_calibrated_outputs_are_what_the_oracle_gives(model_path: Path) -> None:
    model = light.randomize(onnx.load(str(model_path)))
    inputs = light.inputs_for(model)
    stats, outputs = light.calibrate(model, inputs)
    assert set(stats) == {"m", "v"}
    fresh = evaluator(light.with_stats(model, stats)).run(None, {"x": inputs[0]})
    np.testing.assert_array_equal(fresh[0], outputs[0])
    assert 0.2 < float(outputs[0].max()) < 0.99  # a softmax that is neither flat nor one-hot


def test_oracle_results_are_cached(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(light.CACHE_ENV, str(tmp_path / "cache"))
    calls: list[int] = []

    def counting(*args: Any) -> Any:
        calls.append(1)
        return light.calibrate(*args)

    model, [(ins, outs)] = light.load_light(model_path, oracle=counting)
    assert len(calls) == 1 and len(list((tmp_path / "cache").glob("light-tiny-*.npz"))) == 1
    model2, [(ins2, outs2)] = light.load_light(model_path, oracle=counting)
    assert len(calls) == 1  # read from the cache
    assert model2.SerializeToString() == model.SerializeToString()
    np.testing.assert_array_equal(outs2[0], outs[0])
    np.testing.assert_array_equal(ins2[0], ins[0])
    for f in (tmp_path / "cache").glob("*.npz"):
        f.write_bytes(b"not an npz")
    light.load_light(model_path, oracle=counting)
    assert len(calls) == 2  # a broken entry is computed again


def test_cpu_runs_the_random_weight_model(model_path: Path, cpu: str) -> None:
    import ortcore

    model, [(ins, outs)] = light.load_light(model_path)
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=[cpu])
    np.testing.assert_allclose(sess.run(None, {"x": ins[0]})[0], outs[0], rtol=1e-4, atol=1e-6)
