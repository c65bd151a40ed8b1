"""The CUDA provider's devices (onnxruntime's device model): the emulated device,
what a GPU policy picks with it, and nothing where the provider cannot run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper
from ortcore.ep_devices import get_ep_devices


@pytest.fixture(autouse=True)
def fresh_device_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Devices are listed once per provider class; these tests change the environment."""
    monkeypatch.setattr("ortcore.ep_devices._cache", {})
    yield


def _model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _cuda(pm: Any) -> Any:
    return [d for d in get_ep_devices(pm) if d.ep_name == "CUDAExecutionProvider"]


def test_emulated_device_is_an_nvidia_gpu(emulated: Any) -> None:
    (d,) = _cuda(emulated)
    assert d.device.type == ortcore.OrtHardwareDeviceType.GPU
    assert (d.device.vendor, d.device.vendor_id) == ("NVIDIA", 0x10DE)
    assert d.device.metadata["Emulated"] == "1" and d.ep_options == {"device_id": "0"}
    info = d.memory_info(ortcore.OrtDeviceMemoryType.DEFAULT)
    assert info is not None and info.name == "Cuda"


def test_gpu_policy_picks_the_cuda_provider_then_cpu(emulated: Any) -> None:
    so = ortcore.SessionOptions()
    so.set_provider_selection_policy(ortcore.OrtExecutionProviderDevicePolicy.PREFER_GPU)
    sess = ortcore.InferenceSession(_model(), so, plugin_manager=emulated)
    assert sess.get_providers() == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -np.maximum(x, 0))
    assert {r.provider for r in sess.get_partition().nodes} == {"CUDAExecutionProvider"}


def test_add_provider_for_the_device_sets_device_id(emulated: Any) -> None:
    so = ortcore.SessionOptions()
    so.add_provider_for_devices(_cuda(emulated), {"gpu_mem_limit": "1048576"})
    sess = ortcore.InferenceSession(_model(), so, plugin_manager=emulated)
    options = sess.get_provider_options()["CUDAExecutionProvider"]
    assert (options["device_id"], options["gpu_mem_limit"]) == ("0", "1048576")


def test_no_devices_where_the_provider_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORTCORE_CUDA_EMULATE", raising=False)
    from ortcore_cuda.provider import CUDAExecutionProvider

    if CUDAExecutionProvider.unavailable_reason() is None:
        pytest.skip("a usable GPU is here: its devices are listed")
    assert CUDAExecutionProvider.ep_devices() == []
