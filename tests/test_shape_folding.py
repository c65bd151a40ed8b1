"""Shape folding: Shape/Size of static shapes become constants (basic level)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.model import load_model
from ortcore.optimizer import fold_shapes

from .conftest import compare_basic, fvi, i64, level_session, make_model, no_fallback, op_types

Level = ortcore.GraphOptimizationLevel
X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5


def _flatten_tail(x_shape: Sequence[int | str]) -> bytes:
    """``y = Reshape(x, [shape(x)[0], -1])`` spelled as exporters do."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "axes"], ["u"]),
        helper.make_node("Concat", ["u", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        i64("axes", [0]),
        i64("minus_one", [-1]),
    ]
    return make_model(nodes, [fvi("x", x_shape)], [fvi("y", None)], inits)


def test_static_shape_chain_folds_down_to_the_reshape(cpu: str) -> None:
    plain, basic = compare_basic(_flatten_tail([2, 3, 4]), {"x": X3}, cpu)
    assert op_types(plain) == ["Concat", "Gather", "Reshape", "Shape", "Unsqueeze"]
    assert op_types(basic) == ["Reshape"]
    assert basic.run(None, {"x": X3})[0].shape == (2, 12)


def test_symbolic_dim_keeps_the_chain(cpu: str) -> None:
    plain, basic = compare_basic(_flatten_tail(["N", 3, 4]), {"x": X3}, cpu)
    assert op_types(basic) == op_types(plain)
    x = np.ones((5, 3, 4), np.float32)
    assert basic.run(None, {"x": x})[0].shape == (5, 12)


def test_reshape_to_own_shape_through_shape_disappears(cpu: str) -> None:
    """Shape folding, then constant folding, then the second no-op pass."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "start", "end"], ["lead"]),
        helper.make_node("Concat", ["lead", "tail"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    inits = [i64("start", [0]), i64("end", [2]), i64("tail", [-1])]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [2, 3, 4])], inits)
    plain, basic = compare_basic(model, {"x": X3}, cpu)
    assert len(op_types(plain)) == 5
    assert op_types(basic) == ["Relu"]


def test_shape_start_end_fold_static_dims_only() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["full"]),
        helper.make_node("Shape", ["x"], ["tail"], start=1),
        helper.make_node("Shape", ["x"], ["mid"], start=-2, end=-1),
        helper.make_node("Shape", ["x"], ["head"], end=1),
        helper.make_node("Shape", ["x"], ["none"], start=3),
        helper.make_node("Shape", ["x"], ["clamped"], start=-10, end=10),
    ]
    outs = [fvi(n, None, TensorProto.INT64) for n in ["full", "tail", "mid", "head", "none"]]
    outs.append(fvi("clamped", None, TensorProto.INT64))
    model = load_model(make_model(nodes, [fvi("x", ["N", 3, 4])], outs))
    assert fold_shapes(model.graph) == 3
    assert [n.outputs[0].name for n in model.graph] == ["full", "head", "clamped"]
    consts = {v.name: v.const_value.numpy().tolist() for v in model.graph.outputs if v.const_value}
    assert consts == {"tail": [3, 4], "mid": [3], "none": []}
    assert [o.name for o in model.graph.outputs] == [
        "full",
        "tail",
        "mid",
        "head",
        "none",
        "clamped",
    ]


def test_shape_outputs_keep_names_and_values(cpu: str) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Shape", ["x"], ["tail"], start=1),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    outs = [fvi("y", ["N", 3, 4])] + [fvi(n, None, TensorProto.INT64) for n in ["s", "tail", "n"]]
    model = make_model(nodes, [fvi("x", ["N", 3, 4])], outs)
    _, basic = compare_basic(model, {"x": X3}, cpu)
    assert op_types(basic) == ["Relu", "Shape", "Size"]
    x = np.ones((7, 3, 4), np.float32)
    _, s, tail, n = basic.run(None, {"x": x})
    assert s.tolist() == [7, 3, 4]
    assert tail.tolist() == [3, 4]
    assert n.tolist() == 84
    (tail_only,) = basic.run(["tail"], {"x": x})
    assert tail_only.dtype == np.int64 and tail_only.tolist() == [3, 4]


def test_size_of_static_shape_folds(cpu: str) -> None:
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["x", "nf"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [2, 3, 4])])
    _, basic = compare_basic(model, {"x": X3}, cpu)
    assert op_types(basic) == ["Div"]
    np.testing.assert_allclose(basic.run(None, {"x": X3})[0], X3 / 24)


def test_fed_shape_other_than_the_static_one_is_rejected(cpu: str) -> None:
    """Folding relies on the session refusing feeds against declared dims."""
    _, basic = compare_basic(_flatten_tail([2, 3, 4]), {"x": X3}, cpu)
    assert op_types(basic) == ["Reshape"]
    with pytest.raises(ortcore.InvalidArgument, match="index: 0 Got: 3 Expected: 2"):
        basic.run(None, {"x": np.ones((3, 3, 4), np.float32)})
    with pytest.raises(ortcore.InvalidArgument, match="Invalid rank"):
        basic.run(None, {"x": np.ones((2, 12), np.float32)})


def test_shape_downstream_of_an_overridable_initializer_is_kept(cpu: str) -> None:
    """Shape inference reads the initializer ``s``; a feed may replace it."""
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Shape", ["r"], ["y"]),
        helper.make_node("Shape", ["x"], ["xs"]),
    ]
    model = make_model(
        nodes,
        [fvi("x", [2, 3, 4]), fvi("s", [2], TensorProto.INT64)],
        [fvi("y", None, TensorProto.INT64), fvi("xs", None, TensorProto.INT64)],
        [i64("s", [6, 4])],
    )
    basic = level_session(model, Level.ORT_ENABLE_BASIC, cpu)
    assert op_types(basic) == ["Reshape", "Shape"]  # Shape(x) folds: x's dims are checked
    y, xs = basic.run(None, {"x": X3})
    assert y.tolist() == [6, 4] and xs.tolist() == [2, 3, 4]
    y, _ = basic.run(None, {"x": X3, "s": np.array([4, 6], np.int64)})
    assert y.tolist() == [4, 6]


def test_shapes_inside_subgraphs_are_left_alone(cpu: str) -> None:
    def branch(name: str, op: str) -> object:
        return helper.make_graph(
            [helper.make_node(op, ["x"], [f"{name}_out"])],
            name,
            [],
            [fvi(f"{name}_out", None, TensorProto.INT64)],
        )

    nodes = [
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            then_branch=branch("then", "Shape"),
            else_branch=branch("else", "Size"),
        ),
        helper.make_node("Size", ["x"], ["n"]),
    ]
    model = make_model(
        nodes,
        [fvi("x", [2, 3, 4]), fvi("cond", [], TensorProto.BOOL)],
        [fvi("y", None, TensorProto.INT64), fvi("n", None, TensorProto.INT64)],
    )
    ir_model = load_model(model)
    assert fold_shapes(ir_model.graph) == 1  # the Size; the If's Shapes stay
    then_graph = ir_model.graph.node(0).attributes["then_branch"].value
    assert [n.op_type for n in then_graph] == ["Shape"]
    for cond, want in ((True, [2, 3, 4]), (False, 24)):
        _, basic = compare_basic(model, {"x": X3, "cond": np.array(cond)}, cpu)
        assert op_types(basic) == ["If", "Shape", "Size"]  # the subgraphs' nodes
        y, n = basic.run(None, {"x": X3, "cond": np.array(cond)})
        assert y.tolist() == want and n.tolist() == 24


def test_folded_shape_read_by_a_subgraph(cpu: str) -> None:
    then_g = helper.make_graph(
        [helper.make_node("Reshape", ["r", "s"], ["t_out"])], "then", [], [fvi("t_out", None)]
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e_out"])], "else", [], [fvi("e_out", None)]
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "flat"], ["r"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    model = make_model(
        nodes,
        [fvi("x", [2, 3, 4]), fvi("cond", [], TensorProto.BOOL)],
        [fvi("y", [2, 3, 4])],
        [i64("flat", [-1])],
    )
    for cond, want in ((True, X3), (False, -X3)):
        _, basic = compare_basic(model, {"x": X3, "cond": np.array(cond)}, cpu)
        assert op_types(basic) == ["If", "Neg", "Reshape", "Reshape"]
        np.testing.assert_array_equal(basic.run(None, {"x": X3, "cond": np.array(cond)})[0], want)


def test_shape_folding_needs_no_cpu_provider() -> None:
    """``Reshape(x, Shape(x))`` goes without constant folding: mini runs the rest."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [2, 3, 4])])
    so = no_fallback()
    so.graph_optimization_level = Level.ORT_ENABLE_BASIC
    sess = ortcore.InferenceSession(model, so, providers=["mini"])
    assert op_types(sess) == ["Relu"]
    np.testing.assert_array_equal(sess.run(None, {"x": X3})[0], np.maximum(X3, 0))
