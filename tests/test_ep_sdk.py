"""ep_sdk: fusable groups, group export, registry overlays, memory protocols, testing kit."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

import ep_sdk
import ortcore
from ep_sdk import testing
from ortcore.model import load_model

from . import providers as test_providers
from .conftest import fvi, make_model


def context(model: bytes) -> ep_sdk.GraphContext:
    m = load_model(model)
    return ep_sdk.GraphContext(m.graph, list(m.graph), dict(m.opset_imports))


def node(op: str, ins: list[str], out: str) -> onnx.NodeProto:
    return helper.make_node(op, ins, [out], name=out)


def fusable(n: Any) -> bool:
    return n.op_type != "Abs"


def names(claims: list[ep_sdk.Claim]) -> list[list[str]]:
    return [[n.name for n in c.nodes] for c in claims]


def run_grouped(model: bytes, x: np.ndarray) -> tuple[Any, list[Any]]:
    test_providers.ClaimingProvider.claims_for = lambda g: ep_sdk.group_nodes(g, fusable)
    sess = ortcore.InferenceSession(model, providers=["claiming", "mini"])
    return sess, sess.run(None, {"x": x})


def test_group_nodes_merges_a_chain() -> None:
    model = make_model(
        [node("Relu", ["x"], "a"), node("Neg", ["a"], "b"), node("Add", ["b", "x"], "y")],
        [fvi("x", (2,))],
        [fvi("y", (2,))],
    )
    assert names(ep_sdk.group_nodes(context(model), fusable)) == [["a", "b", "y"]]
    assert ep_sdk.group_nodes(context(model), fusable, min_size=4) == []


def test_group_nodes_never_fuses_around_a_foreign_node() -> None:
    # a -> Abs -> y and a -> y: fusing a with y would put Abs in a cycle.
    model = make_model(
        [node("Relu", ["x"], "a"), node("Abs", ["a"], "n"), node("Add", ["a", "n"], "y")],
        [fvi("x", (2,))],
        [fvi("y", (2,))],
    )
    assert names(ep_sdk.group_nodes(context(model), fusable)) == [["a"], ["y"]]
    x = np.array([-1.0, 2.0], np.float32)
    _, (y,) = run_grouped(model, x)
    np.testing.assert_allclose(y, np.maximum(x, 0) * 2)


def test_group_nodes_keeps_groups_jointly_acyclic() -> None:
    # Group {b2, b1} reads a1 through Abs n1; a2 reads b2 through Abs n2.
    # {a1, a2} alone has no cycle, but with {b2, b1} contracted it would.
    model = make_model(
        [
            node("Relu", ["x"], "a1"),
            node("Neg", ["x"], "b2"),
            node("Abs", ["a1"], "n1"),
            node("Add", ["n1", "b2"], "b1"),
            node("Abs", ["b2"], "n2"),
            node("Add", ["a1", "n2"], "a2"),
            node("Add", ["a2", "b1"], "y"),
        ],
        [fvi("x", (2,))],
        [fvi("y", (2,))],
    )
    groups = ep_sdk.group_nodes(context(model), fusable)
    assert names(groups) == [["a1"], ["b2", "b1"], ["a2", "y"]]
    assert all(c.fused for c in groups)
    x = np.array([-1.0, 2.0], np.float32)
    _, (y,) = run_grouped(model, x)
    a1 = np.maximum(x, 0)
    np.testing.assert_allclose(y, (a1 + np.abs(-x)) + (np.abs(a1) - x))
    assert len(test_providers.ClaimingProvider.compiled) == len(groups)


def test_group_io_and_model_export() -> None:
    model = make_model(
        [node("Relu", ["x"], "a"), node("Neg", ["a"], "b"), node("Abs", ["b"], "y")],
        [fvi("x", (2,))],
        [fvi("y", (2,))],
    )
    g = context(model)
    (claim,) = ep_sdk.group_nodes(g, fusable)
    nodes, inputs, outputs = ep_sdk.group_io(g.graph, claim.nodes)
    assert [v.name for v in inputs] == ["x"] and [v.name for v in outputs] == ["b"]
    exported = ep_sdk.group_model("grp", nodes, inputs, outputs, g.opsets)
    onnx.checker.check_model(exported)
    x = np.array([-1.0, 2.0], np.float32)
    (b,) = testing.reference_outputs(exported, {"x": x})
    np.testing.assert_allclose(b, -np.maximum(x, 0))


def test_with_kernels_copies_and_add_kernels_is_per_instance() -> None:
    base = test_providers.MiniProvider(None).kernel_registry()
    extra = ep_sdk.KernelDef("Twice", "my.ops", 1, None, lambda info: lambda x: (2 * x,))
    merged = base.with_kernels([extra])
    assert isinstance(merged.lookup("Twice", "my.ops", 1), ep_sdk.KernelDef)
    assert isinstance(base.lookup("Twice", "my.ops", 1), ep_sdk.KernelMiss)
    a, b = test_providers.MiniProvider(None), test_providers.MiniProvider(None)
    a.add_kernels([extra])
    assert a.registry() is not None and ("my.ops", "Twice") in a.registry().ops()
    assert b.registry() is base
    clash = ep_sdk.KernelDef("Relu", "", 6, None, lambda info: lambda x: (x,))
    with pytest.raises(ValueError, match="overlaps"):
        a.add_kernels([clash])


def test_memory_protocols_and_allocation() -> None:
    provider = test_providers.MiniProvider(None)
    assert isinstance(provider, ep_sdk.DataTransfer)
    assert isinstance(provider.allocator(), ep_sdk.Allocator)
    assert isinstance(np.zeros(2), ep_sdk.DeviceTensor)
    with pytest.raises(NotImplementedError, match="allocator"):
        test_providers.FakeDeviceProvider(None).allocator()
    m = load_model(make_model([node("Relu", ["x"], "y")], [fvi("x", (2, 3))], [fvi("y", (2, 3))]))
    (relu,) = list(m.graph)
    info = ortcore.nodeinfo.make_node_info(relu, {"": 17}, provider)
    out = info.allocate(0, (2, 3))
    assert out.shape == (2, 3) and out.dtype == np.float32
    assert info.output_dtype(0) == np.float32


def test_run_context_config() -> None:
    ro = ortcore.RunOptions()
    ro.add_run_config_entry("my.key", "on")
    ctx = ep_sdk.RunContext(ro)
    assert ctx.config("my.key") == "on" and ctx.config("other", "off") == "off"
    assert ep_sdk.RunContext().config("my.key") == ""


def test_testing_check_node_with_a_provider_class() -> None:
    x = np.array([[-1.0, 2.0]], np.float32)
    (y,) = testing.check_node(test_providers.MiniProvider, "Relu", [x], opset=14)
    np.testing.assert_allclose(y, [[0.0, 2.0]])
    with pytest.raises(ortcore.NotImplementedOp):
        testing.check_node(test_providers.MiniProvider, "Abs", [x], opset=14)


def test_testing_check_model_counts_provider_nodes(cpu: str) -> None:
    model = onnx.load_from_string(
        make_model(
            [node("Relu", ["x"], "a"), node("Abs", ["a"], "y")],
            [fvi("x", (2,))],
            [fvi("y", (2,))],
        )
    )
    x = np.array([-1.0, 2.0], np.float32)
    testing.check_model("mini", model, {"x": x})
    with pytest.raises(AssertionError, match="expected at least 2"):
        testing.check_model("mini", model, {"x": x}, min_nodes=2)


def test_assert_close_reports_dtype() -> None:
    with pytest.raises(AssertionError, match="dtype"):
        testing.assert_close([np.zeros(2, np.float64)], [np.zeros(2, np.float32)])
