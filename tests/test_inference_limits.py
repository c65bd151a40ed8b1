"""Shape inference's data propagation, bounded: tiny models that would make
onnx allocate without bound load quickly, ordinary models keep their shapes.

Each hostile model is built at two sizes. Small, it must still be inferred
with data propagation, to the very shapes onnx's one-pass inference gives
(the bound is not a refusal of the pattern). Large, :func:`plan_data_propagation`
must refuse it naming the node, checked in this process on the inference
*without* data propagation only; and the session must be created (or refused
with an ``InvalidGraph``) quickly in a child process under a 2 GiB address
space limit, so that a regression fails a test instead of killing pytest
(there, onnx's ``std::bad_alloc`` would surface as an ``InvalidGraph``: the
sessions must be created, with a small peak).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ortcore import data_propagation
from ortcore import model as ortcore_model
from ortcore.data_propagation import (
    CHECKED_ONNX,
    DATA_PROPAGATION_BUDGET,
    MAX_SHAPE_DATA,
    PROPAGATED_OPS,
    plan_data_propagation,
)

F, I64 = TensorProto.FLOAT, TensorProto.INT64
OPSET = 18


def _vi(name: str, shape: Any, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _i64(name: str, values: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str | tuple[str, int]],
    inits: list[onnx.TensorProto] | None = None,
    value_info: list[onnx.ValueInfoProto] | None = None,
    functions: list[onnx.FunctionProto] | None = None,
    opsets: list[onnx.OperatorSetIdProto] | None = None,
) -> onnx.ModelProto:
    typed = [(o, F) if isinstance(o, str) else o for o in outputs]
    graph = helper.make_graph(
        nodes, "g", inputs, [_vi(o, None, e) for o, e in typed], inits or [], value_info=value_info
    )
    return helper.make_model(
        graph,
        opset_imports=opsets or [helper.make_opsetid("", OPSET)],
        functions=functions or [],
        ir_version=8,
    )


def _node(op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=f"{op}_{outputs[0]}", **attrs)


# -- hostile models, by the size n of the vector they make ---------------------


def _binary(op: str, elem: int) -> Callable[[int], onnx.ModelProto]:
    def build(n: int) -> onnx.ModelProto:
        return _model([_node(op, ["x", "x"], ["y"])], [_vi("x", [n], elem)], [("y", elem)])

    return build


def _concat_pieces(n: int) -> onnx.ModelProto:
    pieces = 1000
    node = _node("Concat", ["p"] * pieces, ["y"], axis=0)
    return _model([node], [_vi("p", [max(n // pieces, 1)], I64)], [("y", I64)])


def _gather(n: int) -> onnx.ModelProto:
    node = _node("Gather", ["x", "i"], ["y"], axis=0)
    return _model([node], [_vi("x", [n], I64)], [("y", I64)], [_i64("i", [0])])


def _slice(n: int) -> onnx.ModelProto:
    node = _node("Slice", ["x", "s", "e"], ["y"])
    return _model([node], [_vi("x", [n])], ["y"], [_i64("s", [0]), _i64("e", [1])])


def _cast_chain(n: int) -> onnx.ModelProto:
    # Each vector stays short; the copies, one a node, add up.
    count = 2000
    nodes = [_node("Cast", [f"v{i}"], [f"v{i + 1}"], to=F) for i in range(count)]
    return _model(nodes, [_vi("v0", [max(n // count, 1)])], [f"v{count}"])


def _declared_value_info(n: int) -> onnx.ModelProto:
    nodes = [_node("Relu", ["x"], ["t"]), _node("Add", ["t", "t"], ["y"])]
    return _model(nodes, [_vi("x", None)], ["y"], value_info=[_vi("t", [n])])


def _declared_output(n: int) -> onnx.ModelProto:
    nodes = [_node("Relu", ["x"], ["t"]), _node("Cast", ["t"], ["y"], to=F)]
    m = _model(nodes, [_vi("x", None)], ["y"])
    m.graph.output.insert(0, _vi("t", [n]))
    return m


def _tile(n: int) -> onnx.ModelProto:
    nodes = [_node("Tile", ["x", "r"], ["t"]), _node("Add", ["t", "t"], ["y"])]
    return _model(nodes, [_vi("x", [1])], ["y"], [_i64("r", [n])])


def _expand(n: int) -> onnx.ModelProto:
    nodes = [_node("Expand", ["x", "s"], ["t"]), _node("Mul", ["t", "t"], ["y"])]
    return _model(nodes, [_vi("x", [1])], ["y"], [_i64("s", [n])])


def _range(n: int) -> onnx.ModelProto:
    # A limit of 3e8 int64s is past constant folding's 1 GiB: nothing folds.
    nodes = [_node("Range", ["a", "b", "d"], ["t"]), _node("Sub", ["t", "t"], ["y"])]
    return _model(nodes, [], [("y", I64)], [_i64("a", 0), _i64("b", 3 * n), _i64("d", 1)])


def _constant_of_shape(n: int) -> onnx.ModelProto:
    nodes = [_node("ConstantOfShape", ["s"], ["t"]), _node("Add", ["t", "t"], ["y"])]
    return _model(nodes, [], ["y"], [_i64("s", [3 * n])])


def _revealed(op: str) -> Callable[[int], onnx.ModelProto]:
    """A length that only data propagation knows: Shape(x)[0:1] of an
    x: float[3n, 1] (2-D: no vector of its own) makes a 1-D tensor (3e8
    floats: past the 1 GiB constant folding makes, which would fold it)."""

    def build(n: int) -> onnx.ModelProto:
        nodes = [
            _node("Shape", ["x"], ["s"]),
            _node("Slice", ["s", "zero", "one"], ["n"]),
        ]
        if op == "ConstantOfShape":
            nodes.append(_node("ConstantOfShape", ["n"], ["t"]))
        elif op == "Expand":
            nodes.append(_node("Expand", ["c", "n"], ["t"]))
        else:  # Reshape x to [-1], by a shape that is data but no constant
            nodes += [_node("Concat", ["minus"], ["flat"], axis=0)]
            nodes.append(_node("Reshape", ["x", "flat"], ["t"]))
        nodes.append(_node("Add", ["t", "t"], ["y"]))
        inits = [_i64("zero", [0]), _i64("one", [1]), _i64("minus", [-1])]
        inits.append(numpy_helper.from_array(np.ones(1, np.float32), "c"))
        return _model(nodes, [_vi("x", [3 * n, 1])], ["y"], inits)

    return build


def _revealed_in_a_branch(n: int) -> onnx.ModelProto:
    """The revealed vector made and read inside an If's branch."""
    then = helper.make_graph(
        [_node("ConstantOfShape", ["n"], ["t"]), _node("Add", ["t", "t"], ["a"])],
        "then",
        [],
        [_vi("a", None)],
    )
    other = helper.make_graph([_node("Identity", ["x"], ["b"])], "else", [], [_vi("b", None)])
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Slice", ["s", "zero", "one"], ["n"]),
        _node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
    ]
    inits = [_i64("zero", [0]), _i64("one", [1])]
    inputs = [_vi("cond", [], TensorProto.BOOL), _vi("x", [3 * n, 1])]
    return _model(nodes, inputs, ["y"], inits)


def _revealed_through(ops: list[str], square: bool) -> Callable[[int], onnx.ModelProto]:
    """A revealed 2-D tensor, ConstantOfShape of Shape(x) with x: float[k, k]
    (k*k about 3n) or float[3n, 1], made 1-D by ``ops`` (taking constants as
    extra inputs)."""

    def build(n: int) -> onnx.ModelProto:
        k = int((3 * n) ** 0.5) + 1
        shape = [k, k] if square else [3 * n, 1]
        nodes = [_node("Shape", ["x"], ["s"]), _node("ConstantOfShape", ["s"], ["t0"])]
        for i, op in enumerate(ops):
            extra = {"Reshape": ["minus"], "ReduceSum": ["axis"]}.get(op, [])
            attrs = {"ReduceSum": {"keepdims": 0}, "Cast": {"to": F}}.get(op, {})
            nodes.append(_node(op, [f"t{i}", *extra], [f"t{i + 1}"], **attrs))
        nodes.append(_node("Add", [f"t{len(ops)}", f"t{len(ops)}"], ["y"]))
        inits = [_i64("minus", [-1]), _i64("axis", [1])]
        return _model(nodes, [_vi("x", shape)], ["y"], inits)

    return build


def _revealed_resize(n: int) -> onnx.ModelProto:
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Slice", ["s", "zero", "one"], ["n"]),
        _node("Resize", ["c", "", "", "n"], ["t"]),
        _node("Add", ["t", "t"], ["y"]),
    ]
    inits = [_i64("zero", [0]), _i64("one", [1])]
    inits.append(numpy_helper.from_array(np.ones(1, np.float32), "c"))
    return _model(nodes, [_vi("x", [3 * n, 1])], ["y"], inits)


def _long_shape(n: int) -> onnx.ModelProto:
    """Propagated data read as a shape makes a tensor of that rank, which
    every later node copies: a rank bomb (1000 Relus) that only data
    propagation makes."""
    length = max(n // 1000, 1)
    nodes = [_node("Cast", ["v"], ["s"], to=I64), _node("Reshape", ["x", "s"], ["r0"])]
    nodes += [_node("Relu", [f"r{i}"], [f"r{i + 1}"]) for i in range(1000)]
    return _model(nodes, [_vi("x", None), _vi("v", [length], I64)], ["r1000"])


def _if_branch(n: int) -> onnx.ModelProto:
    then = helper.make_graph([_node("Add", ["x", "x"], ["a"])], "then", [], [_vi("a", None)])
    other = helper.make_graph([_node("Identity", ["x"], ["b"])], "else", [], [_vi("b", None)])
    node = _node("If", ["cond"], ["y"], then_branch=then, else_branch=other)
    return _model([node], [_vi("cond", [], TensorProto.BOOL), _vi("x", [n])], ["y"])


def _loop_body(n: int) -> onnx.ModelProto:
    body = helper.make_graph(
        [_node("Identity", ["c"], ["c_out"]), _node("Mul", ["x", "x"], ["s"])],
        "body",
        [_vi("i", [], I64), _vi("c", [], TensorProto.BOOL)],
        [_vi("c_out", [], TensorProto.BOOL), _vi("s", None)],
    )
    node = _node("Loop", ["m", ""], ["y"], body=body)
    return _model([node], [_vi("m", [], I64), _vi("x", [n])], ["y"])


def _scan_body(n: int) -> onnx.ModelProto:
    # The body's input is a row of x: float[2, n], 1-D of length n.
    body = helper.make_graph(
        [_node("Add", ["row", "row"], ["out"])], "body", [_vi("row", None)], [_vi("out", None)]
    )
    node = _node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1)
    return _model([node], [_vi("x", [2, n])], ["y"])


def _function(opset: int) -> Callable[[int], onnx.ModelProto]:
    """A model-local function whose body adds its input to itself; at the
    model's opset it is inlined, at another one the inliner keeps it."""

    def build(n: int) -> onnx.ModelProto:
        body = [helper.make_node("Add", ["a", "a"], ["b"])]
        f = helper.make_function(
            "local", "Twice", ["a"], ["b"], body, [helper.make_opsetid("", opset)]
        )
        opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)]
        node = helper.make_node("Twice", ["x"], ["y"], domain="local", name="call")
        return _model([node], [_vi("x", [n])], ["y"], functions=[f], opsets=opsets)

    return build


def _function_op_body(n: int) -> onnx.ModelProto:
    # MeanVarianceNormalization is inferred through its function body (Sub, Mul, ...).
    node = _node("MeanVarianceNormalization", ["x"], ["y"], axes=[0])
    return _model([node], [_vi("x", [n])], ["y"])


BOMBS: dict[str, Callable[[int], onnx.ModelProto]] = {
    "add": _binary("Add", F),
    "sub_int64": _binary("Sub", I64),
    "mul": _binary("Mul", F),
    "concat_pieces": _concat_pieces,
    "gather": _gather,
    "slice": _slice,
    "cast_chain": _cast_chain,
    "declared_value_info": _declared_value_info,
    "declared_output": _declared_output,
    "tile": _tile,
    "expand": _expand,
    "range": _range,
    "constant_of_shape": _constant_of_shape,
    "revealed_constant_of_shape": _revealed("ConstantOfShape"),
    "revealed_expand": _revealed("Expand"),
    "revealed_reshape": _revealed("Reshape"),
    "revealed_resize": _revealed_resize,
    "revealed_in_a_branch": _revealed_in_a_branch,
    "revealed_flattened": _revealed_through(["Relu", "Reshape", "Cast"], square=True),
    "revealed_reduced": _revealed_through(["Neg", "ReduceSum"], square=False),
    "long_shape": _long_shape,
    "if_branch": _if_branch,
    "loop_body": _loop_body,
    "scan_body": _scan_body,
    "function_inlined": _function(OPSET),
    "function_kept": _function(OPSET - 1),
    "function_op_body": _function_op_body,
}
LARGE = 100_000_000  # about 14 GB of propagated data for a one-node bomb
SMALL = 8


def _one_pass(model: onnx.ModelProto) -> bytes:
    """What ortcore inferred before: one pass with data propagation."""
    return onnx.shape_inference.infer_shapes(
        model, check_type=False, strict_mode=True, data_prop=True
    ).SerializeToString(deterministic=True)


def _inferred(model: onnx.ModelProto) -> bytes:
    return ortcore_model.infer_shapes(model).SerializeToString(deterministic=True)


def _plan(model: onnx.ModelProto) -> Any:
    # Inference without data propagation only: safe at any size.
    model = ortcore_model.inline_functions(model, None, None)
    return plan_data_propagation(ortcore_model._infer(model, data_prop=False))


@pytest.mark.parametrize("case", sorted(set(BOMBS) - {"function_kept"}))
def test_small_versions_are_propagated_to_the_same_shapes(case: str) -> None:
    model = ortcore_model.inline_functions(BOMBS[case](SMALL), None, None)
    verdict = _plan(model)
    assert verdict.propagate, verdict
    assert verdict.elements <= DATA_PROPAGATION_BUDGET
    assert _inferred(model) == _one_pass(model)


@pytest.mark.parametrize("case", sorted(BOMBS))
def test_large_versions_are_not_propagated_and_the_reason_names_the_node(case: str) -> None:
    verdict = _plan(BOMBS[case](LARGE))
    assert not verdict.propagate
    assert " node '" in verdict.reason, verdict.reason


def test_the_kept_function_is_named() -> None:
    reason = _plan(_function(OPSET - 1)(SMALL)).reason
    assert "model-local function local:Twice" in reason, reason


def test_a_long_shape_is_named_with_the_limit() -> None:
    reason = _plan(_long_shape(LARGE)).reason
    assert "Reshape node 'Reshape_r0' reads 's'" in reason, reason
    assert str(MAX_SHAPE_DATA) in reason, reason


def test_a_revealed_length_is_bounded_by_the_shape_it_comes_from() -> None:
    # x: float[24, 1] makes a 24-long vector: propagated.
    assert _plan(_revealed("ConstantOfShape")(8)).propagate
    # Past the budget, the reason names the op that reads the revealed vector.
    reason = _plan(_revealed("ConstantOfShape")(DATA_PROPAGATION_BUDGET)).reason
    assert "Add node 'Add_y', input 't'" in reason, reason


def test_skipped_propagation_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ortcore.model"):
        out = ortcore_model.infer_shapes(_binary("Add", F)(LARGE))
    assert "without data propagation" in caplog.text
    assert "Add node 'Add_y', input 'x'" in caplog.text
    # ...and the model is still inferred (without data, the shapes it can).
    assert out.graph.output[0].type.tensor_type.shape.dim[0].dim_value == LARGE


# -- ordinary models keep their shapes ------------------------------------------


def _reshape_of_computed_shape() -> onnx.ModelProto:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: [2, 3, 4] to [2, 12]."""
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Gather", ["s", "zero"], ["batch"], axis=0),
        _node("Unsqueeze", ["batch", "axes"], ["b1"]),
        _node("Concat", ["b1", "minus"], ["shape"], axis=0),
        _node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [_i64("zero", 0), _i64("axes", [0]), _i64("minus", [-1])]
    return _model(nodes, [_vi("x", [2, 3, 4])], ["y"], inits)


def _layer_norm_like() -> onnx.ModelProto:
    """onnx's LayerNormalization expansion: Size, Sub, ConstantOfShape of a
    rank, Concat and Reshape; the reduced shape's first dim needs data
    propagation (ConstantOfShape's values are not propagated)."""
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Size", ["s"], ["rank"]),
        _node("Sub", ["rank", "axis"], ["reduced"]),
        _node("ConstantOfShape", ["reduced"], ["ones"], value=_i64("v", [1])),
        _node("Slice", ["s", "zero", "axis"], ["prefix"]),
        _node("Concat", ["prefix", "ones"], ["target"], axis=0),
        _node("ReduceMean", ["x"], ["m"], axes=[1, 2], keepdims=0),
        _node("Reshape", ["m", "target"], ["y"]),
    ]
    inits = [_i64("axis", [1]), _i64("zero", [0])]
    return _model(nodes, [_vi("x", [2, 3, 4])], ["y"], inits)


def _shape_in_a_branch() -> onnx.ModelProto:
    """An If whose branch reshapes by a shape computed outside it."""
    then = helper.make_graph(
        [_node("Reshape", ["x", "shape"], ["a"])], "then", [], [_vi("a", None)]
    )
    other = helper.make_graph([_node("Flatten", ["x"], ["b"])], "else", [], [_vi("b", None)])
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Slice", ["s", "zero", "one"], ["head"]),
        _node("Concat", ["head", "minus"], ["shape"], axis=0),
        _node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
    ]
    inits = [_i64("zero", [0]), _i64("one", [1]), _i64("minus", [-1])]
    return _model(nodes, [_vi("cond", [], TensorProto.BOOL), _vi("x", [5, 2, 3])], ["y"], inits)


def _position_ids() -> onnx.ModelProto:
    """A torch export's position ids, Range(0, seq) of unknown length read by
    Unsqueeze, beside a head split by a computed shape: the vector does not
    descend from the Reshape, so the quick walk holds."""
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Gather", ["s", "one"], ["seq"], axis=0),
        _node("Range", ["zero", "seq", "one"], ["pos"]),
        _node("Unsqueeze", ["pos", "axes"], ["ids"]),
        _node("Slice", ["s", "zeros", "twos"], ["head"]),
        _node("Concat", ["head", "split"], ["shape"], axis=0),
        _node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axes", [0]), _i64("zeros", [0])]
    inits += [_i64("twos", [2]), _i64("split", [2, 2])]
    return _model(nodes, [_vi("x", ["batch", "seq", 4])], ["y", ("ids", I64)], inits)


def _expand_to_a_shape() -> onnx.ModelProto:
    nodes = [_node("Shape", ["x"], ["s"]), _node("Expand", ["c", "s"], ["y"])]
    inits = [numpy_helper.from_array(np.ones(1, np.float32), "c")]
    return _model(nodes, [_vi("x", [7, 5])], ["y"], inits)


# The shape of y (None: unknown); without data propagation the known dims
# would be unknown.
ORDINARY: dict[str, tuple[Callable[[], onnx.ModelProto], list[int | None]]] = {
    "reshape_of_computed_shape": (_reshape_of_computed_shape, [2, 12]),
    "layer_norm_like": (_layer_norm_like, [2, None, None]),
    "shape_in_a_branch": (_shape_in_a_branch, [5, 6]),
    "expand_to_a_shape": (_expand_to_a_shape, [7, 5]),
    "position_ids": (_position_ids, [None, None, 2, 2]),
}


@pytest.mark.parametrize("case", sorted(ORDINARY))
def test_models_that_need_data_propagation_keep_their_shapes(case: str) -> None:
    build, expected = ORDINARY[case]
    model = build()
    out = ortcore_model.infer_shapes(model)
    assert out.SerializeToString(deterministic=True) == _one_pass(model)
    y = next(o for o in out.graph.output if o.name == "y")
    dims = y.type.tensor_type.shape.dim
    assert [d.dim_value if d.HasField("dim_value") else None for d in dims] == expected


def test_weights_are_set_aside_and_put_back() -> None:
    """A model with 16 MiB of weights: inferred without copying them through
    onnx (twice, with data propagation), to the same model as one pass gives,
    and left as it was."""
    model = _reshape_of_computed_shape()
    weight = np.arange(1 << 22, dtype=np.float32).reshape(2048, 2048)
    model.graph.initializer.append(numpy_helper.from_array(weight, "w"))
    model.graph.initializer.append(_i64("table", np.arange(1 << 14)))  # int vectors stay
    model.graph.node.append(_node("MatMul", ["w", "w"], ["ww"]))
    model.graph.node.append(_node("Gather", ["table", "zero"], ["t0"], axis=0))
    before = model.SerializeToString(deterministic=True)
    aside = ortcore_model._set_aside_weights(model)
    assert [model.graph.initializer[i].name for i, _ in aside] == ["w"]
    ortcore_model._put_back_weights(model, aside)
    assert model.SerializeToString(deterministic=True) == before
    out = ortcore_model.infer_shapes(model)
    assert model.SerializeToString(deterministic=True) == before
    assert out.SerializeToString(deterministic=True) == _one_pass(model)
    assert np.array_equal(numpy_helper.to_array(out.graph.initializer[-2]), weight)


LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("path", sorted(LIGHT.glob("light_*.onnx")), ids=lambda p: p.stem)
def test_light_models_keep_their_shapes(path: Path) -> None:
    model = onnx.load(path)
    assert _inferred(model) == _one_pass(model)


def test_every_op_onnx_propagates_through_is_bounded() -> None:
    schemas = [
        s for s in onnx.defs.get_all_schemas_with_history() if s.has_data_propagation_function
    ]
    if tuple(int(p) for p in onnx.__version__.split(".")[:2]) <= CHECKED_ONNX:
        assert {s.domain for s in schemas} == {""}
        assert {s.name for s in schemas} == PROPAGATED_OPS
    else:  # a newer onnx: any op may read data as a shape, unknown propagators refuse
        assert not data_propagation._KNOWN_ONNX


# -- the large versions, loaded for real -------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    limit = 2 << 30  # a bomb that gets through dies here, not in the machine
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import ortcore
    for path in sys.argv[1:]:
        print(json.dumps({"start": path}), flush=True)
        t0 = time.perf_counter()
        try:
            ortcore.InferenceSession(path, providers=["CPUExecutionProvider"])
            out = {"error": None, "message": ""}
        except Exception as exc:
            out = {"error": type(exc).__name__, "message": str(exc)[:2000],
                   "invalid_graph": isinstance(exc, ortcore.errors.InvalidGraph)}
        # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so the
        # child would report the peak of the pytest process that started it.
        with open("/proc/self/status") as status:
            peak = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) / 1024
        out.update(path=path, seconds=time.perf_counter() - t0, peak_mb=peak)
        print(json.dumps(out), flush=True)
    """
)


def _load_in_children(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Create a session for each path; a child that dies is reported for the
    model it died on, and a new child goes on with the rest."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
    results: dict[str, dict[str, Any]] = {}
    todo = list(paths)
    while todo:
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD, *map(str, todo)],
                capture_output=True,
                text=True,
                timeout=120 + 20 * len(todo),
                env=env,
            )
            stdout, status, stderr = proc.stdout, f"status {proc.returncode}", proc.stderr
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
            status, stderr = "timed out", ""
        started = None
        for line in stdout.splitlines():
            record = json.loads(line)
            if "start" in record:
                started = record["start"]
            else:
                results[Path(record["path"]).stem] = record
                started = None
        done = {str(p) for p in paths if p.stem in results}
        if started is not None:
            results[Path(started).stem] = {"error": f"died ({status})", "message": stderr[-2000:]}
            done.add(started)
        todo = [p for p in todo if str(p) not in done]
        if started is None:
            break
    return results


@pytest.fixture(scope="module")
def bomb_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("dataprop_bombs")
    paths = []
    for name, build in BOMBS.items():
        path = folder / f"{name}.onnx"
        path.write_bytes(build(LARGE).SerializeToString())
        paths.append(path)
    return _load_in_children(paths)


@pytest.mark.parametrize("case", sorted(BOMBS))
def test_large_versions_load_quickly_in_a_small_address_space(
    case: str, bomb_results: dict[str, dict[str, Any]], cpu: str
) -> None:
    result = bomb_results[case]
    if case == "function_kept":
        # Past shape inference: ortcore runs no function the inliner kept.
        assert result["error"] == "NotImplementedOp", result
        assert "Twice" in result["message"], result
    else:
        # Not an InvalidGraph either: under the limit, onnx's bad_alloc would be one.
        assert result["error"] is None, result
    assert result["seconds"] < 30, result
    # The child's peak so far: every model before this one included.
    assert result["peak_mb"] < 1024, result
