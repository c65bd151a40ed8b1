"""Capability negotiation: priority order, fallback, reasons, claim validation, fusion."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ortcore
from ep_sdk import Capability, Claim, ExecutionProvider, GraphContext
from ortcore.model import load_model

from .conftest import chain_model, chain_reference, fvi, make_model, manager_with, no_fallback
from .providers import ClaimingProvider, MiniProvider

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


def _where(sess: ortcore.InferenceSession) -> dict[str, str]:
    return {r.node: r.provider for r in sess.get_partition().nodes}


def _claim(fn: Any) -> None:
    ClaimingProvider.claims_for = staticmethod(fn)


def _by_op(graph: GraphContext, *ops: str) -> list[Any]:
    found = {n.op_type: n for n in graph.graph}
    return [found[op] for op in ops]


# -- priority and fallback ----------------------------------------------------------------


def test_first_provider_takes_what_it_can() -> None:
    ops = ["Add", "Neg", "Relu", "Mul"]
    sess = ortcore.InferenceSession(chain_model(ops), no_fallback(), providers=["fake", "mini"])
    assert _where(sess) == {
        "n0_Add": "FakeDeviceExecutionProvider",
        "n1_Neg": "MiniExecutionProvider",
        "n2_Relu": "FakeDeviceExecutionProvider",
        "n3_Mul": "FakeDeviceExecutionProvider",
    }
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], chain_reference(ops, X))


def test_order_of_providers_decides() -> None:
    ops = ["Add", "Neg", "Relu"]
    sess = ortcore.InferenceSession(chain_model(ops), no_fallback(), providers=["mini", "fake"])
    assert set(_where(sess).values()) == {"MiniExecutionProvider"}
    assert sess.get_providers() == ["MiniExecutionProvider", "FakeDeviceExecutionProvider"]


def test_providers_asked_in_priority_order_with_free_nodes_only() -> None:
    asked: list[tuple[str, list[str]]] = []
    fallbacks: list[tuple[str, ...]] = []

    class Recorder(ExecutionProvider):
        def get_capability(self, graph: GraphContext) -> Capability:
            asked.append((self.name, [n.op_type for n in graph.nodes]))
            fallbacks.append(graph.fallback)
            take = [n for n in graph.nodes if n.op_type in self.takes]
            return Capability(
                claims=[Claim.node(n) for n in take],
                declined={n: f"{self.name} skips it" for n in graph.nodes if n not in take},
            )

        def kernel_registry(self):
            return MiniProvider().kernel_registry()

    class First(Recorder):
        name = "FirstExecutionProvider"
        takes = ("Neg",)

    class Second(Recorder):
        name = "SecondExecutionProvider"
        takes = ("Add", "Relu")

    class Third(Recorder):
        name = "ThirdExecutionProvider"
        takes = ("Add", "Relu", "Neg", "Mul")

    pm = manager_with(Third, First, Second)
    ops = ["Add", "Neg", "Relu", "Mul"]
    sess = ortcore.InferenceSession(
        chain_model(ops),
        providers=["FirstExecutionProvider", "SecondExecutionProvider", "ThirdExecutionProvider"],
        plugin_manager=pm,
    )
    assert asked == [
        ("FirstExecutionProvider", ["Add", "Neg", "Relu", "Mul"]),
        ("SecondExecutionProvider", ["Add", "Relu", "Mul"]),
        ("ThirdExecutionProvider", ["Mul"]),
    ]
    # each is told who is offered what it leaves: the providers after it
    assert fallbacks == [
        ("SecondExecutionProvider", "ThirdExecutionProvider"),
        ("ThirdExecutionProvider",),
        (),
    ]
    records = {r.node: r for r in sess.get_partition().nodes}
    assert records["n3_Mul"].provider == "ThirdExecutionProvider"
    assert records["n3_Mul"].declined == {
        "FirstExecutionProvider": "FirstExecutionProvider skips it",
        "SecondExecutionProvider": "SecondExecutionProvider skips it",
    }
    assert records["n1_Neg"].declined == {}
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], chain_reference(ops, X))


def test_declined_node_falls_back_with_reason() -> None:
    sess = ortcore.InferenceSession(
        chain_model(["Add", "Neg"]), no_fallback(), providers=["fake", "mini"]
    )
    rec = {r.node: r for r in sess.get_partition().nodes}
    assert rec["n1_Neg"].provider == "MiniExecutionProvider"
    reason = rec["n1_Neg"].declined["FakeDeviceExecutionProvider"]
    assert "Neg" in reason
    assert rec["n0_Add"].declined == {}


def test_cpu_fallback_takes_what_others_decline(cpu: str) -> None:
    nodes = [
        helper.make_node("Add", ["x", "x"], ["t"], name="add"),
        helper.make_node("Sigmoid", ["t"], ["y"], name="sig"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    sess = ortcore.InferenceSession(data, providers=["mini"])
    assert sess.get_providers() == ["MiniExecutionProvider", cpu]
    rec = {r.node: r for r in sess.get_partition().nodes}
    assert rec["add"].provider == "MiniExecutionProvider"
    assert rec["sig"].provider == cpu
    assert "Sigmoid" in rec["sig"].declined["MiniExecutionProvider"]
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-(X + X))), rtol=1e-6)


def test_no_fallback_missing_op_is_not_implemented() -> None:
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"], name="sig")]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], opset=17)
    with pytest.raises(ortcore.NotImplementedOp) as info:
        ortcore.InferenceSession(data, no_fallback(), providers=["mini"])
    msg = str(info.value)
    assert isinstance(info.value, NotImplementedError)
    for part in ("Sigmoid", "ai.onnx", "opset 17", "'sig'", "tensor(float)"):
        assert part in msg, (part, msg)
    assert "MiniExecutionProvider: no kernel for Sigmoid" in msg


def test_no_fallback_type_miss_names_input_types_and_reason() -> None:
    i32 = TensorProto.INT32
    nodes = [helper.make_node("Sub", ["a", "b"], ["y"], name="isub")]
    data = make_model(
        nodes, [fvi("a", [3], i32), fvi("b", [3], i32)], [fvi("y", [3], i32)], opset=14
    )
    with pytest.raises(ortcore.NotImplementedOp) as info:
        ortcore.InferenceSession(data, no_fallback(), providers=["mini"])
    msg = str(info.value)
    assert "Sub(ai.onnx, opset 14)" in msg
    assert "(tensor(int32), tensor(int32))" in msg
    assert "MiniExecutionProvider" in msg and "constraint 'T'" in msg


def test_fallback_disabled_does_not_add_cpu() -> None:
    sess = ortcore.InferenceSession(chain_model(["Neg"]), no_fallback(), providers=["mini"])
    assert sess.get_providers() == ["MiniExecutionProvider"]


def test_provider_listed_twice_is_refused() -> None:
    with pytest.raises(ortcore.InvalidArgument, match="twice"):
        ortcore.InferenceSession(chain_model(["Neg"]), providers=["mini", "MiniExecutionProvider"])


# -- invalid claims ------------------------------------------------------------------------


def _session_claiming(ops: list[str], providers: list[str] | None = None) -> Any:
    return ortcore.InferenceSession(
        chain_model(ops), no_fallback(), providers=providers or ["claiming", "mini"]
    )


def test_claim_of_foreign_node_is_ep_fail() -> None:
    other = load_model(chain_model(["Neg"]))
    foreign = next(iter(other.graph))
    _claim(lambda graph: [Claim.node(foreign)])
    with pytest.raises(ortcore.EPFail, match="ClaimingExecutionProvider") as info:
        _session_claiming(["Neg"])
    assert "not in graph" in str(info.value)


def test_node_claimed_twice_is_ep_fail() -> None:
    _claim(lambda graph: [Claim.node(graph.nodes[0]), Claim.node(graph.nodes[0])])
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*twice"):
        _session_claiming(["Neg", "Relu"])


def test_node_in_two_groups_is_ep_fail() -> None:
    _claim(lambda graph: [Claim.group(graph.nodes[:2]), Claim.group(graph.nodes[1:])])
    with pytest.raises(ortcore.EPFail, match="twice"):
        _session_claiming(["Neg", "Relu", "Neg"])


def test_empty_claim_is_ep_fail() -> None:
    _claim(lambda graph: [Claim(())])
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*empty"):
        _session_claiming(["Neg"])


def test_claim_of_node_taken_by_earlier_provider_is_ep_fail() -> None:
    _claim(lambda graph: [Claim.node(n) for n in graph.graph])  # every node, taken or not
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*already took"):
        _session_claiming(["Add", "Neg"], providers=["fake", "claiming"])


def test_fused_group_with_cycle_is_ep_fail() -> None:
    # A -> B -> C with B outside the group {A, C}.
    _claim(lambda graph: [Claim.group(_by_op(graph, "Add", "Mul"))])
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*cycle"):
        _session_claiming(["Add", "Neg", "Mul"])


def test_fused_group_skipping_side_branch_is_ep_fail() -> None:
    # A feeds C directly and through B: {A, C} contracted with B outside is a cycle.
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="A"),
        helper.make_node("Neg", ["a"], ["b"], name="B"),
        helper.make_node("Mul", ["a", "b"], ["y"], name="C"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    _claim(lambda graph: [Claim.group(_by_op(graph, "Add", "Mul"))])
    with pytest.raises(ortcore.EPFail, match="cycle"):
        ortcore.InferenceSession(data, no_fallback(), providers=["claiming", "mini"])


def test_get_capability_raising_is_ep_fail() -> None:
    def boom(graph: GraphContext) -> list[Claim]:
        raise RuntimeError("capability exploded")

    _claim(boom)
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*capability exploded"):
        _session_claiming(["Neg"])


def test_claimed_node_without_kernel_is_ep_fail() -> None:
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"], name="sig")]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    _claim(lambda graph: [Claim.node(n) for n in graph.nodes])
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*Sigmoid"):
        ortcore.InferenceSession(data, no_fallback(), providers=["claiming"])


# -- fused groups ---------------------------------------------------------------------------


def test_fused_group_compiled_once_and_correct() -> None:
    ops = ["Add", "Relu", "Mul"]
    _claim(lambda graph: [Claim.group(graph.nodes)])
    sess = _session_claiming(ops)
    assert len(ClaimingProvider.compiled) == 1
    group = ClaimingProvider.compiled[0]
    assert [n.op_type for n in group.nodes] == ops
    assert [v.name for v in group.inputs] == ["x"]
    assert [v.name for v in group.outputs] == ["y"]
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], chain_reference(ops, x))
    assert len(ClaimingProvider.compiled) == 1
    part = sess.get_partition()
    assert {r.group for r in part.nodes} == {group.name}
    assert group.name.startswith("ClaimingExecutionProvider")
    assert part.counts() == {"ClaimingExecutionProvider": 3}


def test_named_fused_group_in_partition_and_rest_elsewhere() -> None:
    ops = ["Add", "Relu", "Neg", "Mul"]
    _claim(lambda graph: [Claim.group(_by_op(graph, "Add", "Relu"), name="addrelu")])
    sess = _session_claiming(ops)
    rec = {r.node: r for r in sess.get_partition().nodes}
    assert rec["n0_Add"].group == rec["n1_Relu"].group == "addrelu"
    assert rec["n0_Add"].provider == "ClaimingExecutionProvider"
    assert rec["n2_Neg"].provider == rec["n3_Mul"].provider == "MiniExecutionProvider"
    assert rec["n2_Neg"].group == ""
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], chain_reference(ops, X))


def test_fused_group_outputs_read_outside_and_graph_outputs() -> None:
    # t is read inside the group and by Neg outside; u is both a graph output and read inside.
    nodes = [
        helper.make_node("Add", ["x", "x"], ["t"], name="add"),
        helper.make_node("Relu", ["t"], ["u"], name="relu"),
        helper.make_node("Mul", ["u", "x"], ["v"], name="mul"),
        helper.make_node("Neg", ["t"], ["w"], name="neg"),
    ]
    shape = [2, 3]
    data = make_model(nodes, [fvi("x", shape)], [fvi("u", shape), fvi("v", shape), fvi("w", shape)])
    _claim(lambda graph: [Claim.group(_by_op(graph, "Add", "Relu", "Mul"))])
    sess = ortcore.InferenceSession(data, no_fallback(), providers=["claiming", "mini"])
    (group,) = ClaimingProvider.compiled
    assert [v.name for v in group.outputs] == ["t", "u", "v"]
    u, v, w = sess.run(None, {"x": X})
    np.testing.assert_allclose(u, np.maximum(X + X, 0))
    np.testing.assert_allclose(v, np.maximum(X + X, 0) * X)
    np.testing.assert_allclose(w, -(X + X))


def test_two_fused_groups_get_distinct_names() -> None:
    ops = ["Add", "Neg", "Relu"]
    _claim(
        lambda graph: [
            Claim.group(_by_op(graph, "Add")),
            Claim.group(_by_op(graph, "Relu")),
        ]
    )
    sess = _session_claiming(ops)
    names = [g.name for g in ClaimingProvider.compiled]
    assert len(names) == 2 and len(set(names)) == 2
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], chain_reference(ops, X))


# -- fused groups and control flow's implicit inputs ------------------------------------------


def _if_reading(value: str, out: str) -> onnx.NodeProto:
    """An If whose then-branch reads outer ``value`` (implicitly), else-branch reads x."""
    then_g = helper.make_graph(
        [helper.make_node("Add", [value, "x"], ["to"], name="then_add")],
        "then_g",
        [],
        [fvi("to", [2, 3])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["eo"], name="else_neg")],
        "else_g",
        [],
        [fvi("eo", [2, 3])],
    )
    return helper.make_node(
        "If", ["cond"], [out], name="IF", then_branch=then_g, else_branch=else_g
    )


def _claim_named(*names: str) -> None:
    def claims(graph: GraphContext) -> list[Claim]:
        nodes = [n for n in graph.nodes if n.name in names]
        return [Claim.group(nodes)] if nodes else []

    _claim(claims)


def test_fused_group_feeding_an_if_implicitly() -> None:
    # A -> (implicit) IF; group {A, C} waits on U, which sorts after IF.
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="A"),
        _if_reading("a", "f"),
        helper.make_node("Relu", ["x"], ["r"], name="R"),
        helper.make_node("Neg", ["r"], ["u"], name="U"),
        helper.make_node("Mul", ["a", "u"], ["y"], name="C"),
    ]
    data = make_model(
        nodes,
        [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])],
        [fvi("f", [2, 3]), fvi("y", [2, 3])],
    )
    _claim_named("A", "C")
    sess = ortcore.InferenceSession(data, no_fallback(), providers=["claiming", "mini"])
    f, y = sess.run(None, {"cond": np.array(True), "x": X})
    np.testing.assert_allclose(f, 3 * X)
    np.testing.assert_allclose(y, (X + X) * -np.maximum(X, 0))


def test_fused_group_cycle_through_implicit_input_is_ep_fail() -> None:
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="A"),
        _if_reading("a", "f"),
        helper.make_node("Mul", ["f", "x"], ["y"], name="C"),
    ]
    data = make_model(
        nodes, [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )
    _claim_named("A", "C")
    with pytest.raises(ortcore.EPFail, match=r"ClaimingExecutionProvider.*cycle"):
        ortcore.InferenceSession(data, no_fallback(), providers=["claiming", "mini"])


def test_fused_group_before_if_with_implicit_read() -> None:
    # The same shape without the delaying side branch plans and runs.
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="A"),
        helper.make_node("Relu", ["a"], ["b"], name="B"),
        _if_reading("b", "y"),
    ]
    data = make_model(
        nodes, [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )
    _claim_named("A", "B")
    sess = ortcore.InferenceSession(data, no_fallback(), providers=["claiming", "mini"])
    assert len(ClaimingProvider.compiled) == 1
    (y,) = sess.run(None, {"cond": np.array(True), "x": X})
    np.testing.assert_allclose(y, np.maximum(X + X, 0) + X)
    (y,) = sess.run(None, {"cond": np.array(False), "x": X})
    np.testing.assert_allclose(y, -X)
