"""Custom operators: schema with onnx, shape functions, per-session kernels, plugin hook."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ep_sdk
import ortcore
from ortcore.custom_ops import register_schemas

from . import providers as test_providers
from .conftest import fvi, manager_with

DOMAIN = "test.custom"


def scale_op(name: str = "Scale", **kw: Any) -> ortcore.CustomOp:
    """``Y = X * alpha`` with a kernel for the mini provider."""
    op = ortcore.custom_op(
        domain=DOMAIN,
        name=name,
        inputs=["X: T"],
        outputs=["Y: T"],
        attributes={"alpha": 2.0},
        types={"T": ["float", "double"]},
        **kw,
    )

    @op.kernel("mini")
    def build(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
        alpha = info.attrs["alpha"]
        return lambda x: (x * np.asarray(alpha, dtype=x.dtype),)

    return op


def scale_model(
    name: str = "Scale", shape: Any = (2, 3), out_shape: Any = None, **attrs: Any
) -> bytes:
    node = helper.make_node(name, ["x"], ["s"], domain=DOMAIN, name="scale", **attrs)
    relu = helper.make_node("Relu", ["s"], ["y"], name="relu")
    graph = helper.make_graph([node, relu], "g", [fvi("x", shape)], [fvi("y", out_shape)])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
        ir_version=8,
    )
    return model.SerializeToString()


def options(*ops: ortcore.CustomOp) -> ortcore.SessionOptions:
    so = ortcore.SessionOptions()
    so.register_custom_ops(*ops)
    return so


def test_session_runs_custom_op_with_defaults_and_infers_types() -> None:
    op = scale_op()
    sess = ortcore.InferenceSession(scale_model(), options(op), providers=["mini"])
    x = np.array([[-1, 2, 3], [4, -5, 6]], dtype=np.float32)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, np.maximum(x * 2, 0))
    assert sess.get_outputs()[0].type == "tensor(float)"
    assert {r.node: r.provider for r in sess.get_partition().nodes}["scale"] == (
        "MiniExecutionProvider"
    )
    sess = ortcore.InferenceSession(scale_model(alpha=3.0), options(op), providers=["mini"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], np.maximum(x * 3, 0))


def test_schema_is_known_to_onnx_checker_and_shape_inference() -> None:
    op = scale_op("ScaleShaped")

    @op.shape_function
    def infer(inputs: list[ortcore.TensorType], attrs: dict[str, Any]) -> list[Any]:
        (x,) = inputs
        assert attrs["alpha"] == 2.0
        return [ortcore.TensorType(x.dtype, x.shape)]

    register_schemas([op])
    model = onnx.load_from_string(scale_model("ScaleShaped", out_shape=("n", "m")))
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    (s,) = [v for v in inferred.graph.value_info if v.name == "s"]
    assert s.type.tensor_type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in s.type.tensor_type.shape.dim] == [2, 3]
    sess = ortcore.InferenceSession(scale_model("ScaleShaped"), options(op), providers=["mini"])
    assert sess.get_outputs()[0].shape == [2, 3]


def test_decorator_form_sets_shape_function() -> None:
    @ortcore.custom_op(domain=DOMAIN, name="Flatten2", inputs=["X"], outputs=["Y"])
    def flatten2(inputs: list[ortcore.TensorType], attrs: dict[str, Any]) -> list[Any]:
        shape = inputs[0].shape
        n = int(np.prod(shape)) if shape and all(isinstance(d, int) for d in shape) else None
        return [ortcore.TensorType(inputs[0].dtype, (n,))]

    @flatten2.kernel("MiniExecutionProvider")
    def build(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
        return lambda x: (x.reshape(-1),)

    assert isinstance(flatten2, ortcore.CustomOp)
    sess = ortcore.InferenceSession(scale_model("Flatten2"), options(flatten2), providers=["mini"])
    assert sess.get_outputs()[0].shape == [6]
    (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32)})
    assert y.shape == (6,)


def test_shape_function_error_names_the_op() -> None:
    def broken(inputs: Any, attrs: Any) -> Any:
        raise RuntimeError("no idea")

    op = scale_op("ScaleBroken", shape=broken)
    with pytest.raises(ortcore.InvalidGraph, match=rf"{DOMAIN}::ScaleBroken.*no idea"):
        ortcore.InferenceSession(scale_model("ScaleBroken"), options(op), providers=["mini"])


def test_required_attribute_is_checked() -> None:
    op = ortcore.custom_op(
        domain=DOMAIN, name="NeedsK", inputs=["X"], outputs=["Y"], attributes={"k": int}
    )
    with pytest.raises(ortcore.InvalidGraph, match="k"):
        ortcore.InferenceSession(scale_model("NeedsK"), options(op), providers=["mini"])


def test_unregistered_custom_op_says_how_to_register() -> None:
    with pytest.raises(ortcore.NotImplementedOp) as err:
        ortcore.InferenceSession(scale_model("NeverDefined"), providers=["mini"])
    text = str(err.value)
    assert f"{DOMAIN}::NeverDefined" in text
    assert "ortcore.custom_op" in text and "register_custom_ops" in text


def test_registered_op_without_kernel_for_session_providers() -> None:
    op = ortcore.custom_op(domain=DOMAIN, name="OnlyFake", inputs=["X"], outputs=["Y"])
    op.kernel("FakeDeviceExecutionProvider")(lambda info: lambda x: (x,))
    with pytest.raises(ortcore.NotImplementedOp, match="no provider of this session has a kernel"):
        ortcore.InferenceSession(scale_model("OnlyFake"), options(op), providers=["mini"])


def test_kernels_are_per_session_and_never_mutate_the_provider_registry() -> None:
    op = scale_op("ScalePerSession")
    ortcore.InferenceSession(scale_model("ScalePerSession"), options(op), providers=["mini"])
    shared = test_providers.MiniProvider(None).kernel_registry()
    assert isinstance(shared.lookup("ScalePerSession", DOMAIN, 1), ep_sdk.KernelMiss)
    # The schema stays registered with onnx, but another session has no kernel.
    with pytest.raises(ortcore.NotImplementedOp, match="no provider of this session has a kernel"):
        ortcore.InferenceSession(scale_model("ScalePerSession"), providers=["mini"])


def test_set_providers_keeps_custom_kernels() -> None:
    op = scale_op("ScaleReset")
    sess = ortcore.InferenceSession(scale_model("ScaleReset"), options(op), providers=["mini"])
    sess.set_providers(["mini"])
    (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(y, 2.0)


def test_plugin_hook_offers_ops_to_every_session() -> None:
    op = scale_op("ScalePlugin")
    plugin = types.ModuleType("tests.custom_op_plugin")

    @ep_sdk.hookimpl
    def ortcore_custom_ops() -> list[ortcore.CustomOp]:
        return [op]

    plugin.ortcore_custom_ops = ortcore_custom_ops  # type: ignore[attr-defined]
    manager = manager_with(test_providers.MiniProvider)
    manager.register_plugin(plugin, name="tests.custom_op_plugin")
    assert manager.custom_ops() == [op]
    sess = ortcore.InferenceSession(
        scale_model("ScalePlugin"), providers=["mini"], plugin_manager=manager
    )
    (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(y, 2.0)


def test_plugin_hook_returning_garbage_is_listed_broken() -> None:
    plugin = types.ModuleType("tests.bad_ops")

    @ep_sdk.hookimpl
    def ortcore_custom_ops() -> list[Any]:
        return ["not an op"]

    plugin.ortcore_custom_ops = ortcore_custom_ops  # type: ignore[attr-defined]
    manager = manager_with(test_providers.MiniProvider)
    manager.register_plugin(plugin, name="tests.bad_ops")
    broken = [e for e in manager.entries() if not e.available]
    assert any("non-CustomOp" in e.reason for e in broken)


def test_model_local_function_runs_without_kernel() -> None:
    fn = helper.make_function(
        DOMAIN,
        "AddRelu",
        ["a", "b"],
        ["c"],
        [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Relu", ["t"], ["c"])],
        opset_imports=[helper.make_opsetid("", 17)],
    )
    node = helper.make_node("AddRelu", ["x", "x"], ["y"], domain=DOMAIN, name="fused")
    graph = helper.make_graph([node], "g", [fvi("x", (2,))], [fvi("y", (2,))])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
        functions=[fn],
        ir_version=8,
    )
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["mini"])
    (y,) = sess.run(None, {"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_allclose(y, [0.0, 4.0])
    assert {r.op_type for r in sess.get_partition().nodes} == {"Add", "Relu"}


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(ValueError, match="domain of your own"):
        ortcore.custom_op(domain="", name="X", inputs=["X"], outputs=["Y"])
    with pytest.raises(ValueError, match="unused type parameters"):
        ortcore.custom_op(domain=DOMAIN, name="X", inputs=["X"], outputs=["Y"], types={"U": []})
    so = ortcore.SessionOptions()
    so.register_custom_ops("not an op")
    with pytest.raises(ortcore.InvalidArgument, match="CustomOp"):
        ortcore.InferenceSession(scale_model(), so, providers=["mini"])


def test_custom_op_with_cpu_provider(cpu: str) -> None:
    op = ortcore.custom_op(
        domain=DOMAIN, name="ScaleCpu", inputs=["X: T"], outputs=["Y: T"], attributes={"alpha": 2.0}
    )
    op.kernel("cpu")(lambda info: lambda x: (x * np.float32(info.attrs["alpha"]),))
    so = options(op)
    sess = ortcore.InferenceSession(scale_model("ScaleCpu"), so, providers=[cpu])
    (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(y, 2.0)
    assert sess.get_partition().counts() == {cpu: 2}
