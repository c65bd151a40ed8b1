"""What the optimizer's passes remember between them (issue 55): the census
of op types, facts a pass established, and the passes that return at once
because of them; each kept only while no pass changes the model."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import pytest

from ortcore.optimizer import (
    ConstantFoldingPass,
    DeadCodeEliminationPass,
    IdentityEliminationPass,
    _fusion,
    constant_folding,
    dead_code,
)
from ortcore.optimizer._pass import census, graphs_remembered, knows
from ortcore.optimizer.qdq_cleanup import fold_activation_into_q
from ortcore.optimizer.swish import fuse_swish


def _chain(*op_types: str, constant_input: bool = False) -> ir.Model:
    """x -> op_types[0] -> ... -> y, float (1, 4); with ``constant_input``
    the first node reads an initializer instead of ``x``."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 4]))
    graph = ir.Graph([x], [], nodes=[], name="g", opset_imports={"": 17})
    prev = x
    if constant_input:
        c = ir.Value(
            name="c",
            type=ir.TensorType(ir.DataType.FLOAT),
            shape=ir.Shape([1, 4]),
            const_value=ir.tensor(np.ones((1, 4), np.float32)),
        )
        graph.register_initializer(c)
        prev = c
    for i, op_type in enumerate(op_types):
        node = ir.Node("", op_type, [prev], name=f"n{i}", num_outputs=1)
        node.outputs[0].name = f"t{i}"
        node.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
        node.outputs[0].shape = ir.Shape([1, 4])
        graph.append(node)
        prev = node.outputs[0]
    if constant_input:  # keep x read, so that it stays an input
        add = ir.Node("", "Add", [prev, x], name="add", num_outputs=1)
        add.outputs[0].name = "sum"
        graph.append(add)
        prev = add.outputs[0]
    graph.outputs.append(prev)
    return ir.Model(graph, ir_version=8)


def _calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Count the calls of ``module.name`` (still called through)."""
    calls: list[int] = []
    real = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_dead_code_removal_skipped_until_the_model_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks = _calls(monkeypatch, dead_code, "remove_dead_code")
    model = _chain("Relu", "Identity", "Neg")
    with graphs_remembered():
        DeadCodeEliminationPass()(model)
        DeadCodeEliminationPass()(model)
        assert len(walks) == 1  # nothing changed: the second knew
        assert knows(("no dead code", model.graph))
        assert IdentityEliminationPass()(model).modified
        assert not knows(("no dead code", model.graph))
        DeadCodeEliminationPass()(model)
    assert len(walks) == 2
    DeadCodeEliminationPass()(model)  # outside a run of passes: nothing is known
    assert len(walks) == 3


def test_census_follows_the_changes_of_a_pass() -> None:
    model = _chain("Relu", "Identity", "Neg")
    with graphs_remembered():
        assert set(census(model.graph)) == {"Relu", "Identity", "Neg"}
        IdentityEliminationPass()(model)
        assert set(census(model.graph)) == {"Relu", "Neg"}


def test_single_op_pass_skips_a_graph_without_its_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore.optimizer import elimination

    walks = _calls(monkeypatch, elimination, "eliminate_identities")
    with graphs_remembered():
        IdentityEliminationPass()(_chain("Relu", "Neg"))
        assert walks == []
        IdentityEliminationPass()(_chain("Relu", "Identity"))
    assert walks == [1]


def test_qdq_fusions_need_a_quantize_node() -> None:
    plain = _chain("Relu", "Sigmoid")
    quantized = _chain("Relu", "QuantizeLinear")
    with graphs_remembered():
        assert not _fusion._may_match(fold_activation_into_q, plain.graph)
        assert _fusion._may_match(fold_activation_into_q, quantized.graph)
        assert _fusion._may_match(fuse_swish, plain.graph)  # no needs: its anchor is enough


def test_fusion_context_nodes_in_graph_order() -> None:
    model = _chain("Tanh", "Erf", "Relu", "Tanh")
    ctx = _fusion.FusionContext(model, model.graph, frozenset())
    with graphs_remembered():
        assert [n.name for n in ctx.nodes("Erf", "Tanh")] == ["n0", "n1", "n3"]
        assert ctx.nodes("Softmax") == []


def _folding_pair(
    skips_only: tuple[str, ...] | None,
) -> tuple[ConstantFoldingPass, ConstantFoldingPass]:
    """A folding pass that skips DequantizeLinear nodes and one after it
    sharing its budget (as the optimizer makes them)."""
    cpu = pytest.importorskip("ortcore_cpu.provider")
    provider = cpu.CPUExecutionProvider()
    first = ConstantFoldingPass(
        provider, skip=lambda n: n.op_type == "DequantizeLinear", skips_only=skips_only
    )
    second = ConstantFoldingPass(provider, skip=lambda n: False, shares_budget_with=first)
    return first, second


def test_folding_after_the_fusions_skipped_when_nothing_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks = _calls(monkeypatch, constant_folding, "fold_constants")
    first, second = _folding_pair(("DequantizeLinear",))
    model = _chain("Relu", "Neg", constant_input=True)
    with graphs_remembered():
        first(model)
        assert first.changes == 2  # Relu(c), Neg(...) folded
        second(model)
    assert len(walks) == 1
    # a graph with a node the first one may have skipped: walked again
    first, second = _folding_pair(("DequantizeLinear",))
    with graphs_remembered():
        first(_chain("DequantizeLinear", "Neg"))
        second(_chain("DequantizeLinear", "Neg"))
    assert len(walks) == 3
    # a first pass that does not say what it skips: walked again
    first, second = _folding_pair(None)
    model = _chain("Relu", "Neg")
    with graphs_remembered():
        first(model)
        second(model)
    assert len(walks) == 5
