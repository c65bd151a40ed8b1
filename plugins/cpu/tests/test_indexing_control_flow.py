"""Control flow (If, Loop, Scan), sequence and optional kernels, run through
``ortcore.InferenceSession`` on the CPU provider and compared with
onnx.reference (onnxruntime for Scan-8, which the reference lacks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(3)


def _model(nodes: list, inputs: list, outputs: list, opset: int, inits: list | None = None) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _tv(name: str, elem: int, shape: list | None = None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _seq(name: str, elem: int = F) -> Any:
    return helper.make_value_info(
        name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None))
    )


def _equal(got: Any, want: Any) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _equal(g, w)
        return
    if want is None:
        assert got is None
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _check(model: Any, feeds: dict[str, Any], oracle: str = "reference") -> list[Any]:
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    got = sess.run(None, feeds)
    if oracle == "reference":
        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        import onnxruntime as ort

        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = s.run(None, feeds)
    _equal(list(got), list(want))
    return list(got)


@pytest.mark.parametrize("cond", [True, False])
def test_if_reads_outer_values(cond: bool) -> None:
    then_g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["t"])], "then", [],
                               [_tv("t", F, [3])])  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Mul", ["b", "b"], ["e"])], "else", [],
                               [_tv("e", F, [3])])  # fmt: skip
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    model = _model([node], [_tv("c", B, []), _tv("a", F, [3]), _tv("b", F, [3])],
                   [_tv("y", F, [3])], 13)  # fmt: skip
    _check(model, {"c": np.array(cond), "a": RNG.random(3, np.float32),
                   "b": RNG.random(3, np.float32)})  # fmt: skip


def _loop_model(m: bool, cond: bool, opset: int = 13) -> Any:
    """Loop accumulating x * i into a carried value and scanning it out;
    stops when the sum exceeds ``limit``."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Mul", ["x", "fi"], ["xi"]),
            helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
            helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["cond_out"]),
            helper.make_node("Identity", ["acc_out"], ["scan_out"]),
        ],
        "body",
        [_tv("i", I64, []), _tv("cond_in", B, []), _tv("acc_in", F, [2])],
        [_tv("cond_out", B, []), _tv("acc_out", F, [2]), _tv("scan_out", F, [2])],
    )
    ins = ["M" if m else "", "c" if cond else "", "acc0"]
    node = helper.make_node("Loop", ins, ["acc", "scans"], body=body)
    graph_in = [_tv("x", F, [2]), _tv("limit", F, []), _tv("acc0", F, [2])]
    graph_in += [_tv("M", I64, [])] if m else []
    graph_in += [_tv("c", B, [])] if cond else []
    return _model([node], graph_in, [_tv("acc", F, [2]), _tv("scans", F, [None, 2])], opset)


@pytest.mark.parametrize(("m", "cond", "limit", "trips"),
                         [(True, False, 1e9, 5), (False, True, 20.0, 0), (True, True, 20.0, 9),
                          (True, True, 20.0, 3), (True, True, 20.0, 0)])  # fmt: skip
def test_loop(m: bool, cond: bool, limit: float, trips: int) -> None:
    feeds: dict[str, Any] = {"x": np.array([1.0, 2.0], np.float32),
                             "limit": np.array(limit, np.float32),
                             "acc0": np.zeros(2, np.float32)}  # fmt: skip
    if m:
        feeds["M"] = np.array(trips, np.int64)
    if cond:
        feeds["c"] = np.array(True)
    # onnx.reference mishandles an omitted cond and zero-trip scan outputs.
    _, scans = _check(_loop_model(m, cond), feeds, oracle="onnxruntime")
    if m and trips == 0:
        assert scans.shape == (0, 2)


def test_loop_sequence_carried() -> None:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Unsqueeze", ["fi", "zero"], ["v"]),
            helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"]),
        ],
        "body",
        [_tv("i", I64, []), _tv("cond_in", B, []), _seq("seq_in")],
        [_tv("cond_out", B, []), _seq("seq_out")],
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
        helper.make_node("Loop", ["M", ""], ["s"], body=body),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
        helper.make_node("SequenceLength", ["s"], ["n"]),
    ]
    nodes[1].input[1:] = ["", "s0"]
    zero = helper.make_tensor("zero", I64, [1], [0])
    model = _model(nodes, [_tv("M", I64, [])], [_tv("y", F, [None]), _tv("n", I64, [])], 13,
                   [zero])  # fmt: skip
    _check(model, {"M": np.array(4, np.int64)}, oracle="onnxruntime")


@pytest.mark.parametrize(("in_axes", "in_dirs", "out_axes", "out_dirs"),
                         [(None, None, None, None), ([1], [1], [0], [0]), ([0], [0], [-1], [1]),
                          ([-1], [0], [1], [1])])  # fmt: skip
def test_scan(in_axes: list | None, in_dirs: list | None, out_axes: list | None,
              out_dirs: list | None) -> None:  # fmt: skip
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "w"], ["y_t"])],
        "body",
        [_tv("s_in", F, [3]), _tv("x_t", F, [3])],
        [_tv("s_out", F, [3]), _tv("y_t", F, [3])],
    )  # fmt: skip
    attrs: dict[str, Any] = {"num_scan_inputs": 1}
    for k, v in (("scan_input_axes", in_axes), ("scan_input_directions", in_dirs),
                 ("scan_output_axes", out_axes), ("scan_output_directions", out_dirs)):  # fmt: skip
        if v is not None:
            attrs[k] = v
    node = helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, **attrs)
    shape = [4, 3] if (in_axes or [0])[0] == 0 else [3, 4]
    model = _model([node], [_tv("s0", F, [3]), _tv("xs", F, shape), _tv("w", F, [3])],
                   [_tv("s", F, [3]), _tv("ys", F, [None, None])], 16)  # fmt: skip
    # onnx.reference supports only axis 0 and forward directions.
    _check(model, {"s0": RNG.random(3, np.float32), "xs": RNG.random(shape, np.float32),
                   "w": RNG.random(3, np.float32)}, oracle="onnxruntime")  # fmt: skip


@pytest.mark.parametrize("lens", [None, [3, 1]])
@pytest.mark.parametrize("direction", [0, 1])
def test_scan8_sequence_lens(lens: list | None, direction: int) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body",
        [_tv("s_in", F, [2]), _tv("x_t", F, [2])],
        [_tv("s_out", F, [2]), _tv("y_t", F, [2])],
    )  # fmt: skip
    ins = ["" if lens is None else "L", "s0", "xs"]
    node = helper.make_node("Scan", ins, ["s", "ys"], body=body, num_scan_inputs=1,
                            directions=[direction])  # fmt: skip
    graph_in = [_tv("s0", F, [2, 2]), _tv("xs", F, [2, 3, 2])]
    graph_in += [] if lens is None else [_tv("L", I64, [2])]
    model = _model([node], graph_in, [_tv("s", F, [2, 2]), _tv("ys", F, [2, 3, 2])], 8)
    feeds = {"s0": RNG.random((2, 2), np.float32), "xs": RNG.random((2, 3, 2), np.float32)}
    if lens is not None:
        feeds["L"] = np.array(lens, np.int64)
    _check(model, feeds, oracle="onnxruntime")


def test_sequence_ops() -> None:
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "c", "p0"], ["s2"]),
        helper.make_node("SequenceInsert", ["s2", "a"], ["s3"]),
        helper.make_node("SequenceErase", ["s3", "pm1"], ["s4"]),
        helper.make_node("SequenceErase", ["s4"], ["s5"]),
        helper.make_node("SequenceAt", ["s4", "pm1"], ["last"]),
        helper.make_node("SequenceLength", ["s5"], ["n"]),
        helper.make_node("ConcatFromSequence", ["s5"], ["cat"], axis=-1),
        helper.make_node("ConcatFromSequence", ["s5"], ["stk"], axis=-1, new_axis=1),
    ]
    inits = [helper.make_tensor("p0", I64, [], [0]), helper.make_tensor("pm1", I64, [], [-1])]
    ins = [_tv(n, F, [2, 3]) for n in "abc"]
    outs = [_tv("last", F, [2, 3]), _tv("n", I64, []), _tv("cat", F, [2, None]),
            _tv("stk", F, [2, 3, None]), _seq("s4")]  # fmt: skip
    model = _model(nodes, ins, outs, 13, inits)
    _check(model, {n: RNG.random((2, 3), np.float32) for n in "abc"})


@pytest.mark.parametrize(("split", "keepdims", "axis"),
                         [(None, 1, 0), (None, 0, 1), (2, 1, 1), ([1, 3], 1, -1)])  # fmt: skip
def test_split_to_sequence(split: Any, keepdims: int, axis: int) -> None:
    ins = ["x"] if split is None else ["x", "sp"]
    node = helper.make_node("SplitToSequence", ins, ["s"], axis=axis, keepdims=keepdims)
    inits = [] if split is None else [helper.make_tensor(
        "sp", I64, [] if isinstance(split, int) else [len(split)],
        [split] if isinstance(split, int) else split)]  # fmt: skip
    model = _model([node], [_tv("x", F, [3, 4])], [_seq("s")], 13, inits)
    _check(model, {"x": RNG.random((3, 4), np.float32)})


def test_sequence_map() -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["e", "t"], ["o"]), helper.make_node("Shape", ["e"], ["sh"])],
        "body", [_tv("e", F, None), _tv("t", F, None)], [_tv("o", F, None), _tv("sh", I64, None)],
    )  # fmt: skip
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
        helper.make_node("SequenceMap", ["s", "t"], ["os", "shapes"], body=body),
    ]
    model = _model(nodes, [_tv("x", F, [3, 2]), _tv("t", F, [1, 2])],
                   [_seq("os"), _seq("shapes", I64)], 17)  # fmt: skip
    _check(model, {"x": RNG.random((3, 2), np.float32), "t": RNG.random((1, 2), np.float32)})


@pytest.mark.parametrize("empty", [False, True])
def test_optional(empty: bool) -> None:
    nodes = [
        helper.make_node("Optional", [] if empty else ["x"], ["o"],
                         **({"type": helper.make_tensor_type_proto(F, [2])} if empty else {})),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
        helper.make_node("OptionalHasElement", ["x"], ["has_plain"]),
    ]  # fmt: skip
    outs = [_tv("has", B, []), _tv("has_plain", B, [])]
    if not empty:
        nodes.append(helper.make_node("OptionalGetElement", ["o"], ["v"]))
        outs.append(_tv("v", F, [2]))
    model = _model(nodes, [_tv("x", F, [2])], outs, 18)
    # onnx.reference wraps OptionalGetElement's value in a list and calls an
    # empty Optional non-empty.
    _check(model, {"x": RNG.random(2, np.float32)}, oracle="onnxruntime")
