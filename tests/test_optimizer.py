"""Graph optimizations: identity/dropout elimination, constant folding, dead code."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.model import load_model
from ortcore.optimizer import eliminate_identities, remove_dead_code

from .conftest import fvi, make_model, no_fallback

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
W = np.array([[0.5, 2.0, -1.0], [3.0, -0.25, 4.0]], np.float32)
Level = ortcore.GraphOptimizationLevel


def _options(level: Level, fallback: bool = False) -> ortcore.SessionOptions:
    so = ortcore.SessionOptions() if fallback else no_fallback()
    so.graph_optimization_level = level
    return so


def _identity_dropout_model() -> bytes:
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="add"),
        helper.make_node("Identity", ["a"], ["b"], name="ident"),
        helper.make_node("Dropout", ["b"], ["c"], name="drop"),
        helper.make_node("Mul", ["c", "x"], ["t"], name="mul"),
        helper.make_node("Identity", ["t"], ["y"], name="ident_out"),
    ]
    return make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])


def _ops(sess: ortcore.InferenceSession) -> list[str]:
    return sorted(r.op_type for r in sess.get_partition().nodes)


def test_identity_and_dropout_removed_at_basic_level() -> None:
    for level in (Level.ORT_ENABLE_BASIC, Level.ORT_ENABLE_EXTENDED, Level.ORT_ENABLE_ALL):
        sess = ortcore.InferenceSession(
            _identity_dropout_model(), _options(level), providers=["mini"]
        )
        assert _ops(sess) == ["Add", "Mul"]
        assert [o.name for o in sess.get_outputs()] == ["y"]
        np.testing.assert_allclose(sess.run(None, {"x": X})[0], (X + X) * X)
        np.testing.assert_allclose(sess.run(["y"], {"x": X})[0], (X + X) * X)


def test_identity_and_dropout_kept_when_disabled(cpu: str) -> None:
    sess = ortcore.InferenceSession(
        _identity_dropout_model(), _options(Level.ORT_DISABLE_ALL, True), providers=["mini"]
    )
    assert _ops(sess) == ["Add", "Dropout", "Identity", "Identity", "Mul"]
    where = {r.op_type: r.provider for r in sess.get_partition().nodes}
    assert where["Dropout"] == cpu
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], (X + X) * X)


def test_disabled_level_without_kernels_fails() -> None:
    # Without the optimizer, mini alone cannot run Identity: proves it was kept.
    with pytest.raises(ortcore.NotImplementedOp, match="Identity"):
        ortcore.InferenceSession(
            _identity_dropout_model(), _options(Level.ORT_DISABLE_ALL), providers=["mini"]
        )


def test_identity_from_input_to_output_is_kept() -> None:
    nodes = [
        helper.make_node("Identity", ["x"], ["y"], name="ident"),
        helper.make_node("Neg", ["x"], ["z"], name="neg"),
    ]
    model = load_model(make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("z", [2, 3])]))
    assert eliminate_identities(model.graph, {"": 17}) == 0
    assert [o.name for o in model.graph.outputs] == ["y", "z"]
    assert [n.op_type for n in model.graph] == ["Identity", "Neg"]


def test_identity_between_outputs_is_kept() -> None:
    nodes = [
        helper.make_node("Neg", ["x"], ["z"], name="neg"),
        helper.make_node("Identity", ["z"], ["y"], name="ident"),
    ]
    model = load_model(make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("z", [2, 3])]))
    eliminate_identities(model.graph, {"": 17})
    assert [o.name for o in model.graph.outputs] == ["y", "z"]
    assert len({id(o) for o in model.graph.outputs}) == 2


def test_training_dropout_and_read_mask_are_kept() -> None:
    nodes = [
        helper.make_node("Dropout", ["x", "r", "train"], ["a"], name="train_drop"),
        helper.make_node("Dropout", ["x"], ["b", "mask"], name="mask_drop"),
        helper.make_node("Cast", ["mask"], ["m"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Dropout", ["n"], ["c", "unused_mask"], name="plain_drop"),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.5, np.float32), "r"),
        numpy_helper.from_array(np.array(True), "train"),
    ]
    shape = [2, 3]
    data = make_model(
        nodes,
        [fvi("x", shape)],
        [fvi("a", shape), fvi("b", shape), fvi("m", shape), fvi("c", shape)],
        inits,
    )
    model = load_model(data)
    assert eliminate_identities(model.graph, {"": 17}) == 1
    assert sorted(n.name for n in model.graph) == ["cast", "mask_drop", "neg", "train_drop"]
    assert [o.name for o in model.graph.outputs] == ["a", "b", "m", "c"]


def test_dead_code_removed() -> None:
    nodes = [
        helper.make_node("Neg", ["x"], ["y"], name="live"),
        helper.make_node("Relu", ["x"], ["d0"], name="dead0"),
        helper.make_node("Neg", ["d0"], ["d1"], name="dead1"),
        helper.make_node("Add", ["x", "unused_w"], ["d2"], name="dead2"),
    ]
    inits = [numpy_helper.from_array(W, "unused_w")]
    model = load_model(make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], inits))
    assert remove_dead_code(model.graph) == 3
    assert [n.name for n in model.graph] == ["live"]
    assert "unused_w" not in model.graph.initializers
    sess = ortcore.InferenceSession(
        make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], inits),
        _options(Level.ORT_ENABLE_BASIC),
        providers=["mini"],
    )
    assert [r.node for r in sess.get_partition().nodes] == ["live"]


def _constant_chain() -> bytes:
    c = numpy_helper.from_array(W, "cval")
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=c),
        helper.make_node("Add", ["c", "c"], ["c2"], name="fold_add"),
        helper.make_node("Relu", ["c2"], ["c3"], name="fold_relu"),
        helper.make_node("Add", ["x", "c3"], ["y"], name="live_add"),
    ]
    return make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])


def test_constant_folding_removes_nodes(cpu: str) -> None:
    want = X + np.maximum(W + W, 0)
    folded = ortcore.InferenceSession(
        _constant_chain(), _options(Level.ORT_ENABLE_BASIC, True), providers=["mini"]
    )
    assert [r.node for r in folded.get_partition().nodes] == ["live_add"]
    assert folded.get_partition().nodes[0].provider == "MiniExecutionProvider"
    np.testing.assert_allclose(folded.run(None, {"x": X})[0], want)
    kept = ortcore.InferenceSession(
        _constant_chain(), _options(Level.ORT_DISABLE_ALL, True), providers=["mini"]
    )
    assert len(kept.get_partition().nodes) == 4
    np.testing.assert_allclose(kept.run(None, {"x": X})[0], want)


def test_no_folding_without_cpu_provider() -> None:
    nodes = [
        helper.make_node("Add", ["w", "w"], ["w2"], name="const_add"),
        helper.make_node("Add", ["x", "w2"], ["y"], name="live_add"),
    ]
    data = make_model(
        nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], [numpy_helper.from_array(W, "w")]
    )
    sess = ortcore.InferenceSession(data, _options(Level.ORT_ENABLE_ALL), providers=["mini"])
    assert len(sess.get_partition().nodes) == 2
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], X + W + W)


def test_fully_constant_output_keeps_its_name(cpu: str) -> None:
    c = numpy_helper.from_array(W, "cval")
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=c),
        helper.make_node("Neg", ["c"], ["k"], name="neg_const"),
        helper.make_node("Add", ["x", "x"], ["y"], name="add"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("k", [2, 3])])
    sess = ortcore.InferenceSession(
        data, _options(Level.ORT_ENABLE_BASIC, True), providers=["mini"]
    )
    assert [o.name for o in sess.get_outputs()] == ["y", "k"]
    assert [r.node for r in sess.get_partition().nodes] == ["add"]
    y, k = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, X + X)
    np.testing.assert_allclose(k, -W)
    (k_only,) = sess.run(["k"], {"x": X})
    np.testing.assert_allclose(k_only, -W)


def test_overridable_initializer_not_folded(cpu: str) -> None:
    nodes = [
        helper.make_node("Add", ["w", "w"], ["w2"], name="const_add"),
        helper.make_node("Add", ["x", "w2"], ["y"], name="live_add"),
    ]
    data = make_model(
        nodes,
        [fvi("x", [2, 3]), fvi("w", [2, 3])],
        [fvi("y", [2, 3])],
        [numpy_helper.from_array(W, "w")],
    )
    sess = ortcore.InferenceSession(data, _options(Level.ORT_ENABLE_ALL, True), providers=["mini"])
    assert len(sess.get_partition().nodes) == 2
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], X + 2 * W)
    np.testing.assert_allclose(sess.run(None, {"x": X, "w": X})[0], 3 * X)


def test_graph_output_names_preserved_with_optimizations(cpu: str) -> None:
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="add"),
        helper.make_node("Identity", ["a"], ["out_a"], name="ident"),
        helper.make_node("Dropout", ["a"], ["out_b"], name="drop"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("out_a", [2, 3]), fvi("out_b", [2, 3])])
    sess = ortcore.InferenceSession(data, _options(Level.ORT_ENABLE_ALL, True), providers=["mini"])
    assert [o.name for o in sess.get_outputs()] == ["out_a", "out_b"]
    a, b = sess.run(None, {"x": X})
    np.testing.assert_allclose(a, X + X)
    np.testing.assert_allclose(b, X + X)
    (b_only,) = sess.run(["out_b"], {"x": X})
    np.testing.assert_allclose(b_only, X + X)
