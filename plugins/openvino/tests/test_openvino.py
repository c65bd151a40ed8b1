"""The OpenVINO provider for real: partition, results against the CPU provider, cache, options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ep_sdk
import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper

from ortcore_openvino.provider import _core

HERE = Path(__file__).resolve().parent
RESNET50 = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
OV = "OpenVINOExecutionProvider"


def _session(
    model: Any, manager: Any, *providers: Any, cache: Path | None = None, save: bool = False
) -> Any:
    so = ortcore.SessionOptions()
    if cache is not None:
        so.add_session_config_entry("ortcore.cache_dir", str(cache))
    if save:
        so.add_session_config_entry("ortcore.save_session", "1")
    return ortcore.InferenceSession(model, so, providers=list(providers), plugin_manager=manager)


def _groups(sess: Any) -> dict[str, str]:
    return {r.node: r.group for r in sess.get_partition().nodes}


# -- without openvino ---------------------------------------------------------------


def test_unavailable_without_openvino_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore_openvino import provider

    monkeypatch.setattr(provider.importlib.util, "find_spec", lambda name: None)
    reason = provider.OpenVINOExecutionProvider.unavailable_reason()
    assert reason == "the openvino package is not installed; pip install openvino"

    def broken(name: str) -> None:
        raise ValueError("openvino.__spec__ is None")

    monkeypatch.setattr(provider.importlib.util, "find_spec", broken)
    reason = provider.OpenVINOExecutionProvider.unavailable_reason()
    assert reason is not None and "cannot be found" in reason


def test_options_are_checked() -> None:
    from ortcore_openvino.provider import OpenVINOExecutionProvider as P

    for bad, match in [
        ({"precision": "f64"}, "precision must be one of f32, bf16, f16"),
        ({"performance_hint": "fast"}, "performance_hint must be LATENCY or THROUGHPUT"),
        ({"num_threads": "-1"}, "num_threads must be a whole number"),
        ({"device": " "}, "device must not be empty"),
        ({"min_group_size": "0"}, "min_group_size must be a whole number >= 1"),
        ({"runtime_cache_capacity": "-5"}, "runtime_cache_capacity must be a whole number"),
        ({"nthreads": "2"}, "unknown provider option"),
    ]:
        with pytest.raises(ep_sdk.ProviderOptionError, match=match):
            P(bad)
    config = P({"precision": "BF16", "performance_hint": "throughput", "num_threads": "3"})
    assert config._config() == {
        "INFERENCE_PRECISION_HINT": "bf16",
        "PERFORMANCE_HINT": "THROUGHPUT",
        "INFERENCE_NUM_THREADS": "3",
        "CPU_RUNTIME_CACHE_CAPACITY": "128",  # bounded: memory stays flat as sizes change
    }
    assert P({"runtime_cache_capacity": "16"})._config()["CPU_RUNTIME_CACHE_CAPACITY"] == "16"
    assert "CPU_RUNTIME_CACHE_CAPACITY" not in P({"device": "GPU"})._config()  # a CPU property
    session_threads = P(config=ep_sdk.SessionConfig(intra_op_num_threads=2))
    assert session_threads._config()["INFERENCE_NUM_THREADS"] == "2"
    assert "INFERENCE_NUM_THREADS" not in P()._config()  # OpenVINO's default


def test_the_entry_point_names_the_plugin() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    meta = tomllib.loads((HERE.parent / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["ortcore.providers"] == {
        "openvino": "ortcore_openvino.plugin"
    }
    import ortcore_openvino.plugin

    (cls,) = ortcore_openvino.plugin.ortcore_providers()
    assert cls.name == OV and "openvino" in cls.aliases
    assert "openvino" not in sys.modules or cls.unavailable_reason() is None


# -- with openvino ------------------------------------------------------------------


def test_light_resnet50_is_one_group_matches_cpu_and_is_cached(
    tmp_path: Path, manager: Any, counts: dict[str, Any], ov: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    cpu = _session(str(RESNET50), manager, "cpu")
    (expected,) = cpu.run(None, {"gpu_0/data_0": x})
    sess = _session(str(RESNET50), manager, "openvino", "cpu", cache=tmp_path)
    assert set(sess.get_partition().counts()) == {OV}
    assert len(set(_groups(sess).values())) == 1  # the whole model, one group
    (got,) = sess.run(None, {"gpu_0/data_0": x})
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert (counts["builds"], counts["loads"]) == (1, 0)
    again = _session(str(RESNET50), manager, "openvino", "cpu", cache=tmp_path)
    assert (counts["builds"], counts["loads"]) == (1, 1)
    np.testing.assert_array_equal(again.run(None, {"gpu_0/data_0": x})[0], got)
    assert isinstance(counts["loaded"][0].blob, ov.Tensor)  # imported from the mapped entry
    from ortcore_openvino.provider import OpenVINOExecutionProvider as P

    monkeypatch.setattr(P, "load_compiled_mapped", False)  # bytes: copied once, then imported
    third = _session(str(RESNET50), manager, "openvino", "cpu", cache=tmp_path)
    assert (counts["builds"], counts["loads"]) == (1, 2)
    np.testing.assert_array_equal(third.run(None, {"gpu_0/data_0": x})[0], got)
    assert isinstance(counts["loaded"][1].blob, bytes)


def small_cnn(seed: int) -> bytes:
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm with random weights, batch dynamic."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "wc"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "bc"),
        numpy_helper.from_array(rng.standard_normal((5, 64)).astype(np.float32), "wg"),
        numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "bg"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "wc", "bc"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="gemm", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_a_saved_session_runs_the_imported_blob(
    tmp_path: Path, manager: Any, counts: dict[str, Any]
) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    model = small_cnn(12)
    cold = _session(model, manager, "openvino", "cpu", cache=tmp_path, save=True)
    warm = _session(model, manager, "openvino", "cpu", cache=tmp_path, save=True)
    assert warm._saved is not None and (counts["builds"], counts["loads"]) == (1, 1)
    np.testing.assert_array_equal(warm.run(None, {"x": x})[0], cold.run(None, {"x": x})[0])
    warm_part, cold_part = warm.get_partition().to_dict(), cold.get_partition().to_dict()
    # the same partition; only where each compiled group came from differs
    assert set(warm_part.pop("compiled").values()) == {"loaded from a saved session"}
    assert set(cold_part.pop("compiled").values()) == {"cache miss: compiled and stored"}
    assert warm_part == cold_part
    assert [(i.name, i.shape) for i in warm.get_inputs()] == [("x", ["N", 3, 8, 8])]
    # other weights, same structure: not the saved session of the first model
    other = _session(small_cnn(13), manager, "openvino", "cpu", cache=tmp_path, save=True)
    assert other._saved is None and counts["builds"] == 2
    cpu = _session(small_cnn(13), manager, "cpu")
    np.testing.assert_allclose(
        other.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4
    )


def test_other_weights_other_entries_dynamic_batch(
    tmp_path: Path, manager: Any, counts: dict[str, Any]
) -> None:
    rng = np.random.default_rng(1)
    for seed in (10, 11, 10):
        model = small_cnn(seed)
        sess = _session(model, manager, "openvino", "cpu", cache=tmp_path)
        cpu = _session(model, manager, "cpu")
        assert sess.get_partition().counts() == {OV: 5}
        for batch in (1, 3):
            x = rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)
            (got,) = sess.run(None, {"x": x})
            np.testing.assert_allclose(got, cpu.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    assert (counts["builds"], counts["loads"]) == (2, 1)
    entries = ortcore.cache.CompiledCache(tmp_path).entries()  # type: ignore[attr-defined]
    assert len(entries) == 2
    parts = entries[0]["provider_parts"]
    assert parts["engine"] == "OpenVINO" and parts["engine_version"]
    assert parts["engine_target"].startswith("CPU")


def test_what_openvino_refuses_runs_on_cpu_with_its_reason(manager: Any) -> None:
    clamp = ortcore.custom_op(
        domain="ovtest.ops",
        name="Clamp6",
        inputs=["X: T"],
        outputs=["Y: T"],
        # with the shape known downstream, OpenVINO takes the nodes after it
        shape=lambda inputs, attrs: [ortcore.TensorType(inputs[0].dtype, inputs[0].shape)],
    )

    @clamp.kernel("CPUExecutionProvider")
    def clamp_kernel(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
        return lambda x: (np.clip(x, -6, 6),)

    nodes = [
        helper.make_node("Mul", ["x", "w"], ["a"], name="mul"),
        helper.make_node("Add", ["a", "x"], ["b"], name="add"),
        helper.make_node("Clamp6", ["b"], ["c"], name="clamp", domain="ovtest.ops"),
        helper.make_node("Relu", ["c"], ["d"], name="relu"),
        helper.make_node("Tanh", ["d"], ["y"], name="tanh"),
    ]
    w = numpy_helper.from_array(np.array([4.0, -1.0, 0.5], np.float32), "w")
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 3]) for n in "xy"]
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ovtest.ops", 1)]
    graph = helper.make_graph(nodes, "g", io[:1], io[1:], [w])
    model = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    so = ortcore.SessionOptions()
    so.register_custom_ops(clamp)
    sess = ortcore.InferenceSession(
        model, so, providers=["openvino", "cpu"], plugin_manager=manager
    )
    x = np.array([[-2.0, 0.5, 3.0], [3.0, -0.1, 4.0]], np.float32)
    expected = np.tanh(np.maximum(np.clip(x * [4.0, -1.0, 0.5] + x, -6, 6), 0))
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)
    records = {r.node: r for r in sess.get_partition().nodes}
    assert records["clamp"].provider == "CPUExecutionProvider"
    assert records["clamp"].declined[OV] == "OpenVINO's ONNX frontend cannot convert Clamp6"
    groups = _groups(sess)
    assert groups["mul"] == groups["add"] != groups["relu"] == groups["tanh"]
    assert records["relu"].provider == OV and not records["relu"].declined


def test_precision_threads_and_hint_reach_openvino(manager: Any, counts: dict[str, Any]) -> None:
    options = {"precision": "bf16", "num_threads": "1", "performance_hint": "THROUGHPUT"}
    model = small_cnn(3)
    sess = _session(model, manager, ("openvino", options), "cpu")
    (engine,) = counts["engines"]
    compiled = engine.compiled
    # OpenVINO's CPU plugin honours bf16 only where the CPU has bf16 arithmetic
    # (AVX512-BF16 or AMX); elsewhere it computes in f32, whatever the hint.
    caps = _core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    want = ("bf16", "<Type: 'bfloat16'>") if "BF16" in caps else ("f32", "<Type: 'float32'>")
    assert str(compiled.get_property("INFERENCE_PRECISION_HINT")) in want
    assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == 1
    assert str(compiled.get_property("PERFORMANCE_HINT")).endswith("THROUGHPUT")
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    cpu = _session(model, manager, "cpu")
    np.testing.assert_allclose(
        sess.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=0.02, atol=0.5
    )
