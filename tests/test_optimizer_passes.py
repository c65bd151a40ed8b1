"""The optimizer as onnx-ir passes: overridable initializers are never read
as constants, and every pass's ``ensures`` catches a pass that breaks the
rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ep_sdk import Capability, Claim, ExecutionProvider, GraphContext
from ortcore.model import load_model
from ortcore.optimizer import (
    ConvAffineFoldingPass,
    DeadCodeEliminationPass,
    FusionContext,
    IdentityEliminationPass,
    OptimizerPass,
    fold_batchnorm_affine,
    fold_conv_affine,
    optimize,
)
from ortcore.optimizer import _pass as pass_module
from ortcore.optimizer._common import constant, known_shape

from .conftest import fvi, make_model

Level = ortcore.GraphOptimizationLevel


def _f32(name: str, a: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _sessions(model: bytes, feeds: dict[str, np.ndarray], cpu: str) -> list[np.ndarray]:
    """Run ``model`` at every level; outputs agree with no optimization."""
    results = []
    for level in (Level.ORT_DISABLE_ALL, Level.ORT_ENABLE_BASIC, Level.ORT_ENABLE_EXTENDED):
        so = ortcore.SessionOptions()
        so.graph_optimization_level = level
        sess = ortcore.InferenceSession(model, so, providers=[cpu])
        results.append(sess.run(None, feeds)[0])
    for name, got in zip(("basic", "extended"), results[1:]):
        np.testing.assert_allclose(got, results[0], rtol=1e-5, err_msg=name)
    return results


# -- the bug: conv folding read an overridable weight --------------------------


def _conv_mul(overridable: str) -> bytes:
    """Conv(x, w) -> Mul(c) -> y, with ``overridable`` also a graph input."""
    inits = [_f32("w", np.full((1, 1, 1, 1), 0.125)), _f32("c", np.full((1, 1, 1), 2.0))]
    shapes = {"w": [1, 1, 1, 1], "c": [1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["t"], name="conv"),
        helper.make_node("Mul", ["t", "c"], ["y"], name="mul"),
    ]
    inputs = [fvi("x", [1, 1, 1, 1]), fvi(overridable, shapes[overridable])]
    return make_model(nodes, inputs, [fvi("y", [1, 1, 1, 1])], inits, opset=15)


@pytest.mark.parametrize("fed", ["w", "c"])
def test_conv_folding_keeps_an_overridable_parameter(cpu: str, fed: str) -> None:
    # Feeding W = 10 gave 0.25 (0.125 * 2 folded into the weight) at the
    # extended level; no optimization and onnxruntime give 10 * 2 = 20.
    value = {"w": np.full((1, 1, 1, 1), 10.0), "c": np.full((1, 1, 1), 10.0)}[fed]
    feeds = {"x": np.ones((1, 1, 1, 1), np.float32), fed: value.astype(np.float32)}
    want = {"w": 20.0, "c": 1.25}[fed]
    for got in _sessions(_conv_mul(fed), feeds, cpu):
        np.testing.assert_allclose(got, np.full((1, 1, 1, 1), want))


def test_conv_folding_keeps_an_overridable_batch_norm_parameter(cpu: str) -> None:
    inits = [_f32("w", np.full((1, 1, 1, 1), 0.5))]
    inits += [_f32(n, [v]) for n, v in (("s", 2.0), ("b", 0.0), ("m", 0.0), ("v", 1.0))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["t"], name="conv"),
        helper.make_node("BatchNormalization", ["t", "s", "b", "m", "v"], ["y"], epsilon=0.0),
    ]
    model = make_model(
        nodes, [fvi("x", [1, 1, 1, 1]), fvi("s", [1])], [fvi("y", [1, 1, 1, 1])], inits, opset=15
    )
    feeds = {"x": np.ones((1, 1, 1, 1), np.float32), "s": np.array([3.0], np.float32)}
    for got in _sessions(model, feeds, cpu):
        np.testing.assert_allclose(got, np.full((1, 1, 1, 1), 1.5))


def test_fold_conv_affine_leaves_overridable_weights() -> None:
    model = load_model(_conv_mul("w"))
    w = model.graph.initializers["w"]
    assert fold_conv_affine(model.graph, {w}) == 0
    assert [n.op_type for n in model.graph] == ["Conv", "Mul"]
    assert fold_conv_affine(model.graph) == 1  # the same model, w not overridable


# -- BatchNormalization -> Mul -> Add, as pre-activation networks export it -----


def _bn_mul_add(fed: str = "", mul_shape: Sequence[int] = (3, 1, 1)) -> bytes:
    """x -> BatchNormalization -> Mul(k) -> Add(s) -> Relu -> y; ``fed`` is
    also a graph input (a feed may replace it)."""
    rng = np.random.default_rng(5)
    inits = [_f32(n, rng.uniform(0.5, 2.0, 3)) for n in ("scale", "b", "mean", "var")]
    inits += [_f32("k", rng.uniform(-2, 2, mul_shape)), _f32("s", rng.uniform(-1, 1, (3, 1, 1)))]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "scale", "b", "mean", "var"], ["t0"]),
        helper.make_node("Mul", ["t0", "k"], ["t1"], name="mul"),
        helper.make_node("Add", ["s", "t1"], ["t2"], name="add"),
        helper.make_node("Relu", ["t2"], ["y"], name="relu"),
    ]
    inputs = [fvi("x", [2, 3, 4, 5])]
    if fed:
        inputs.append(fvi(fed, [3, 1, 1] if fed in ("k", "s") else [3]))
    return make_model(nodes, inputs, [fvi("y", [2, 3, 4, 5])], inits, opset=15)


def _extended_ops(model: bytes, cpu: str) -> list[str]:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = Level.ORT_ENABLE_EXTENDED
    sess = ortcore.InferenceSession(model, so, providers=[cpu])
    return [r.op_type for r in sess.get_partition().nodes]


def test_batchnorm_absorbs_the_mul_and_add_after_it(cpu: str) -> None:
    model = _bn_mul_add()
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)
    _sessions(model, {"x": x}, cpu)  # every level agrees with no optimization
    assert _extended_ops(model, cpu) == ["FusedBatchNorm"]  # then fused with its Relu
    loaded = load_model(model)
    assert fold_batchnorm_affine(loaded.graph) == 2
    assert [n.op_type for n in loaded.graph] == ["BatchNormalization", "Relu"]


@pytest.mark.parametrize("fed", ["k", "s", "scale"])
def test_batchnorm_folding_keeps_an_overridable_parameter(cpu: str, fed: str) -> None:
    model = _bn_mul_add(fed)
    shape = [3, 1, 1] if fed in ("k", "s") else [3]
    feeds = {
        "x": np.random.default_rng(7).standard_normal((2, 3, 4, 5)).astype(np.float32),
        fed: np.full(shape, 3.0, np.float32),
    }
    results = _sessions(model, feeds, cpu)
    fed_value = load_model(model).graph.initializers[fed].const_value
    assert fed_value is not None and not np.allclose(fed_value.numpy(), 3.0)
    assert not np.allclose(results[0], _sessions(_bn_mul_add(), {"x": feeds["x"]}, cpu)[0])
    assert "Mul" in _extended_ops(model, cpu) or "Add" in _extended_ops(model, cpu)


def test_batchnorm_folding_leaves_a_mul_that_is_not_per_channel(cpu: str) -> None:
    model = _bn_mul_add(mul_shape=(1, 1, 5))  # varies along W, not per channel
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 5)).astype(np.float32)
    _sessions(model, {"x": x}, cpu)
    assert "Mul" in _extended_ops(model, cpu)


# -- the same rule in the other passes -----------------------------------------


def test_dropout_with_overridable_training_mode_is_kept(cpu: str) -> None:
    nodes = [
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Dropout", ["n", "r", "train"], ["d"], name="drop", seed=3),
        helper.make_node("Neg", ["d"], ["y"], name="neg_again"),
    ]
    inits = [_f32("r", 0.5), numpy_helper.from_array(np.array(False), "train")]
    inputs = [fvi("x", [64]), fvi("train", [], TensorProto.BOOL)]
    model = make_model(nodes, inputs, [fvi("y", [64])], inits)
    feeds = {"x": np.ones(64, np.float32), "train": np.array(True)}
    for got in _sessions(model, feeds, cpu):
        assert set(np.unique(got)) <= {0.0, 2.0} and (got == 0).any()  # dropped out


def test_dropout_whose_mask_is_a_graph_output_is_kept(cpu: str) -> None:
    # The mask is read by nobody but is an output: eliminating the Dropout
    # raised ValueError (onnx-ir refuses to remove a node making an output).
    nodes = [
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Dropout", ["n"], ["d", "mask"], name="drop"),
        helper.make_node("Neg", ["d"], ["y"], name="neg_again"),
    ]
    outputs = [fvi("y", [4]), fvi("mask", [4], TensorProto.BOOL)]
    model = make_model(nodes, [fvi("x", [4])], outputs)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_sessions(model, {"x": x}, cpu)[-1], x)


def test_gelu_with_overridable_exponent_is_not_fused(cpu: str) -> None:
    # tanh-form GELU with the cube as Pow(x, e): e = 3 is only a default.
    mk = helper.make_node
    nodes = [
        mk("Pow", ["x", "e"], ["x3"]), mk("Mul", ["x3", "k"], ["kx3"]),
        mk("Add", ["x", "kx3"], ["inner"]), mk("Mul", ["inner", "s"], ["arg"]),
        mk("Tanh", ["arg"], ["th"]), mk("Add", ["th", "one"], ["h"]),
        mk("Mul", ["x", "h"], ["xh"]), mk("Mul", ["xh", "half"], ["y"]),
    ]  # fmt: skip
    inits = [
        _f32("e", 3.0), _f32("k", 0.044715), _f32("s", np.sqrt(2 / np.pi)),
        _f32("one", 1.0), _f32("half", 0.5),
    ]  # fmt: skip
    model = make_model(nodes, [fvi("x", [2, 8]), fvi("e", [])], [fvi("y", [2, 8])], inits)
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    got = _sessions(model, {"x": x, "e": np.array(2.0, np.float32)}, cpu)[-1]
    inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x**2)
    np.testing.assert_allclose(got, 0.5 * x * (1 + np.tanh(inner)), rtol=1e-5)


def test_constant_is_the_one_rule() -> None:
    model = load_model(_conv_mul("w"))
    w, c = model.graph.initializers["w"], model.graph.initializers["c"]
    assert constant(w, {w}) is None
    assert constant(c, {w}) is not None
    x = model.graph.inputs[0]
    assert constant(x, set()) is None
    assert known_shape(x) == (1, 1, 1, 1)


# -- each pass proves its invariants -------------------------------------------


class _RenameOutput(OptimizerPass):
    def apply(self, model: ir.Model) -> int:
        model.graph.outputs[0].name = "renamed"
        return 1


class _DropOverridableInput(OptimizerPass):
    def apply(self, model: ir.Model) -> int:
        graph = model.graph
        keep = [v for v in graph.inputs if v not in self.overridable]
        graph.inputs.clear()
        graph.inputs.extend(keep)
        return 1


class _ReplaceInputValue(OptimizerPass):
    def apply(self, model: ir.Model) -> int:
        old = model.graph.inputs[0]
        new = ir.Value(name=old.name, shape=old.shape, type=old.type)
        ir.convenience.replace_all_uses_with(old, new)
        model.graph.inputs[0] = new
        return 1


class _DropOverridableInitializer(OptimizerPass):
    def apply(self, model: ir.Model) -> int:
        for v in self.overridable:
            del model.graph.initializers[v.name or ""]
        return 1


class _ReadOverridable(OptimizerPass):
    def apply(self, model: ir.Model) -> int:
        for v in self.overridable:
            assert v.const_value is not None
            np.asarray(v.const_value)
        return 0


class _OldConvFolding(OptimizerPass):
    """Conv folding as it was: it did not know which initializers a feed may replace."""

    def apply(self, model: ir.Model) -> int:
        return fold_conv_affine(model.graph)


def _overridable_model() -> tuple[ir.Model, set[ir.Value]]:
    model = load_model(_conv_mul("w"))
    return model, {model.graph.initializers["w"]}


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_RenameOutput, r"_RenameOutput changed the outputs of graph 'g' from \['y'\]"),
        (_DropOverridableInput, r"changed the inputs of graph 'g' from \['x', 'w'\] to \['x'\]"),
        (_DropOverridableInitializer, r"'w' is not an initializer of the graph"),
        (_ReplaceInputValue, r"_ReplaceInputValue replaced the graph input value\(s\) \['x'\]"),
        (_ReadOverridable, r"read the overridable initializer\(s\) 'w' as constants"),
        (_OldConvFolding, r"_OldConvFolding read the overridable initializer\(s\) 'w'"),
    ],
)
def test_ensures_catches_a_broken_pass(broken: type[OptimizerPass], message: str) -> None:
    model, overridable = _overridable_model()
    with pytest.raises(ir.passes.PostconditionError, match=message):
        broken(overridable, check_invariants=True)(model)


def test_ensures_fires_inside_a_pass_manager() -> None:
    model, overridable = _overridable_model()
    manager = ir.passes.PassManager(
        [IdentityEliminationPass(overridable), _OldConvFolding(overridable, check_invariants=True)]
    )
    with pytest.raises(ir.passes.PassError) as info:
        manager(model)
    causes = []
    exc: BaseException | None = info.value
    while exc is not None:
        causes.append(exc)
        exc = exc.__cause__
    assert any(isinstance(e, ir.passes.PostconditionError) for e in causes)


def test_the_fixed_pass_keeps_its_invariants() -> None:
    model, overridable = _overridable_model()
    result = ConvAffineFoldingPass(overridable, check_invariants=True)(model)
    assert not result.modified
    model, _ = _overridable_model()
    assert ConvAffineFoldingPass(set(), check_invariants=True)(model).modified


def test_watched_tensors_are_restored() -> None:
    model, overridable = _overridable_model()
    (w,) = overridable
    tensor = w.const_value
    with pytest.raises(ir.passes.PostconditionError):
        _ReadOverridable(overridable, check_invariants=True)(model)
    assert w.const_value is tensor


def test_checks_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    model, overridable = _overridable_model()
    _RenameOutput(overridable, check_invariants=False)(model)
    monkeypatch.setattr(pass_module, "CHECK_INVARIANTS", False)
    _ReadOverridable(overridable)(model)  # the module default now says no
    monkeypatch.setattr(pass_module, "CHECK_INVARIANTS", True)
    with pytest.raises(ir.passes.PostconditionError):
        _ReadOverridable(overridable)(model)


def test_precondition_names_a_missing_overridable() -> None:
    model, _ = _overridable_model()
    c = model.graph.initializers["c"]  # an initializer, but no graph input
    with pytest.raises(ir.passes.PreconditionError, match="'c' is not a graph input"):
        DeadCodeEliminationPass({c}, check_invariants=True)(model)


class _RenamingProvider(ExecutionProvider):
    """Claims everything as one group; its own graph pass renames an output."""

    name = "RenamingExecutionProvider"

    def get_capability(self, graph: GraphContext) -> Capability:
        return Capability(claims=[Claim.group(graph.nodes)])

    def graph_passes(self) -> Sequence[Any]:
        def rename(model: ir.Model) -> None:
            model.graph.outputs[0].name = "renamed"

        return [rename]


def test_optimize_raises_a_provider_pass_breaking_outputs() -> None:
    model, overridable = _overridable_model()
    with pytest.raises(ir.passes.PostconditionError) as info:
        optimize(
            model, Level.ORT_ENABLE_ALL, None, overridable, [_RenamingProvider()],
            check_invariants=True,
        )  # fmt: skip
    assert "ProviderPasses changed the outputs of graph 'g' from ['y'] to ['renamed']" in str(
        info.value
    )
    assert any("ProviderPasses" in note for note in getattr(info.value, "__notes__", []))


# -- fusion helpers ----------------------------------------------------------


def test_replace_removes_a_pattern_listed_in_any_order() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["t"], name="conv"),
        helper.make_node("Relu", ["t"], ["y"], name="relu"),
    ]
    inits = [_f32("w", np.ones((1, 1, 1, 1)))]
    model = load_model(make_model(nodes, [fvi("x", [1, 1, 2, 2])], [fvi("y", None)], inits))
    conv, relu = list(model.graph)
    ctx = FusionContext(model, model.graph, set())
    fused = ir.Node("com.ortcore", "FusedConv", list(conv.inputs), name="f", num_outputs=1)
    ctx.replace([relu, conv], fused, [(relu.outputs[0], fused.outputs[0])], at=relu)
    assert [n.op_type for n in model.graph] == ["FusedConv"]
    assert [o.name for o in model.graph.outputs] == ["y"]
