"""The planner: fused groups' argument order, its constructor, steps as named tuples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest
from onnx import helper

import ortcore
from ep_sdk import KernelRegistry, NodeInfo
from ortcore.cache import CACHE_DIR_KEY, CompiledCache
from ortcore.executor import Step, StepInfo
from ortcore.planner import GraphPlanner

from .conftest import chain_model, fvi, make_model, no_fallback
from .providers import ClaimingProvider, MiniProvider, group_claims


def _group_model() -> bytes:
    """A claimed Mul/Add/Mul group reading three inputs and producing three values
    read outside it; names sort otherwise than first use and production order."""
    nodes = [
        helper.make_node("Mul", ["b_in", "c_in"], ["zp"], name="mul1"),
        helper.make_node("Add", ["a_in", "zp"], ["mq"], name="add"),
        helper.make_node("Mul", ["mq", "c_in"], ["ar"], name="mul2"),
        helper.make_node("Neg", ["zp"], ["s"], name="neg"),
        helper.make_node("Sub", ["ar", "s"], ["out"], name="sub"),
    ]
    ins = [fvi(n, [2, 3]) for n in ("a_in", "b_in", "c_in")]
    return make_model(nodes, ins, [fvi("out", [2, 3]), fvi("mq", [2, 3])])


def test_fused_group_takes_inputs_in_first_use_and_gives_outputs_in_production_order() -> None:
    ClaimingProvider.claims_for = lambda g: group_claims(g, {"Mul", "Add"})
    so = no_fallback()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ortcore.InferenceSession(_group_model(), so, providers=["claiming", "mini"])
    (group,) = ClaimingProvider.compiled
    assert [n.name for n in group.nodes] == ["mul1", "add", "mul2"]
    assert [v.name for v in group.inputs] == ["b_in", "c_in", "a_in"]
    assert [v.name for v in group.outputs] == ["zp", "mq", "ar"]
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
    out, mq = sess.run(None, {"a_in": a, "b_in": b, "c_in": c})
    np.testing.assert_allclose(mq, a + b * c, rtol=1e-6)
    np.testing.assert_allclose(out, (a + b * c) * c + b * c, rtol=1e-6)


def test_planner_takes_its_cache_and_tensor_limit_when_built(tmp_path: Path) -> None:
    planner = GraphPlanner([], {"": 17})
    assert planner.cache is None and planner.max_tensor_bytes is None
    cache = CompiledCache(tmp_path)
    planner = GraphPlanner([], {"": 17}, cache=cache, max_tensor_bytes=1 << 20)
    assert planner.cache is cache and planner.max_tensor_bytes == 1 << 20
    so = no_fallback()
    so.add_session_config_entry(CACHE_DIR_KEY, str(tmp_path / "cache"))
    so.add_session_config_entry("session.max_tensor_bytes", "4096")
    sess = ortcore.InferenceSession(_group_model(), so, providers=["mini"])
    assert sess._plans.planner.cache is not None
    assert sess._plans.planner.cache.directory == tmp_path / "cache"
    assert sess._plans.planner.max_tensor_bytes == 4096


def test_steps_are_named_tuples_that_unpack_as_before() -> None:
    sess = ortcore.InferenceSession(_group_model(), no_fallback(), providers=["mini"])
    steps = sess._plans.planned.plan.steps
    assert all(isinstance(s, Step) for s in steps)
    fn, ins, outs, release, wants_context, info = steps[0]
    assert (fn, ins, outs, release, wants_context, info) == tuple(steps[0])
    assert isinstance(info, StepInfo) and info.name == "mul1" and steps[0].inputs == ins


def test_nodes_of_one_kind_are_looked_up_once_and_each_gets_its_own_info(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner works a node kind (op, types, static shapes) out once: one
    registry lookup for a chain of alike nodes, yet each builder gets a
    NodeInfo of its node, whose attributes a builder may change alone."""
    registry = KernelRegistry()
    attrs_seen: list[dict[str, object]] = []
    names: list[str] = []

    @registry.kernel("Neg")
    def neg(info: NodeInfo) -> object:
        names.append(info.name)
        attrs_seen.append(dict(info.attrs))
        info.attrs["changed_by_builder"] = True
        assert info.input_shapes == ((2, 3),) and info.output_types == (ir.DataType.FLOAT,)
        return lambda x: (-x,)

    @registry.kernel("Relu")
    def relu(info: NodeInfo) -> object:
        names.append(info.name)
        return lambda x: (np.maximum(x, 0),)

    looked_up: list[str] = []
    lookup_node = registry.lookup_node

    def counting(node: ir.Node, opsets: object) -> object:
        looked_up.append(node.name or "")
        return lookup_node(node, opsets)  # type: ignore[arg-type]

    monkeypatch.setattr(registry, "lookup_node", counting)
    monkeypatch.setattr(MiniProvider, "_registry", registry)
    ops = ["Neg", "Relu", "Neg", "Neg", "Relu"]
    so = no_fallback()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ortcore.InferenceSession(chain_model(ops), so, providers=["mini"])
    assert looked_up == ["n0_Neg", "n1_Relu"]
    assert names == [f"n{i}_{op}" for i, op in enumerate(ops)]
    assert attrs_seen == [{}, {}, {}]
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(-x, 0))
