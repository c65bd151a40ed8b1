"""The OpenVINO provider's devices (onnxruntime's device model): OpenVINO's
``available_devices`` listed, selected for a session, and the assignment of
its fused groups."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper
from ortcore.ep_devices import get_ep_devices

CONFIG = "session.record_ep_graph_assignment_info"


def _model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Relu", ["x"], ["t"], name="relu"),
        helper.make_node("Neg", ["t"], ["u"], name="neg"),
        helper.make_node("Abs", ["u"], ["y"], name="abs"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _ov(manager: Any) -> list[Any]:
    return [d for d in get_ep_devices(manager) if d.ep_name == "OpenVINOExecutionProvider"]


def test_available_devices_are_listed(manager: Any, ov: Any) -> None:
    core = ov.Core()
    listed = _ov(manager)
    assert [d.ep_options["device_type"] for d in listed] == [
        n for n in core.available_devices if n.split(".")[0] in ("CPU", "GPU", "NPU")
    ]
    for d in listed:
        name = d.ep_options["device_type"]
        kind = name.split(".")[0]
        assert d.device.type == ortcore.OrtHardwareDeviceType[kind]
        assert d.ep_metadata["full_device_name"] == core.get_property(name, "FULL_DEVICE_NAME")
        if kind == "CPU":  # the host CPU, as the CPU provider lists it
            cpu = next(e for e in get_ep_devices(manager) if e.ep_name == "CPUExecutionProvider")
            assert d.device.vendor_id == cpu.device.vendor_id
        else:
            assert (d.device.vendor, d.device.vendor_id) == ("Intel", 0x8086)


def test_selected_device_configures_the_provider(manager: Any, ov: Any) -> None:
    device = _ov(manager)[0]
    so = ortcore.SessionOptions()
    so.add_provider_for_devices([device], {"precision": "f32"})
    so.add_session_config_entry(CONFIG, "1")
    sess = ortcore.InferenceSession(_model(), so, plugin_manager=manager)
    assert sess.get_providers() == ["OpenVINOExecutionProvider", "CPUExecutionProvider"]
    options = sess.get_provider_options()["OpenVINOExecutionProvider"]
    assert options["device_type"] == device.ep_options["device_type"]
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], np.maximum(x, 0))
    # one fused group: one subgraph with the group's three nodes
    (sub,) = sess.get_provider_graph_assignment_info()
    assert sub.ep_name == "OpenVINOExecutionProvider"
    assert sorted(n.name for n in sub.get_nodes()) == ["abs", "neg", "relu"]


def test_default_policy_takes_openvinos_cpu_device_first(manager: Any, ov: Any) -> None:
    """onnxruntime's DEFAULT policy: the first CPU device, its own CPU provider last."""
    if "CPU" not in ov.Core().available_devices:
        pytest.skip("OpenVINO lists no CPU device here")
    so = ortcore.SessionOptions()
    so.set_provider_selection_policy(ortcore.OrtExecutionProviderDevicePolicy.DEFAULT)
    sess = ortcore.InferenceSession(_model(), so, plugin_manager=manager)
    assert sess.get_providers() == ["OpenVINOExecutionProvider", "CPUExecutionProvider"]


def test_no_providers_named_runs_on_cpu_only(manager: Any, ov: Any) -> None:
    sess = ortcore.InferenceSession(_model(), plugin_manager=manager)
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_device_and_device_type_must_agree(ov: Any) -> None:
    from ortcore_openvino.provider import OpenVINOExecutionProvider as P

    assert P({"device_type": "cpu"}).ov_device == "CPU"
    with pytest.raises(ortcore.ProviderOptionError, match="device_type"):
        P({"device": "CPU", "device_type": "GPU"})
