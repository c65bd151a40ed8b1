"""What keeps session creation linear and lean on very large graphs
(benchmarks/large_graph.py measures it): the collector's pause, kept kernel
lookups, fusions skipped by their anchors, graphs kept in order."""

from __future__ import annotations

import gc
import threading

import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from ep_sdk import KernelDef, KernelMiss, KernelRegistry
from ep_sdk.registry import reset_schema_cache
from ortcore.build_memory import gc_paused
from ortcore.model import _sort_graph
from ortcore.optimizer._fusion import FusionPass, anchored
from ortcore.partition import Assignment, assign


def test_gc_paused_nests_and_restores_the_collectors_state() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause still holds
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector off before stays off
    finally:
        (gc.enable if was else gc.disable)()


def test_gc_paused_across_threads_restarts_after_the_last_build() -> None:
    was = gc.isenabled()
    gc.enable()
    inside, release = threading.Event(), threading.Event()

    def build() -> None:
        with gc_paused():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=build)
    try:
        t.start()
        assert inside.wait(5)
        with gc_paused():
            pass
        assert not gc.isenabled()  # the other thread's build goes on
        release.set()
        t.join(5)
        assert gc.isenabled()
    finally:
        release.set()
        t.join(5)
        (gc.enable if was else gc.disable)()


def _kernel(op: str, since: int, until: int | None = None) -> KernelDef:
    return KernelDef(op_type=op, domain="", since=since, until=until, builder=lambda info: None)


def test_kept_lookups_are_forgotten_when_a_kernel_is_registered() -> None:
    reg = KernelRegistry()
    reg.register(_kernel("Relu", 14))
    assert isinstance(reg.lookup("Relu", "", 13), KernelMiss)
    assert isinstance(reg.lookup("Relu", "", 13), KernelMiss)  # kept
    reg.register(_kernel("Relu", 6, 13))
    found = reg.lookup("Relu", "", 13)
    assert isinstance(found, KernelDef) and found.since == 6
    assert reg.lookup("Relu", "", 14).since == 14  # type: ignore[union-attr]


def test_kept_lookups_are_forgotten_when_the_schemas_change() -> None:
    reg = KernelRegistry()
    reg.register(_kernel("Relu", 14))
    first = reg.lookup("Relu", "", 14)
    reset_schema_cache()
    again = reg.lookup("Relu", "", 14)
    assert again == first
    assert reg.__dict__["_found_cache"] is not None  # made anew for the new generation


def test_a_fusion_is_skipped_for_a_graph_without_its_anchor_ops() -> None:
    calls: list[str] = []

    @anchored("Softmax")
    def needs_softmax(ctx: object) -> int:
        calls.append("softmax")
        return 0

    def always(ctx: object) -> int:
        calls.append("always")
        return 0

    class Pass(FusionPass):
        fusions = (needs_softmax, always)

    x = ir.Value(name="x")
    node = ir.Node("", "Relu", [x], num_outputs=1)
    graph = ir.Graph([x], list(node.outputs), nodes=[node], opset_imports={"": 17})
    model = ir.Model(graph, ir_version=8)
    assign(node, Assignment(provider=object()))  # type: ignore[arg-type]
    Pass(check_invariants=False).apply(model)
    assert calls == ["always"]
    node.op_type = "Softmax"
    Pass(check_invariants=False).apply(model)
    assert calls == ["always", "softmax", "always"]


def _chain(names: list[tuple[str, str, str]]) -> onnx.GraphProto:
    nodes = [helper.make_node("Relu", [i], [o], name=n) for n, i, o in names]
    return helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1])],
    )


def test_a_graph_in_order_keeps_its_order_and_another_is_sorted() -> None:
    # x -> a -> b and x -> c: in order as given, though not breadth-first.
    graph = _chain([("n1", "x", "a"), ("n2", "a", "b"), ("n3", "x", "c")])
    _sort_graph(graph, set())
    assert [n.name for n in graph.node] == ["n1", "n2", "n3"]
    shuffled = _chain([("n2", "a", "b"), ("n3", "x", "c"), ("n1", "x", "a")])
    _sort_graph(shuffled, set())
    names = [n.name for n in shuffled.node]
    assert names.index("n1") < names.index("n2")
    assert sorted(names) == ["n1", "n2", "n3"]


def test_a_wide_graph_out_of_order_is_sorted() -> None:
    """Kahn's sort on thousands of ready nodes (it took from the front of a
    list, quadratic on such a graph: benchmarks/large_graph.py times it)."""
    n = 5_000
    nodes = [helper.make_node("Relu", ["x"], [f"y{i}"], name=f"n{i}") for i in range(n)]
    nodes.insert(0, helper.make_node("Relu", ["y0"], ["z"], name="after_n0"))
    graph = helper.make_graph(
        nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], []
    )
    _sort_graph(graph, set())
    names = [m.name for m in graph.node]
    assert names.index("after_n0") > names.index("n0")
    assert sorted(names) == sorted([f"n{i}" for i in range(n)] + ["after_n0"])
