"""Claim errors name the nodes at fault, unnamed ones by op type and position."""

from __future__ import annotations

import pytest
from onnx import helper

import ortcore
from ep_sdk import Claim, GraphContext

from .conftest import fvi, make_model, no_fallback
from .providers import ClaimingProvider


def _model(named: bool) -> bytes:
    # x -> Add -> Neg -> Mul(Add, Neg): {Add, Mul} with Neg outside is a cycle
    names = ["A", "B", "C"] if named else ["", "", ""]
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name=names[0]),
        helper.make_node("Neg", ["a"], ["b"], name=names[1]),
        helper.make_node("Mul", ["a", "b"], ["y"], name=names[2]),
    ]
    return make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])


def _claim_add_and_mul(graph: GraphContext) -> list[Claim]:
    return [Claim.group([n for n in graph.graph if n.op_type in ("Add", "Mul")])]


def test_cycle_error_describes_unnamed_nodes_by_op_and_position() -> None:
    ClaimingProvider.claims_for = staticmethod(_claim_add_and_mul)
    with pytest.raises(ortcore.EPFail) as info:
        ortcore.InferenceSession(_model(False), no_fallback(), providers=["claiming", "mini"])
    message = str(info.value)
    assert "fused group of 2 nodes (Add #0, Mul #2)" in message, message
    assert "would create a cycle through Neg #1" in message
    assert "''" not in message


def test_cycle_error_names_named_nodes() -> None:
    ClaimingProvider.claims_for = staticmethod(_claim_add_and_mul)
    with pytest.raises(ortcore.EPFail, match=r"\(Add 'A', Mul 'C'\) that would create a cycle "):
        ortcore.InferenceSession(_model(True), no_fallback(), providers=["claiming", "mini"])


def test_node_claimed_twice_is_described() -> None:
    def twice(graph: GraphContext) -> list[Claim]:
        add = next(n for n in graph.graph if n.op_type == "Add")
        return [Claim.node(add), Claim.node(add)]

    ClaimingProvider.claims_for = staticmethod(twice)
    with pytest.raises(ortcore.EPFail, match=r"claimed node Add #0 twice"):
        ortcore.InferenceSession(_model(False), no_fallback(), providers=["claiming", "mini"])


def test_groups_that_wait_for_each_other_are_named() -> None:
    """Two groups, each acyclic alone, that read each other's outputs: the
    planner's error lists both groups by their nodes (unnamed ones by position)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),  # group 1
        helper.make_node("Neg", ["x"], ["b"]),  # group 2
        helper.make_node("Abs", ["a"], ["c"]),  # group 2, reads group 1
        helper.make_node("Sigmoid", ["b"], ["d"]),  # group 1, reads group 2
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("c", [2, 3]), fvi("d", [2, 3])])

    def two_groups(graph: GraphContext) -> list[Claim]:
        by_op = {n.op_type: n for n in graph.graph}
        return [
            Claim.group([by_op["Relu"], by_op["Sigmoid"]]),
            Claim.group([by_op["Neg"], by_op["Abs"]]),
        ]

    ClaimingProvider.claims_for = staticmethod(two_groups)
    with pytest.raises(ortcore.EPFail) as info:
        ortcore.InferenceSession(model, no_fallback(), providers=["claiming", "mini"])
    message = str(info.value)
    assert "fused groups create a cycle" in message, message
    assert "group of 2 nodes [Relu #0, Sigmoid #3]" in message
    assert "group of 2 nodes [Neg #1, Abs #2]" in message
    assert "''" not in message
