"""Optimizer order as onnxruntime's: provider-independent passes, then
partitioning, then fusions only on nodes whose provider has the fused kernel.

A compile-path provider is always shown the model's own ops (``Conv``,
``Relu``), never ``com.ortcore`` fused ops meant for another provider."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import helper, numpy_helper

import ep_sdk
import ortcore
from ep_sdk import Capability, Claim, ExecutionProvider, GraphContext, KernelRegistry
from ortcore.model import load_model
from ortcore.partition import Assignment, assignment_of, partition_graph
from ortcore.plugins import PluginManager

from .conftest import fvi, make_model, plugin_module

RNG = np.random.default_rng(0)
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


class _Bridge(ExecutionProvider):
    """A compile-path provider: claims, as one group, every node it is shown
    whose op type ``takes`` accepts, and records the op types it is shown."""

    name = "BridgeExecutionProvider"
    shown: ClassVar[list[list[str]]]
    takes: ClassVar[Callable[[ep_sdk.GraphContext, Any], bool]]

    def get_capability(self, graph: GraphContext) -> Capability:
        type(self).shown.append([n.op_type for n in graph.nodes])
        groups = ep_sdk.group_nodes(graph, lambda n: type(self).takes(graph, n))
        return Capability(claims=groups)

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        import onnx.reference  # the test oracle, fine in a test provider

        names = [v.name for v in group.inputs]
        ref: list[Any] = []  # built on the first run

        def run(*args: Any) -> list[Any]:
            if not ref:
                ref.append(onnx.reference.ReferenceEvaluator(group.model))
            return list(ref[0].run(None, dict(zip(names, args))))

        return run


def _bridge(
    registry: Callable[[], KernelRegistry | None],
    takes: Callable[[GraphContext, Any], bool] = lambda g, n: True,
) -> type[_Bridge]:
    """A fresh bridge class (its own record of what it was shown)."""

    class Bridge(_Bridge):
        shown: ClassVar[list[list[str]]] = []

        def kernel_registry(self) -> KernelRegistry | None:
            return registry()

    Bridge.takes = staticmethod(takes)  # type: ignore[assignment]
    return Bridge


def _manager(*classes: type) -> PluginManager:
    """The installed plugins (the CPU provider) plus ``classes``."""
    pm = PluginManager(autoload=True)
    pm.register_plugin(plugin_module("tests.fusion_order", *classes), name="tests.fusion_order")
    return pm


def _conv_relu(pairs: int = 1) -> bytes:
    """x -> (Conv -> Relu) * pairs -> y."""
    nodes, inits, prev = [], [], "x"
    for i in range(pairs):
        w = numpy_helper.from_array(RNG.standard_normal((2, 2, 3, 3)).astype(np.float32), f"w{i}")
        inits.append(w)
        out = "y" if i == pairs - 1 else f"r{i}"
        nodes.append(
            helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1] * 4, name=f"conv{i}")
        )
        nodes.append(helper.make_node("Relu", [f"c{i}"], [out], name=f"relu{i}"))
        prev = out
    return make_model(nodes, [fvi("x", [1, 2, 4, 4])], [fvi("y", [1, 2, 4, 4])], inits, opset=17)


def _x() -> np.ndarray:
    return RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)


def _reference(model: bytes, x: np.ndarray) -> np.ndarray:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ortcore.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]  # type: ignore[no-any-return]


def _placement(sess: ortcore.InferenceSession) -> dict[str, tuple[str, str, str]]:
    """node -> (op type, provider, group)."""
    return {r.node: (r.op_type, r.provider, r.group) for r in sess.get_partition().nodes}


def _custom_op_options(provider: str) -> ortcore.SessionOptions:
    """Session options registering a custom op with a kernel for ``provider`` only."""
    op = ortcore.custom_op(
        domain="test.fusion_order",
        name=f"Twice{provider}",
        inputs=["X: T"],
        outputs=["Y: T"],
        types={"T": ["float"]},
    )

    @op.kernel(provider)
    def build(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
        return lambda x: (x * 2,)

    so = ortcore.SessionOptions()
    so.register_custom_ops(op)
    return so


@pytest.mark.parametrize("kernels", ["empty registry", "custom-op kernel"])
def test_compile_path_provider_sees_the_models_own_ops(cpu: str, kernels: str) -> None:
    # It was shown FusedConv: the fusion ran before get_capability and took the
    # pattern for the CPU provider, the only one with a FusedConv kernel.
    if kernels == "empty registry":
        bridge = _bridge(KernelRegistry)
        so = ortcore.SessionOptions()
    else:
        bridge = _bridge(lambda: None)
        bridge.name = "BridgeCustomOpExecutionProvider"
        so = _custom_op_options(bridge.name)
    model, x = _conv_relu(), _x()
    sess = ortcore.InferenceSession(
        model, so, providers=[bridge.name], plugin_manager=_manager(bridge)
    )
    assert bridge.shown == [["Conv", "Relu"]]  # asked once: the planner kept the partition
    placed = _placement(sess)
    assert [p[0] for p in placed.values()] == ["Conv", "Relu"]
    assert {p[1:] for p in placed.values()} == {(bridge.name, f"{bridge.name}_fused_1")}
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(model, x), rtol=1e-5)


def test_pattern_split_between_providers_is_not_fused(cpu: str) -> None:
    bridge = _bridge(KernelRegistry, takes=lambda g, n: n.op_type == "Relu")
    model, x = _conv_relu(), _x()
    sess = ortcore.InferenceSession(model, providers=[bridge.name], plugin_manager=_manager(bridge))
    assert bridge.shown == [["Conv", "Relu"]]
    placed = _placement(sess)
    assert placed["conv0"][:2] == ("Conv", "CPUExecutionProvider")
    assert placed["relu0"][:2] == ("Relu", bridge.name)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(model, x), rtol=1e-5)


def test_cpu_fuses_the_nodes_it_runs_next_to_a_bridge_group(cpu: str) -> None:
    first = {"conv0", "relu0"}
    bridge = _bridge(KernelRegistry, takes=lambda g, n: n.name in first)
    model, x = _conv_relu(pairs=2), _x()
    sess = ortcore.InferenceSession(model, providers=[bridge.name], plugin_manager=_manager(bridge))
    assert bridge.shown == [["Conv", "Relu", "Conv", "Relu"]]
    placed = _placement(sess)
    assert {placed[n][1] for n in first} == {bridge.name}
    fused = [(op, provider) for op, provider, _ in placed.values() if op == "FusedConv"]
    assert fused == [("FusedConv", "CPUExecutionProvider")]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(model, x), rtol=1e-5)


def test_cpu_alone_still_fuses(cpu: str) -> None:
    model, x = _conv_relu(), _x()
    sess = ortcore.InferenceSession(model, providers=[cpu])
    assert [(op, provider) for op, provider, _ in _placement(sess).values()] == [
        ("FusedConv", "CPUExecutionProvider")
    ]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(model, x), rtol=1e-5)


def test_kernel_provider_without_the_fused_kernel_gets_no_fusion(cpu: str) -> None:
    class ConvRelu(ExecutionProvider):
        """The CPU provider's kernels for Conv and Relu, none for FusedConv."""

        name = "ConvReluExecutionProvider"

        def kernel_registry(self) -> KernelRegistry:
            from ortcore_cpu.provider import CPUExecutionProvider

            full = CPUExecutionProvider().registry() or KernelRegistry()
            return KernelRegistry().with_kernels(
                k for k in full if k.domain == "" and k.op_type in ("Conv", "Relu")
            )

    model, x = _conv_relu(), _x()
    sess = ortcore.InferenceSession(
        model, providers=[ConvRelu.name], plugin_manager=_manager(ConvRelu)
    )
    assert [p[:2] for p in _placement(sess).values()] == [
        ("Conv", ConvRelu.name),
        ("Relu", ConvRelu.name),
    ]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(model, x), rtol=1e-5)


# -- subgraphs -----------------------------------------------------------------


def _if_model() -> bytes:
    """If(cond) with a Conv -> Relu branch and a Relu branch, both reading x."""
    w = numpy_helper.from_array(RNG.standard_normal((2, 2, 3, 3)).astype(np.float32), "w")
    then = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4, name="conv"),
         helper.make_node("Relu", ["c"], ["t"], name="relu")],
        "then", [], [fvi("t", [1, 2, 4, 4])],
    )  # fmt: skip
    other = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["e"], name="relu_else")], "else", [],
        [fvi("e", [1, 2, 4, 4])],
    )  # fmt: skip
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="if")
    cond = helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])
    return make_model([node], [cond, fvi("x", [1, 2, 4, 4])], [fvi("y", [1, 2, 4, 4])], [w])


def test_if_bodies_are_partitioned_then_fused(cpu: str) -> None:
    model, x = _if_model(), _x()
    feeds = {"cond": np.array(True), "x": x}
    sess = ortcore.InferenceSession(model, providers=[cpu])
    records = {(r.graph, r.node): (r.op_type, r.provider) for r in sess.get_partition().nodes}
    assert ("FusedConv", "CPUExecutionProvider") in records.values()
    want = ortcore.InferenceSession(
        model, _disabled(), providers=[cpu]
    ).run(None, feeds)[0]  # fmt: skip
    np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-5)


def test_compile_path_provider_sees_a_bodys_own_ops(cpu: str) -> None:
    bridge = _bridge(KernelRegistry, takes=lambda g, n: n.op_type in ("Conv", "Relu"))
    model, x = _if_model(), _x()
    feeds = {"cond": np.array(True), "x": x}
    sess = ortcore.InferenceSession(model, providers=[bridge.name], plugin_manager=_manager(bridge))
    assert sorted(bridge.shown) == [["Conv", "Relu"], ["If"], ["Relu"]]
    ops = sorted(r.op_type for r in sess.get_partition().nodes)
    assert "FusedConv" not in ops
    want = ortcore.InferenceSession(model, _disabled(), providers=[cpu]).run(None, feeds)[0]
    np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-5)


def _disabled() -> ortcore.SessionOptions:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


# -- a whole CNN ------------------------------------------------------------


def _resnet() -> bytes:
    path = LIGHT / "light_resnet50.onnx"
    if not path.is_file():
        pytest.skip("onnx's light ResNet-50 is not installed")
    return path.read_bytes()


def test_resnet50_is_one_group_for_a_bridge_and_fused_on_cpu(cpu: str) -> None:
    class Whole(_Bridge):
        name = "WholeBridgeExecutionProvider"
        shown: ClassVar[list[list[str]]] = []

        def kernel_registry(self) -> KernelRegistry:
            return KernelRegistry()

        def compile(self, group: ep_sdk.FusedGroup) -> Any:
            return lambda *args: []  # never run here

    # Like a real engine, it runs ONNX ops only: never ortcore's fused ops.
    Whole.takes = staticmethod(lambda g, n: n.domain in ("", "ai.onnx"))  # type: ignore[assignment]
    model = _resnet()
    sess = ortcore.InferenceSession(model, providers=[Whole.name], plugin_manager=_manager(Whole))
    (shown,) = Whole.shown
    assert "Conv" in shown, shown
    assert not any(op.startswith("Fused") for op in shown), shown
    records = sess.get_partition().nodes
    assert {r.provider for r in records} == {Whole.name}
    groups = {r.group for r in records}
    assert len(groups) == 1 and "" not in groups, groups  # was 17, around FusedConv nodes

    cpu_sess = ortcore.InferenceSession(model, providers=[cpu])
    ops = [(r.op_type, r.provider) for r in cpu_sess.get_partition().nodes]
    assert ops.count(("FusedConv", "CPUExecutionProvider")) > 10


# -- partitioning again keeps what was recorded -------------------------------


class _Counter(ExecutionProvider):
    """Claims every node it is shown (one by one, or as one group)."""

    name = "CounterExecutionProvider"

    def __init__(self, grouped: bool = False) -> None:
        super().__init__()
        self.grouped = grouped
        self.shown: list[list[str]] = []

    def get_capability(self, graph: GraphContext) -> Capability:
        self.shown.append([n.name or "" for n in graph.nodes])
        if self.grouped:
            return Capability(claims=[Claim.group(graph.nodes)])
        return Capability(claims=[Claim.node(n) for n in graph.nodes])


def _chain() -> ir.Model:
    nodes = [helper.make_node(op, [i], [o], name=n) for op, i, o, n in (
        ("Neg", "x", "a", "neg"), ("Relu", "a", "y", "relu"))]  # fmt: skip
    return load_model(make_model(nodes, [fvi("x", [2])], [fvi("y", [2])]))


def test_partitioning_again_asks_only_about_new_nodes() -> None:
    model, provider = _chain(), _Counter()
    partition_graph(model.graph, [provider], {"": 17})
    relu = list(model.graph)[-1]
    extra = ir.Node("", "Abs", [relu.outputs[0]], name="abs", num_outputs=1)
    model.graph.append(extra)
    model.graph.outputs[0] = extra.outputs[0]
    part = partition_graph(model.graph, [provider], {"": 17})
    assert provider.shown == [["neg", "relu"], ["abs"]]
    assert set(part.provider_of) == set(model.graph)
    assert assignment_of(extra) == Assignment(provider)


def test_a_recorded_group_that_lost_a_node_is_partitioned_afresh() -> None:
    model, provider = _chain(), _Counter(grouped=True)
    first = partition_graph(model.graph, [provider], {"": 17})
    ((_, claim),) = first.groups
    neg, relu = list(model.graph)
    relu.replace_input_with(0, neg.inputs[0])  # the Neg is bypassed and removed
    model.graph.remove(neg, safe=True)
    again = partition_graph(model.graph, [provider], {"": 17})
    assert provider.shown == [["neg", "relu"], ["relu"]]
    assert again.group_of[relu] is not claim
    assert partition_graph(model.graph, [provider], {"": 17}).group_of[relu] is again.group_of[relu]
    assert len(provider.shown) == 2  # the third time, the record answers


def test_another_providers_record_is_not_used() -> None:
    model, first, second = _chain(), _Counter(), _Counter()
    partition_graph(model.graph, [first], {"": 17})
    partition_graph(model.graph, [second], {"": 17})
    assert second.shown == [["neg", "relu"]]
