"""No-op Cast/Reshape/Expand/Transpose elimination (basic level)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import ortcore
from ortcore.model import load_model
from ortcore.optimizer import eliminate_noops

from .conftest import compare_basic, fvi, i64, level_session, make_model, op_types

Level = ortcore.GraphOptimizationLevel
X = np.array([[1.5, -2.25, 3.0], [-4.0, 5.75, -6.5]], np.float32)
X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5


# -- Cast -------------------------------------------------------------------


def test_cast_to_own_dtype_is_removed(cpu: str) -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    plain, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(plain) == ["Cast", "Relu"]
    assert op_types(basic) == ["Relu"]


LOSSLESS = [
    (TensorProto.FLOAT, TensorProto.DOUBLE, X),
    (TensorProto.FLOAT16, TensorProto.FLOAT, X.astype(np.float16)),
    (TensorProto.FLOAT16, TensorProto.DOUBLE, X.astype(np.float16)),
    (
        TensorProto.INT32,
        TensorProto.INT64,
        np.array([[1, -2, 3], [2**31 - 1, -(2**31), 0]], np.int32),
    ),
    (TensorProto.INT8, TensorProto.INT16, np.array([[1, -2, 3], [127, -128, 0]], np.int8)),
    (TensorProto.UINT8, TensorProto.INT32, np.array([[1, 2, 3], [255, 128, 0]], np.uint8)),
    (TensorProto.UINT16, TensorProto.UINT64, np.array([[1, 2, 3], [65535, 128, 0]], np.uint16)),
    (TensorProto.BOOL, TensorProto.INT32, np.array([[True, False, True], [False, False, True]])),
]


@pytest.mark.parametrize(("elem", "wide", "x"), LOSSLESS)
def test_lossless_cast_round_trip_is_removed(elem: int, wide: int, x: np.ndarray, cpu: str) -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["w"], to=wide),
        helper.make_node("Cast", ["w"], ["n"], to=elem),
        helper.make_node("Transpose", ["n"], ["y"], perm=[1, 0]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3], elem)], [fvi("y", [3, 2], elem)])
    plain, basic = compare_basic(model, {"x": x}, cpu)
    assert op_types(plain) == ["Cast", "Cast", "Transpose"]
    assert op_types(basic) == ["Transpose"]


LOSSY = [
    (TensorProto.FLOAT, TensorProto.INT32, X),
    (TensorProto.FLOAT, TensorProto.FLOAT16, X + np.float32(1e-3)),
    (TensorProto.DOUBLE, TensorProto.FLOAT, X.astype(np.float64) + 1e-9),
    (TensorProto.INT64, TensorProto.INT32, np.array([[1, 2, 3], [2**40, -(2**33), 0]], np.int64)),
    (TensorProto.INT32, TensorProto.INT8, np.array([[1, -2, 3], [300, -5, 0]], np.int32)),
    (TensorProto.FLOAT, TensorProto.BOOL, X),
]


@pytest.mark.parametrize(("elem", "mid", "x"), LOSSY)
def test_lossy_cast_round_trip_is_kept(elem: int, mid: int, x: np.ndarray, cpu: str) -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["m"], to=mid),
        helper.make_node("Cast", ["m"], ["n"], to=elem),
        helper.make_node("Transpose", ["n"], ["y"], perm=[1, 0]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3], elem)], [fvi("y", [3, 2], elem)])
    _, basic = compare_basic(model, {"x": x}, cpu)
    assert op_types(basic) == ["Cast", "Cast", "Transpose"]
    assert not np.array_equal(basic.run(None, {"x": x})[0], x.T)  # the data shows the loss


def test_cast_round_trip_with_a_read_intermediate_keeps_the_first_cast(cpu: str) -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["w"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["w"], ["n"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["n"], ["y"]),
        helper.make_node("Neg", ["w"], ["z"]),
    ]
    model = make_model(
        nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("z", [2, 3], TensorProto.DOUBLE)]
    )
    _, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(basic) == ["Cast", "Neg", "Relu"]


def test_cast_round_trip_into_a_graph_output_keeps_the_name(cpu: str) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Cast", ["r"], ["w"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT),
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    _, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(basic) == ["Relu"]
    assert [o.name for o in basic.get_outputs()] == ["y"]
    (y,) = basic.run(["y"], {"x": X})
    np.testing.assert_array_equal(y, np.maximum(X, 0))


def test_cast_of_a_graph_input_into_a_graph_output_is_kept() -> None:
    """Bypassing would turn the graph output into the graph input."""
    nodes = [
        helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["w"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["w"], ["z"], to=TensorProto.FLOAT),
    ]
    model = load_model(make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("z", [2, 3])]))
    assert eliminate_noops(model.graph) == 0
    assert [o.name for o in model.graph.outputs] == ["y", "z"]
    assert len(list(model.graph)) == 3


# -- Reshape ----------------------------------------------------------------


@pytest.mark.parametrize("target", [[2, 3], [-1, 3], [0, 3], [2, -1], [0, 0]])
def test_reshape_to_own_shape_is_removed(target: list[int], cpu: str) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], [i64("s", target)])
    plain, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(plain) == ["Relu", "Reshape"]
    assert op_types(basic) == ["Relu"]


def test_reshape_of_reshape_reads_the_first_input(cpu: str) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["b"]),
        helper.make_node("Reshape", ["b", "s3"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    inits = [i64("s1", [6, 4]), i64("s2", [4, 6]), i64("s3", [3, -1])]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [3, 8])], inits)
    _, basic = compare_basic(model, {"x": X3}, cpu)
    assert op_types(basic) == ["Relu", "Reshape"]


def test_reshape_round_trip_is_removed(cpu: str) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "flat"], ["f"]),
        helper.make_node("Relu", ["f"], ["r"]),
        helper.make_node("Reshape", ["x", "flat"], ["g"]),
        helper.make_node("Reshape", ["g", "back"], ["h"]),
        helper.make_node("Add", ["h", "x"], ["y"]),
    ]
    inits = [i64("flat", [-1]), i64("back", [2, 3, 4])]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [2, 3, 4]), fvi("r", [24])], inits)
    _, basic = compare_basic(model, {"x": X3}, cpu)
    assert op_types(basic) == ["Add", "Relu", "Reshape"]


def test_reshape_chain_with_a_zero_is_kept(cpu: str) -> None:
    """The 0 copies a dim of the first Reshape's output, not of its input."""
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["b"]),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    inits = [i64("s1", [6, 4]), i64("s2", [0, 2, 2])]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [6, 2, 2])], inits)
    _, basic = compare_basic(model, {"x": X3}, cpu)
    assert op_types(basic) == ["Relu", "Reshape", "Reshape"]
    assert basic.run(None, {"x": X3})[0].shape == (6, 2, 2)


def test_reshape_chain_with_allowzero_reads_the_first_input(cpu: str) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["b"], allowzero=1),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    inits = [i64("s1", [6, 4]), i64("s2", [4, 6])]
    model = make_model(nodes, [fvi("x", [2, 3, 4])], [fvi("y", [4, 6])], inits)
    _, basic = compare_basic(model, {"x": X3}, cpu)
    assert op_types(basic) == ["Relu", "Reshape"]


def test_reshape_of_a_symbolic_shape_is_kept(cpu: str) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", ["N", 3])], [fvi("y", ["N", 3])], [i64("s", [-1, 3])])
    _, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(basic) == ["Relu", "Reshape"]


def test_reshape_with_an_overridable_target_is_kept(cpu: str) -> None:
    """A feed may replace the target: ``[2, 3]`` now, ``[3, 2]`` at run time."""
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model = make_model(
        nodes,
        [fvi("x", [2, 3]), fvi("s", [2], TensorProto.INT64)],
        [fvi("y", None)],
        [i64("s", [2, 3])],
    )
    basic = level_session(model, Level.ORT_ENABLE_BASIC, cpu)
    assert op_types(basic) == ["Relu", "Reshape"]
    (y,) = basic.run(None, {"x": X, "s": np.array([3, 2], np.int64)})
    np.testing.assert_array_equal(y, np.maximum(X, 0).reshape(3, 2))


# -- Expand -----------------------------------------------------------------


@pytest.mark.parametrize("target", [[2, 3], [1, 3], [3], [1], [2, 1]])
def test_expand_to_own_shape_is_removed(target: list[int], cpu: str) -> None:
    nodes = [
        helper.make_node("Expand", ["x", "s"], ["e"]),
        helper.make_node("Relu", ["e"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], [i64("s", target)])
    plain, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(plain) == ["Expand", "Relu"]
    assert op_types(basic) == ["Relu"]


@pytest.mark.parametrize("target", [[4, 2, 3], [1, 2, 3], [2, 2, 3]])
def test_expand_that_broadcasts_is_kept(target: list[int], cpu: str) -> None:
    nodes = [
        helper.make_node("Expand", ["x", "s"], ["e"]),
        helper.make_node("Relu", ["e"], ["y"]),
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", target)], [i64("s", target)])
    _, basic = compare_basic(model, {"x": X}, cpu)
    assert op_types(basic) == ["Expand", "Relu"]
    assert basic.run(None, {"x": X})[0].shape == tuple(target)


# -- Transpose --------------------------------------------------------------


def _transposes(perms: Sequence[Sequence[int] | None], extra_use: bool = False) -> bytes:
    nodes = []
    prev = "x"
    for i, perm in enumerate(perms):
        kw: dict[str, Any] = {} if perm is None else {"perm": list(perm)}
        nodes.append(helper.make_node("Transpose", [prev], [f"t{i}"], **kw))
        prev = f"t{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"]))
    outputs = [fvi("y", None)]
    if extra_use:
        nodes.append(helper.make_node("Neg", ["t0"], ["z"]))
        outputs.append(fvi("z", None))
    return make_model(nodes, [fvi("x", [2, 3, 4])], outputs)


@pytest.mark.parametrize(
    ("perms", "left"),
    [
        ([[0, 1, 2]], 0),
        ([[1, 0, 2], [1, 0, 2]], 0),
        ([[1, 2, 0], [2, 0, 1]], 0),
        ([None, None], 0),
        ([[1, 2, 0], [1, 2, 0]], 1),
        ([[2, 0, 1], [0, 2, 1], [1, 0, 2]], 1),
        ([[1, 2, 0], [1, 2, 0], [1, 2, 0]], 0),
    ],
)
def test_transposes_compose(perms: list[list[int] | None], left: int, cpu: str) -> None:
    plain, basic = compare_basic(_transposes(perms), {"x": X3}, cpu)
    assert op_types(plain).count("Transpose") == len(perms)
    assert op_types(basic) == ["Relu", *["Transpose"] * left]


def test_transpose_pair_with_a_read_intermediate(cpu: str) -> None:
    # Composing to the identity: the second goes, the first stays for its reader.
    _, basic = compare_basic(_transposes([[1, 0, 2], [1, 0, 2]], extra_use=True), {"x": X3}, cpu)
    assert op_types(basic) == ["Neg", "Relu", "Transpose"]
    # Not the identity: nothing is gained by composing, both stay.
    _, basic = compare_basic(_transposes([[1, 2, 0], [1, 2, 0]], extra_use=True), {"x": X3}, cpu)
    assert op_types(basic) == ["Neg", "Relu", "Transpose", "Transpose"]


def test_transpose_pair_between_graph_input_and_output_is_kept() -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["y"], perm=[1, 0]),
    ]
    model = load_model(make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])]))
    assert eliminate_noops(model.graph) == 0
    assert [o.name for o in model.graph.outputs] == ["y"]
    assert model.graph.outputs[0] is not model.graph.inputs[0]


def test_noops_into_graph_outputs_keep_their_names(cpu: str) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["out_t"], perm=[1, 0]),
        helper.make_node("Reshape", ["r", "s"], ["out_r"]),
        helper.make_node("Expand", ["r", "s"], ["out_e"]),
        helper.make_node("Cast", ["r"], ["out_c"], to=TensorProto.FLOAT),
    ]
    names = ["out_t", "out_r", "out_e", "out_c"]
    model = make_model(
        nodes, [fvi("x", [2, 3])], [fvi(n, [2, 3]) for n in names], [i64("s", [2, 3])]
    )
    _, basic = compare_basic(model, {"x": X}, cpu)
    # The first no-op in node order (the Transpose pair: the model's order is
    # kept) goes and the Relu's value takes its output's name; the others
    # would turn one graph output into another.
    assert [o.name for o in basic.get_outputs()] == names
    assert sorted(op_types(basic)) == ["Cast", "Expand", "Relu", "Reshape"]
    for name in names:
        (got,) = basic.run([name], {"x": X})
        np.testing.assert_array_equal(got, np.maximum(X, 0))


def test_subgraph_reads_follow_the_bypass(cpu: str) -> None:
    """An If branch reading a removed node's output (outer scope) reads its source."""
    then_g = helper.make_graph(
        [helper.make_node("Neg", ["c"], ["t_out"])], "then", [], [fvi("t_out", None)]
    )
    else_g = helper.make_graph(
        [helper.make_node("Relu", ["tt"], ["e_out"])], "else", [], [fvi("e_out", None)]
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Cast", ["r"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["c"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["tt"], perm=[1, 0]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    model = make_model(
        nodes, [fvi("x", [2, 3]), fvi("cond", [], TensorProto.BOOL)], [fvi("y", [2, 3])]
    )
    for cond, want in ((True, -np.maximum(X, 0)), (False, np.maximum(X, 0))):
        _, basic = compare_basic(model, {"x": X, "cond": np.array(cond)}, cpu)
        assert op_types(basic) == ["If", "Neg", "Relu", "Relu"]
        np.testing.assert_array_equal(basic.run(None, {"x": X, "cond": np.array(cond)})[0], want)
