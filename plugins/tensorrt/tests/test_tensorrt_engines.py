"""The TensorRT provider's engines: built by the real builder and kept in the
cache, and the runtime path against the stand-in runtime of ``fake_trt.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper
from trt_models import RESNET50, _groups, _session, mlp, with_unique

# -- engines: built by the real builder, kept in the cache ------------------------------


def test_static_engine_is_built_at_session_creation_then_loaded_from_cache(
    runnable: Any, tmp_path: Path
) -> None:
    sess = _session(runnable, mlp(batch=4), tmp_path)
    p = sess._providers[0]
    assert p.name == "TensorrtExecutionProvider" and p.builds == 1
    assert _groups(sess.get_partition()) == {"TensorrtExecutionProvider_fused_1": 4}
    entries = ortcore.cache.CompiledCache(tmp_path).scan("TensorrtExecutionProvider").entries
    assert [e["kind"] for e in entries] == ["engine"]
    assert entries[0]["provider_parts"]["engine_version"].startswith(("tensorrt", "tensorrt_rtx"))
    assert entries[0]["provider_parts"]["engine_target"]  # the device's compute capability
    again = _session(runnable, mlp(batch=4), tmp_path)
    assert again._providers[0].builds == 0  # loaded, not built
    other = _session(runnable, mlp(batch=4, seed=1), tmp_path)  # other weights: another engine
    assert other._providers[0].builds == 1
    assert len(ortcore.cache.CompiledCache(tmp_path).scan().entries) == 2


def test_light_resnet50_engine_is_static(runnable: Any, tmp_path: Path) -> None:
    """Its Reshape reads a shape from an initializer listed as a graph input;
    the model is of IR version 3, where no feed may replace it, so it is a
    constant (as in onnxruntime): no shape tensor input, no profile. (A shape
    a run may feed: :func:`reshape_by_input`, IR version 8.)"""
    sess = _session(runnable, str(RESNET50), tmp_path)
    assert sess._providers[0].builds == 1
    (entry,) = ortcore.cache.CompiledCache(tmp_path).scan().entries
    assert entry["profile"] == ""
    assert _session(runnable, str(RESNET50), tmp_path)._providers[0].builds == 0


def reshape_by_input() -> bytes:
    """y = Relu(Reshape(x, shape)), ``shape`` an initializer a run may feed."""
    shape = numpy_helper.from_array(np.array([4, 4], np.int64), "shape")
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
            helper.make_node("Relu", ["r"], ["y"], name="relu"),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # initializers listed as inputs are overridable
    return bytes(model.SerializeToString())


def test_light_resnet50_runs_as_the_cpu_provider_does(fake: Any, runnable: Any) -> None:
    """One static engine (its Reshape's shape a constant: IR version 3), the
    CPU provider's outputs."""
    sess = _session(runnable, str(RESNET50))
    cpu = ortcore.InferenceSession(str(RESNET50), providers=["cpu"])
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    feeds = {"gpu_0/data_0": x}
    np.testing.assert_allclose(sess.run(None, feeds)[0], cpu.run(None, feeds)[0], rtol=1e-4)
    assert [p.text() for p in fake.built] == [""]


def test_a_fed_shape_tensor_rebuilds_outside_its_values(
    fake: Any, runnable: Any, tmp_path: Path
) -> None:
    model = reshape_by_input()
    sess = _session(runnable, model, tmp_path)
    assert [p.text() for p in fake.built] == ["shape=4x4/4x4/4x4"]  # from the initializer
    cpu = ortcore.InferenceSession(model, providers=["cpu"])
    feeds: dict[str, np.ndarray] = {"x": np.arange(-8, 8, dtype=np.float32).reshape(2, 8)}
    for shape in ([4, 4], [8, 2], [2, 8]):
        feeds["shape"] = np.array(shape, np.int64)
        (got,) = sess.run(None, feeds)
        assert got.shape == tuple(shape)
        np.testing.assert_array_equal(got, cpu.run(None, feeds)[0])
    assert [p.text() for p in fake.built] == [
        "shape=4x4/4x4/4x4",
        "shape=4x2/8x2/8x4",
        "shape=2x2/2x8/8x8",
    ]


LIGHT_ZOO = sorted((Path(onnx.__file__).parent / "backend/test/data/light").glob("*.onnx"))


@pytest.mark.parametrize("path", LIGHT_ZOO, ids=[p.stem for p in LIGHT_ZOO])
def test_light_zoo_model_is_one_group_and_builds(path: Path, runnable: Any) -> None:
    """TensorRT takes each light zoo model whole and builds its engine."""
    sess = _session(runnable, str(path))
    assert sess.get_partition().counts() == {
        "TensorrtExecutionProvider": len(sess.get_partition().nodes)
    }
    assert len(_groups(sess.get_partition())) == 1
    assert sess._providers[0].builds == 1


def test_engine_cache_path_option_keeps_engines_without_a_session_cache(
    runnable: Any, tmp_path: Path
) -> None:
    opts = {"trt_engine_cache_enable": "1", "trt_engine_cache_path": str(tmp_path / "eng")}
    assert _session(runnable, mlp(batch=2), **opts)._providers[0].builds == 1
    assert _session(runnable, mlp(batch=2), **opts)._providers[0].builds == 0
    assert (tmp_path / "eng" / "TensorrtExecutionProvider").is_dir()


def test_dynamic_batch_with_profile_options_is_built_once(runnable: Any, tmp_path: Path) -> None:
    opts = {
        "trt_profile_min_shapes": "x:1x16",
        "trt_profile_opt_shapes": "x:8x16",
        "trt_profile_max_shapes": "x:32x16",
    }
    assert _session(runnable, mlp(), tmp_path, **opts)._providers[0].builds == 1
    assert _session(runnable, mlp(), tmp_path, **opts)._providers[0].builds == 0
    widened = dict(opts, trt_profile_max_shapes="x:64x16")  # another profile: another engine
    assert _session(runnable, mlp(), tmp_path, **widened)._providers[0].builds == 1


def test_options_that_change_engines_change_the_key(runnable: Any, tmp_path: Path) -> None:
    assert _session(runnable, mlp(batch=4), tmp_path)._providers[0].builds == 1
    level = {"trt_builder_optimization_level": "2"}
    assert _session(runnable, mlp(batch=4), tmp_path, **level)._providers[0].builds == 1
    assert _session(runnable, mlp(batch=4), tmp_path, **level)._providers[0].builds == 0


# -- the runtime path, against the stand-in runtime ------------------------------------


def test_runs_match_cpu_and_rebuild_only_outside_the_profile(
    fake: Any, runnable: Any, tmp_path: Path
) -> None:
    """The fake runtime (``fake_trt.py``) runs each plan's ONNX model on the CPU
    provider; what is tested is the provider's side: binding by name, shapes,
    buffers, copies, and when an engine is (re)built."""
    model = mlp()
    cpu = ortcore.InferenceSession(model, providers=["cpu"])
    sess = _session(runnable, model, tmp_path)
    assert fake.built == []  # dynamic batch, no profile options: built at the first run
    for batch in (4, 4, 2, 8, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        (got,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(got, cpu.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    # 4 (exact), then 2 (widened to 2..4), then 8 (widened to 2..8); 3 fits
    assert [p.text() for p in fake.built] == [
        "x:4x16/4x16/4x16",
        "x:2x16/2x16/4x16",
        "x:2x16/8x16/8x16",
    ]
    assert fake.memory.to_device_copies == 5 and fake.memory.to_host_copies == 5
    sess2 = _session(runnable, model, tmp_path)
    sess2.run(None, {"x": np.ones((4, 16), np.float32)})
    assert len(fake.built) == 3  # the first shape's engine came from the cache
    sess.close()  # frees the device buffers
    sess2.close()
    assert fake.memory.frees == fake.memory.allocs


def test_a_cached_engine_tensorrt_refuses_is_built_again(
    fake: Any, runnable: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = mlp(batch=2)
    _session(runnable, model, tmp_path)
    assert len(fake.built) == 1
    (entry,) = (tmp_path / "TensorrtExecutionProvider").glob("*.bin")
    entry.write_bytes(b"\0" * entry.stat().st_size)  # same size, not a plan
    sess = _session(runnable, model, tmp_path)
    assert len(fake.built) == 1  # the entry was found...
    x = np.ones((2, 16), np.float32)
    want = ortcore.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)
    assert len(fake.built) == 2  # ...refused by TensorRT, and built again
    assert "could not be loaded; building it again" in caplog.text
    assert entry.read_bytes().startswith(b"fake-plan")  # the entry was replaced


def test_explicit_profile_refuses_shapes_outside_it(fake: Any, runnable: Any) -> None:
    opts = {
        "trt_profile_min_shapes": "x:1x16",
        "trt_profile_opt_shapes": "x:2x16",
        "trt_profile_max_shapes": "x:4x16",
    }
    sess = _session(runnable, mlp(), **opts)
    assert len(fake.built) == 1  # built with the session
    sess.run(None, {"x": np.ones((3, 16), np.float32)})
    with pytest.raises(Exception, match=r"outside the trt_profile_\*_shapes range"):
        sess.run(None, {"x": np.ones((5, 16), np.float32)})


def test_each_thread_has_its_own_execution_context(fake: Any, runnable: Any) -> None:
    model = mlp(batch=2)
    sess = _session(runnable, model)
    cpu = ortcore.InferenceSession(model, providers=["cpu"])
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(5):
                x = np.full((2, 16), seed + i, np.float32)
                (got,) = sess.run(None, {"x": x})
                np.testing.assert_allclose(got, cpu.run(None, {"x": x})[0], rtol=1e-5)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert fake.contexts == 4 and fake.deserialized == 1


def test_refused_node_runs_on_cpu_between_two_engines(fake: Any, runnable: Any) -> None:
    sess = _session(runnable, with_unique())
    x = np.array([3, -1, 2, 3, 0, 2, -5, 1], np.float32)
    (got,) = sess.run(None, {"x": x})
    want = 1 / (1 + np.exp(-np.unique(np.maximum(x, 0))))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert sorted(_groups(sess.get_partition()).values()) == [1, 2]


@pytest.mark.gpu
def test_light_resnet50_on_the_gpu_matches_cpu(manager: Any) -> None:
    """On a machine with a GPU the provider is available: a real engine, run."""
    entry = next(e for e in manager.entries() if e.name == "TensorrtExecutionProvider")
    if not entry.available:
        pytest.skip(str(entry.reason))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    sess = _session(manager, str(RESNET50))
    cpu = ortcore.InferenceSession(str(RESNET50), providers=["cpu"])
    name = sess.get_inputs()[0].name
    np.testing.assert_allclose(
        sess.run(None, {name: x})[0], cpu.run(None, {name: x})[0], rtol=1e-3, atol=1e-4
    )


@pytest.mark.gpu
def test_device_buffers_and_copies_round_trip_on_the_gpu() -> None:
    """The driver-API path the runtime uses (``_cuda.CudaDriver``), on a real GPU."""
    from ortcore_tensorrt._cuda import CudaDriver, probe

    info = probe(0)
    if isinstance(info, str):
        pytest.skip(info)
    cuda = CudaDriver(0)
    stream = cuda.stream()
    x = np.arange(1000, dtype=np.float32)
    ptr = cuda.alloc(x.nbytes)
    try:
        cuda.to_device(ptr, x, stream)
        back = np.empty_like(x)
        cuda.to_host(back, ptr, stream)
        cuda.synchronize(stream)
    finally:
        cuda.free(ptr)
    np.testing.assert_array_equal(back, x)
