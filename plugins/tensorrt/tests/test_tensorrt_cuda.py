"""The TensorRT provider with the CUDA provider: device tensors shared in place,
and what the host lends (SDK 1.1): the CUDA peer and the artifact store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ep_sdk
import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper
from trt_models import mlp

# -- device tensors shared with the CUDA provider ----------------------------------------


@pytest.mark.parametrize("share", ["auto", "0"])
def test_engines_read_and_write_the_cuda_providers_tensors_in_place(
    fake: Any, runnable: Any, monkeypatch: pytest.MonkeyPatch, share: str
) -> None:
    """With ortcore-cuda able to run (here on its CPU emulation), the
    provider's device is the CUDA provider's: a CUDA kernel's output feeds an
    engine, and an engine's output a CUDA kernel, in device memory, with no
    copy through the host between them."""
    pytest.importorskip("ortcore_cuda")
    import ortcore_cuda.plugin

    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    monkeypatch.setenv("ORTCORE_CUDA_EMULATE", "1")
    runnable.register_plugin(ortcore_cuda.plugin, name="ortcore_cuda")
    # the parser is asked about Sigmoid as about anything; this refusal puts it on CUDA
    monkeypatch.setattr(
        P,
        "supports_node",
        lambda self, node, graph: node.op_type != "Sigmoid" or "refused for the test",
    )
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 4)).astype(np.float32), "w2")
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["h"], name="mm1"),
        n("Relu", ["h"], ["r"], name="relu"),
        n("Sigmoid", ["r"], ["s"], name="sigmoid"),
        n("MatMul", ["s", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = ortcore.InferenceSession(
        model.SerializeToString(),
        providers=[("tensorrt", {"trt_cuda_tensors": share}), "cuda", "cpu"],
        plugin_manager=runnable,
    )
    part = sess.get_partition()
    where = {r.node: r.provider for r in part.nodes}
    assert where["sigmoid"] == "CUDAExecutionProvider"
    assert {where["mm1"], where["relu"], where["mm2"]} == {"TensorrtExecutionProvider"}
    if share == "auto":  # in and out, nothing between
        assert sorted(c.name for c in part.copies) == ["x", "y"]
    else:  # the engines' values on the host: Sigmoid's input and output cross
        assert sorted(c.name for c in part.copies) == ["r", "s"]
    x = rng.standard_normal((3, 16)).astype(np.float32)
    for _ in range(2):
        (got,) = sess.run(None, {"x": x})
        want = (1 / (1 + np.exp(-np.maximum(x @ _array(w1), 0)))) @ _array(w2)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    memory = fake.memory
    staged = memory.to_device_copies + memory.to_host_copies
    assert staged == 0 if share == "auto" else staged == 8  # 2 engines x (1 in + 1 out) x 2 runs


def _array(t: Any) -> np.ndarray:
    return numpy_helper.to_array(t)


def test_cuda_tensors_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    with pytest.raises(ortcore.ProviderOptionError, match="trt_cuda_tensors must be"):
        P({"trt_cuda_tensors": "sometimes"})
    assert P({"trt_cuda_tensors": "0"}).device.is_host
    monkeypatch.delenv("ORTCORE_CUDA_EMULATE", raising=False)
    try:
        import ortcore_cuda  # noqa: F401
    except ImportError:
        pass
    else:
        from ortcore_cuda.provider import CUDAExecutionProvider

        if CUDAExecutionProvider.unavailable_reason() is None:
            pytest.skip("the CUDA provider can run here")
    assert P().device.is_host  # auto: no CUDA provider to share with
    with pytest.raises(ortcore.ProviderOptionError, match="trt_cuda_tensors=1"):
        P({"trt_cuda_tensors": "1"})


# -- what the host lends (SDK 1.1): the CUDA peer and the artifact store -------------------
# These need neither TensorRT nor a GPU: the provider is made with a host's config.


def _config(tmp_path: Path | None = None, *plugins: Any) -> Any:
    from ortcore.host import session_config
    from ortcore.plugins import PluginManager

    pm = PluginManager(autoload=False)
    for plugin in plugins:
        pm.register_plugin(plugin, name=plugin.__name__)
    return session_config(pm, intra_op_num_threads=0, config_entries={}, cache_dir=tmp_path)


@pytest.fixture
def cuda_plugin(monkeypatch: pytest.MonkeyPatch) -> Any:
    """ortcore_cuda's plugin module, its provider running on the CPU emulation."""
    pytest.importorskip("ortcore_cuda")
    from ortcore_cuda.emulator import compiler

    if compiler() is None:
        pytest.skip("no C++ compiler for the CUDA emulation")
    monkeypatch.setenv("ORTCORE_CUDA_EMULATE", "1")
    import ortcore_cuda.plugin

    return ortcore_cuda.plugin


def test_the_cuda_provider_is_lent_by_the_host(cuda_plugin: Any) -> None:
    from ortcore_cuda.provider import CUDAExecutionProvider

    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    config = _config(None, cuda_plugin)
    for share in ("auto", "1"):
        p = P({"trt_cuda_tensors": share, "device_id": "0"}, config)
        assert isinstance(p.cuda, CUDAExecutionProvider)  # made by the host, not imported
        assert p.device == p.cuda.device == ep_sdk.Device("cuda", 0)
        assert p.cuda.config is config
        assert type(p.allocator()).__module__.startswith("ortcore_cuda")
        p.close()
    assert P({"trt_cuda_tensors": "0"}, config).device.is_host


def test_cuda_tensors_without_a_cuda_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    config = _config(None)  # a host whose plugin table has no provider of cuda devices
    assert P({}, config).device.is_host
    with pytest.raises(ortcore.ProviderOptionError, match="ortcore-cuda is not installed"):
        P({"trt_cuda_tensors": "1"}, config)


def test_cuda_tensors_when_the_cuda_provider_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ortcore_cuda")
    monkeypatch.delenv("ORTCORE_CUDA_EMULATE", raising=False)
    import ortcore_cuda.plugin
    from ortcore_cuda.provider import CUDAExecutionProvider

    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    why = CUDAExecutionProvider.unavailable_reason()
    if why is None:
        pytest.skip("the CUDA provider can run here")
    config = _config(None, ortcore_cuda.plugin)
    assert P({}, config).device.is_host
    with pytest.raises(ortcore.ProviderOptionError, match="CUDA provider cannot run: ") as info:
        P({"trt_cuda_tensors": "1"}, config)
    assert why in str(info.value)


def test_engine_cache_folders_come_from_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    monkeypatch.setenv("ORTCORE_CACHE_DIR", str(tmp_path / "default"))
    session = _config(tmp_path / "session")
    off = {"trt_cuda_tensors": "0"}
    assert P(off, session).cache_dir == str(tmp_path / "session")
    assert P(off, _config(None)).cache_dir == ""  # the session caches nothing
    on = {**off, "trt_engine_cache_enable": "1"}
    assert P(on, session).cache_dir == str(tmp_path / "default")
    there = {**on, "trt_engine_cache_path": str(tmp_path / "eng")}
    assert P(there, session).cache_dir == str(tmp_path / "eng")
    assert P(there, ep_sdk.SessionConfig()).cache_dir == ""  # no host: nothing to keep them in


def test_engine_keys_are_those_made_before_the_store(tmp_path: Path) -> None:
    """Entries written through the store the host lends have the keys the
    provider gave them when it used ortcore's cache directly: an engine's is
    SHA-256 of the group's content digest then its parts; a timing cache's,
    of its parts alone."""
    import hashlib
    import json
    import types

    from ortcore.cache import CompiledCache, content_digest

    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P
    from ortcore_tensorrt.provider import _Store

    groups: list[Any] = []

    class Grab(ep_sdk.ExecutionProvider):
        name = "GrabExecutionProvider"
        aliases = ("grab",)

        def get_capability(self, graph: Any) -> Any:
            return ep_sdk.Capability(claims=[ep_sdk.Claim.group(list(graph.nodes))])

        def compile(self, group: Any) -> Any:
            groups.append(group)
            return lambda x: [x]

    from ortcore.plugins import PluginManager

    pm = PluginManager(autoload=False)
    mod = types.ModuleType("grab")
    mod.ortcore_providers = ep_sdk.hookimpl(lambda: [Grab])  # type: ignore[attr-defined]
    pm.register_plugin(mod, name="grab")
    ortcore.InferenceSession(mlp(), providers=["grab"], plugin_manager=pm)
    (group,) = groups
    p = P({"trt_cuda_tensors": "0"}, _config(tmp_path))
    store = _Store(p, p.store, group)
    store.save("engine", {"profile": "x:1x16/1x16/1x16"}, b"plan")
    store.save("timing cache", {}, b"timing")
    base = CompiledCache.key_parts(p, group)
    engine = {**base, "kind": "engine", "profile": "x:1x16/1x16/1x16"}
    timing = {
        k: v
        for k, v in {**base, "kind": "timing cache"}.items()
        if k in ("provider", "version", "provider_parts", "kind")
    }
    h = hashlib.sha256(content_digest(group).encode())
    h.update(json.dumps(engine, sort_keys=True).encode())
    want = {h.hexdigest(), hashlib.sha256(json.dumps(timing, sort_keys=True).encode()).hexdigest()}
    entries = CompiledCache(tmp_path).scan("TensorrtExecutionProvider").entries
    assert {e["key"] for e in entries} == want
    assert store.load("engine", {"profile": "x:1x16/1x16/1x16"}) == b"plan"
    assert store.load("engine", {"profile": "x:2x16/2x16/2x16"}) is None
    assert store.load("timing cache", {}) == b"timing"


class _Enum:
    def __init__(self, *names: str) -> None:
        for n in names:
            setattr(self, n, type(n, (), {"name": n})())


class _StubTensorRT:
    """The little of a TensorRT module the fake runtime and ``Runner`` read
    (enums and a logger), for running a fake plan without TensorRT."""

    __name__ = "tensorrt"
    __version__ = "0.stub"
    TensorIOMode = _Enum("INPUT", "OUTPUT")
    TensorLocation = _Enum("HOST", "DEVICE")
    DataType = _Enum("FLOAT", "HALF", "INT32", "INT64", "BOOL", "INT8", "UINT8")

    class Logger:
        ERROR = 0

        def __init__(self, level: int) -> None:
            pass


def test_an_engine_reads_and_writes_the_lent_providers_tensors(cuda_plugin: Any) -> None:
    """The runtime path with the CUDA provider the host lends (on its
    emulation) and the stand-in runtime: inputs read where they are, outputs
    written into the peer's tensors, nothing staged through the host."""
    import fake_trt
    import ortcore_cuda.tensor

    from ortcore_tensorrt._engine import Profile, Runner

    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"], name="relu")],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    config = _config(None, cuda_plugin)
    assert config.host is not None
    peer = config.host.device_peer(ep_sdk.Device("cuda", 0))
    memory = fake_trt.FakeMemory()
    module = fake_trt.FakeModule(_StubTensorRT(), memory)
    plan = fake_trt.fake_plan(model.SerializeToString(), Profile())
    runner = Runner(module, plan, memory, [("y", np.dtype(np.float32))], device=peer)
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    (y,) = runner.run({"x": peer.from_host(x)})
    assert isinstance(y, ortcore_cuda.tensor.CudaTensor)
    np.testing.assert_array_equal(peer.to_host(y), np.maximum(x, 0))
    assert memory.to_device_copies == memory.to_host_copies == 0
    runner.close()
    peer.close()
