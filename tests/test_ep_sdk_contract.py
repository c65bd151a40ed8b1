"""ep_sdk holds the whole provider contract: where its names live, NodeInfo
construction, the schema-cache reset, and the kernel kit of ``ep_sdk.testing``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import ep_sdk
import ortcore.fused_ops
from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo
from ep_sdk.testing import KernelKit, reference_outputs
from ortcore.model import load_model

from . import providers as test_providers
from .conftest import fvi, make_model


def test_device_and_session_config_sit_below_the_provider() -> None:
    assert ep_sdk.Device is ep_sdk.device.Device
    assert ep_sdk.HOST_DEVICE == ep_sdk.device.HOST_DEVICE == ep_sdk.Device("cpu", 0)
    assert ep_sdk.SessionConfig is ep_sdk.kernel.SessionConfig
    # Their old import path (deprecated in 1.1, gone in 2.0) still gives the same objects.
    with pytest.warns(DeprecationWarning, match=r"ep_sdk\.provider\.Device .* 2\.0"):
        assert ep_sdk.provider.Device is ep_sdk.Device
    assert isinstance(test_providers.MiniProvider(None), ep_sdk.ProviderView)


def test_fused_ops_are_part_of_ep_sdk() -> None:
    assert ortcore.fused_ops.DOMAIN is ep_sdk.fused_ops.DOMAIN == "com.ortcore"
    assert ortcore.fused_ops.register_fused_schemas is ep_sdk.register_fused_schemas
    assert "Relu" in ep_sdk.fused_ops.ACTIVATIONS
    ep_sdk.register_fused_schemas()
    defaults = ep_sdk.attribute_defaults("FusedConv", ep_sdk.fused_ops.DOMAIN, 1)
    assert defaults["group"] == 1 and defaults["activation"] == ""


def test_reset_schema_cache_makes_a_schema_registered_later_visible() -> None:
    domain, op = "test.reset_schema_cache", "Scale"
    assert ep_sdk.attribute_defaults(op, domain, 1) == {}  # "no schema", now cached
    T = onnx.defs.OpSchema.FormalParameter
    schema = onnx.defs.OpSchema(
        op, domain, 1, inputs=[T("X", "T")], outputs=[T("Y", "T")],
        type_constraints=[("T", ["tensor(float)"], "")],
        attributes=[onnx.defs.OpSchema.Attribute("alpha", helper.make_attribute("alpha", 2.0), "")],
    )  # fmt: skip
    onnx.defs.register_schema(schema)
    try:
        assert ep_sdk.attribute_defaults(op, domain, 1) == {}  # the stale answer
        ep_sdk.reset_schema_cache()
        assert ep_sdk.attribute_defaults(op, domain, 1) == {"alpha": 2.0}
    finally:
        onnx.defs.deregister_schema(op, 1, domain)
        ep_sdk.reset_schema_cache()
    assert ep_sdk.attribute_defaults(op, domain, 1) == {}


def _if_model(opset: int = 17) -> onnx.ModelProto:
    """y = If(c) then Neg(r) else Relu(r), r = Relu(x): the branches read r."""
    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["t"])], "then", [],
                               [fvi("t", (2, 3))])  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Relu", ["r"], ["e"])], "else", [],
                               [fvi("e", (2, 3))])  # fmt: skip
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    graph = helper.make_graph(
        nodes, "g", [fvi("c", (), TensorProto.BOOL), fvi("x", (2, 3))], [fvi("y", None)]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_make_node_info_converts_attributes_and_fills_types_and_shapes() -> None:
    model = load_model(
        make_model(
            [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Shape", ["t"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["y"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [7.0]))],
            [fvi("x", (2, 3))], [fvi("y", (3, 2))],
        )
    )  # fmt: skip
    transpose, _, const = list(model.graph)
    info = ep_sdk.make_node_info(transpose, {"": 17})
    assert info.attrs["perm"] == [1, 0] and isinstance(info.attrs["perm"], list)
    assert info.input_types == (ir.DataType.FLOAT,) and info.input_shapes == ((2, 3),)
    assert info.output_types == (ir.DataType.FLOAT,) and info.output_shapes == ((3, 2),)
    assert info.opset == 17 and info.provider is None
    value = ep_sdk.make_node_info(const, {"": 17}).attrs["value"]
    assert isinstance(value, np.ndarray) and value.tolist() == [7.0]


def test_make_node_info_hands_graph_attributes_to_the_subgraph_factory() -> None:
    model = load_model(_if_model().SerializeToString())
    if_node = list(model.graph)[1]
    implicit = ep_sdk.nodeinfo.implicit_inputs(if_node)
    assert [v.name for v in implicit] == ["r"]
    raw = ep_sdk.make_node_info(if_node, {"": 17})
    assert isinstance(raw.attrs["then_branch"], ir.Graph)
    made: list[str] = []

    def factory(g: ir.Graph) -> Any:
        made.append(g.name or "")
        return f"runner of {g.name}"

    provider = test_providers.MiniProvider(None)
    info = ep_sdk.make_node_info(if_node, {"": 17}, provider, subgraph=factory, implicit=implicit)
    assert sorted(made) == ["else", "then"]
    assert info.attrs["then_branch"] == "runner of then"
    assert info.implicit_inputs == ("r",) and info.provider is provider


class SpyProvider(ExecutionProvider):
    """Keeps the NodeInfo each kernel is built from."""

    name = "SpyExecutionProvider"
    seen: ClassVar[list[NodeInfo]] = []

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()

        @reg.kernel("Relu", since=6)
        def relu(info: NodeInfo) -> Any:
            SpyProvider.seen.append(info)
            return lambda x: (np.maximum(x, 0).astype(x.dtype),)

        return reg


def test_kernel_kit_builds_the_node_info_the_core_builds() -> None:
    kit = KernelKit(SpyProvider, threads=3, opset=14)
    x = np.array([[-1.0, 2.0, 0.5]], np.float32)
    (y,) = kit.check_node("Relu", [x])
    np.testing.assert_array_equal(y, [[0.0, 2.0, 0.5]])
    info = SpyProvider.seen[-1]
    assert info.opset == 14
    assert info.output_types == (ir.DataType.FLOAT,) and info.output_shapes == ((1, 3),)
    assert info.provider is kit.provider() and info.provider.config.intra_op_num_threads == 3
    assert kit.provider(1).config.intra_op_num_threads == 1 and kit.provider(1) is kit.provider(1)


def test_kernel_kit_checks_against_the_oracle_or_expected_values() -> None:
    kit = KernelKit(test_providers.MiniProvider, opset=14)
    x = np.array([-1.0, 2.0], np.float32)
    kit.check_node("Neg", [x], expected=[-x])
    kit.check_node("Add", [x, x], oracle=lambda model, feeds: [feeds["x0"] * 2])
    with pytest.raises(AssertionError):
        kit.check_node("Neg", [x], expected=[x])
    with pytest.raises(ValueError, match="unknown oracle"):
        kit.check_node("Neg", [x], oracle="nonsense")
    with pytest.raises(LookupError, match="Abs"):
        kit.run_node("Abs", [x])


def test_kernel_kit_runs_control_flow_with_the_providers_own_kernels() -> None:
    kit = KernelKit(test_providers.MiniProvider)
    model = _if_model()
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": x}
        got = kit.run_model(model, feeds)
        np.testing.assert_array_equal(got[0], reference_outputs(model, feeds)[0])
    with pytest.raises(KeyError, match="'x'"):
        kit.run_model(model, {"c": np.array(True)})


def test_kernel_kit_moves_values_to_a_providers_device_and_back() -> None:
    kit = KernelKit(test_providers.FakeDeviceProvider)
    fake = test_providers.FakeDeviceProvider
    before = (fake.copies_from_host, fake.copies_to_host)
    a = np.array([1.0, -2.0], np.float32)
    (y,) = kit.run_node("Add", [a, a], opset=14)
    assert isinstance(y, np.ndarray) and y.tolist() == [2.0, -4.0]
    assert (fake.copies_from_host, fake.copies_to_host) == (before[0] + 2, before[1] + 1)
