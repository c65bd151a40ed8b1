"""Extended-level fusions: each pattern is fused, each counter-pattern is not,
and outputs are the same with optimizations on and off."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.optimizer import _run_provider_passes

L = ortcore.GraphOptimizationLevel
LEVELS = [L.ORT_DISABLE_ALL, L.ORT_ENABLE_BASIC, L.ORT_ENABLE_EXTENDED, L.ORT_ENABLE_ALL]
RNG = np.random.default_rng(0)


def _init(name: str, a: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, Sequence[int]],
    outputs: Sequence[str],
    inits: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
) -> bytes:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        list(inits),
    )  # fmt: skip
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)]
    ).SerializeToString()


def _run(
    model: bytes, feeds: dict[str, np.ndarray], level: L, tmp: Path, providers: Any = None
) -> tuple[list[np.ndarray], list[str]]:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = str(tmp / f"opt{int(level)}.onnx")
    sess = ortcore.InferenceSession(model, so, providers=providers or ["CPUExecutionProvider"])
    ops = [
        (f"{n.domain}:" if n.domain else "") + n.op_type
        for n in onnx.load(so.optimized_model_filepath).graph.node
    ]
    return sess.run(None, feeds), ops


def _check(model: bytes, feeds: dict[str, np.ndarray], tmp: Path, **kw: Any) -> list[str]:
    """Run at every level; outputs agree; return the ops at ORT_ENABLE_ALL.

    The optimized model is also reloaded and run (schemas of fused ops are
    known to onnx)."""
    want, _ = _run(model, feeds, L.ORT_DISABLE_ALL, tmp, **kw)
    ops: list[str] = []
    for level in LEVELS[1:]:
        got, ops = _run(model, feeds, level, tmp, **kw)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=str(level))
    reloaded, _ = _run(
        (tmp / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").read_bytes(), feeds, L.ORT_DISABLE_ALL, tmp
    )
    for g, w in zip(reloaded, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg="reloaded")
    return ops


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- Conv + activation -------------------------------------------------------

ACTS = [
    ("Relu", {}, []),
    ("LeakyRelu", {"alpha": 0.1}, []),
    ("Sigmoid", {}, []),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []),
    ("Tanh", {}, []),
    ("Clip", {}, ["lo", "hi"]),
]


def _act_node(op: str, attrs: dict[str, Any], extra: list[str], src: str) -> onnx.NodeProto:
    return helper.make_node(op, [src, *extra], ["y"], **attrs)


@pytest.mark.parametrize(("op", "attrs", "extra"), ACTS, ids=[a[0] for a in ACTS])
def test_conv_activation(cpu: str, tmp_path: Path, op: str, attrs: Any, extra: Any) -> None:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             _act_node(op, attrs, extra, "c")]  # fmt: skip
    inits = [_init("w", _x(4, 3, 3, 3)), _init("b", _x(4)), _init("lo", -0.5), _init("hi", 0.5)]
    ops = _check(_model(nodes, {"x": [1, 3, 6, 6]}, ["y"], inits), {"x": _x(1, 3, 6, 6)}, tmp_path)
    assert ops == ["com.ortcore:FusedConv"]


def test_conv_activation_not_fused_when_conv_output_is_read(cpu: str, tmp_path: Path) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, {"x": [1, 3, 5, 5]}, ["y", "c"], [_init("w", _x(2, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 5, 5)}, tmp_path)
    assert ops == ["Conv", "Relu"]


# -- BatchNormalization + activation: FusedBatchNorm --------------------------


def _bn_inits(c: int) -> list[onnx.TensorProto]:
    return [_init("s", _x(c)), _init("bb", _x(c)), _init("m", _x(c)),
            _init("v", np.abs(_x(c)) + 0.5), _init("lo", -0.5), _init("hi", 0.5)]  # fmt: skip


@pytest.mark.parametrize(("op", "attrs", "extra"), ACTS, ids=[a[0] for a in ACTS])
def test_batchnorm_activation(cpu: str, tmp_path: Path, op: str, attrs: Any, extra: Any) -> None:
    """A pre-activation block's BatchNormalization -> activation (DenseNet's)
    becomes one FusedBatchNorm."""
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"],
                              epsilon=1e-3),
             _act_node(op, attrs, extra, "n")]  # fmt: skip
    x = _x(2, 3, 5, 5)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    ops = _check(_model(nodes, {"x": [2, 3, 5, 5]}, ["y"], _bn_inits(3)), {"x": x}, tmp_path)
    assert ops == ["com.ortcore:FusedBatchNorm"]


def test_batchnorm_activation_left_alone(cpu: str, tmp_path: Path) -> None:
    """Not fused: a BatchNormalization whose output is read elsewhere too, one
    in training mode, and one after a Conv (folded into the Conv instead,
    the Relu then fused with the Conv)."""
    bn = helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"])
    read = _model([bn, helper.make_node("Relu", ["n"], ["y"])], {"x": [1, 3, 4, 4]}, ["y", "n"],
                  _bn_inits(3))  # fmt: skip
    assert _check(read, {"x": _x(1, 3, 4, 4)}, tmp_path) == ["BatchNormalization", "Relu"]
    train = helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n", "rm", "rv"],
                             training_mode=1)  # fmt: skip
    model = _model([train, helper.make_node("Relu", ["n"], ["y"])], {"x": [2, 3, 4, 4]}, ["y"],
                   _bn_inits(3))  # fmt: skip
    assert "com.ortcore:FusedBatchNorm" not in _check(model, {"x": _x(2, 3, 4, 4)}, tmp_path)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]  # fmt: skip
    model = _model(nodes, {"x": [1, 3, 5, 5]}, ["y"], [_init("w", _x(3, 3, 3, 3)), *_bn_inits(3)])
    assert _check(model, {"x": _x(1, 3, 5, 5)}, tmp_path) == ["com.ortcore:FusedConv"]


def test_fusion_needs_one_provider_for_the_pattern(cpu: str, tmp_path: Path) -> None:
    # Mini (listed first) has Relu but no Conv: the Relu goes to Mini, so the
    # pair is not one provider's pattern and stays as it is.
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, {"x": [1, 3, 5, 5]}, ["y"], [_init("w", _x(2, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 5, 5)}, tmp_path, providers=["mini", cpu])
    assert ops == ["Conv", "Relu"]


# -- Conv + Add (+ activation): FusedConvAdd ---------------------------------


@pytest.mark.parametrize(
    ("op", "attrs", "extra"), [*ACTS, ("", {}, [])], ids=[*(a[0] for a in ACTS), "none"]
)
@pytest.mark.parametrize("add", ["Add", "Add-swapped", "Sum"])
def test_conv_add_activation(
    cpu: str, tmp_path: Path, op: str, attrs: Any, extra: Any, add: str
) -> None:
    # the residual is another branch's output, as in ResNet's shortcut
    ins = ["z", "c"] if add == "Add-swapped" else ["c", "z"]
    nodes = [
        helper.make_node("Conv", ["x", "w2"], ["z"], strides=[2, 2]),
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node(add.split("-")[0], ins, ["s" if op else "y"]),
    ]
    if op:
        nodes.append(_act_node(op, attrs, extra, "s"))
    inits = [_init("w", _x(4, 3, 3, 3)), _init("b", _x(4)), _init("w2", _x(4, 3, 1, 1)),
             _init("lo", -0.5), _init("hi", 0.5)]  # fmt: skip
    ops = _check(_model(nodes, {"x": [2, 3, 7, 7]}, ["y"], inits), {"x": _x(2, 3, 7, 7)}, tmp_path)
    assert ops == ["Conv", "com.ortcore:FusedConvAdd"]


def test_conv_add_without_bias_and_a_graph_input_residual(cpu: str, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "z"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = _model(
        nodes, {"x": [1, 4, 5, 5], "z": [1, 6, 5, 5]}, ["y"], [_init("w", _x(6, 2, 3, 3))]
    )
    ops = _check(model, {"x": _x(1, 4, 5, 5), "z": _x(1, 6, 5, 5)}, tmp_path)
    assert ops == ["com.ortcore:FusedConvAdd"]


@pytest.mark.parametrize(
    "case", ["broadcast", "conv-read-twice", "sum-of-three", "dynamic-shape", "residual-is-conv"]
)
def test_conv_add_not_fused(cpu: str, tmp_path: Path, case: str) -> None:
    z_shape = [1, 2, 1, 1] if case == "broadcast" else [1, 2, 3, 3]
    x_shape: list[Any] = ["N", 3, 5, 5] if case == "dynamic-shape" else [1, 3, 5, 5]
    add_inputs = ["c", "z", "z"] if case == "sum-of-three" else ["c", "z"]
    if case == "residual-is-conv":
        add_inputs = ["c", "c"]
    add = "Sum" if case == "sum-of-three" else "Add"
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node(add, add_inputs, ["y"])]
    outputs = ["y", "c"] if case == "conv-read-twice" else ["y"]
    model = _model(nodes, {"x": x_shape, "z": z_shape}, outputs, [_init("w", _x(2, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 5, 5), "z": _x(*z_shape)}, tmp_path)
    assert "com.ortcore:FusedConvAdd" not in ops


# -- Concat of Convs: FusedConvConcat chains ---------------------------------


def _fire(
    acts: Sequence[str], n: int = 1, kernels: Sequence[int] = (1, 3), axis: int = 1
) -> tuple[bytes, dict[str, np.ndarray]]:
    """A SqueezeNet fire module's end: one Conv per kernel size reading ``s``
    (the first with no bias), each with its activation (``""``: none), joined
    by a Concat along ``axis`` (4 + 2i channels each, 4 unless ``axis`` is
    1); also ``s`` is joined (the last input) when
    ``acts`` has one more entry than ``kernels``."""
    nodes, inits, cat = [], [], []
    for i, k in enumerate(kernels):
        ins = ["s", f"w{i}"] if i == 0 else ["s", f"w{i}", f"b{i}"]
        out = f"c{i}" if acts[i] else f"r{i}"
        nodes.append(helper.make_node("Conv", ins, [out], pads=[k // 2] * 4))
        if acts[i]:
            nodes.append(helper.make_node(acts[i], [out], [f"r{i}"]))
        m = 4 + 2 * i if axis == 1 else 4  # the channels (other axes: one count)
        inits += [_init(f"w{i}", _x(m, 3, k, k)), _init(f"b{i}", _x(m))]
        cat.append(f"r{i}")
    if len(acts) > len(kernels):
        cat.append("s")
    nodes.append(helper.make_node("Concat", cat, ["y"], axis=axis))
    model = _model(nodes, {"s": [n, 3, 5, 5]}, ["y"], inits)
    return model, {"s": _x(n, 3, 5, 5)}


@pytest.mark.parametrize(
    ("acts", "n", "kernels"),
    [(("Relu", "Relu"), 1, (1, 3)), (("Relu", ""), 2, (3, 1)), (("Sigmoid", "Relu"), 1, (1, 3)),
     (("Relu", "Relu", "Relu"), 3, (1, 3, 5))],
    ids=["fire", "batch-of-2-no-activation", "sigmoid-copied", "three-branches"],
)  # fmt: skip
def test_concat_of_convs_becomes_a_chain(
    cpu: str, tmp_path: Path, acts: Sequence[str], n: int, kernels: Sequence[int]
) -> None:
    """Every Conv writes its channels into the joined tensor; the Concat goes."""
    model, feeds = _fire(acts, n, kernels)
    ops = _check(model, feeds, tmp_path)
    assert ops == ["com.ortcore:FusedConvConcat"] * len(kernels)
    opt = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx")
    offsets = [next(a.i for a in n.attribute if a.name == "channel_offset") for n in opt.graph.node]
    assert offsets == [sum(4 + 2 * j for j in range(i)) for i in range(len(kernels))]
    y, _ = _run(model, feeds, L.ORT_ENABLE_ALL, tmp_path)
    assert type(y[0]) is np.ndarray  # not the chain's own buffer type
    ref = onnx.reference.ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
    np.testing.assert_allclose(y[0], ref[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["axis-2", "other-input", "conv-read-twice", "same-conv-twice"])
def test_concat_of_convs_left_alone(cpu: str, tmp_path: Path, case: str) -> None:
    """Not fused: a Concat along another axis, of a non-Conv input, of a Conv
    output something else reads, or of one Conv output twice."""
    if case == "axis-2":
        model, feeds = _fire(("Relu", "Relu"), axis=2)
    elif case == "other-input":
        model, feeds = _fire(("Relu", "Relu", "x"))
    else:
        nodes = [helper.make_node("Conv", ["s", "w"], ["c"]),
                 helper.make_node("Conv", ["s", "w2"], ["d"])]  # fmt: skip
        cat = ["c", "c"] if case == "same-conv-twice" else ["c", "d"]
        nodes.append(helper.make_node("Concat", cat, ["y"], axis=1))
        outs = ["y", "d"] if case == "conv-read-twice" else ["y"]
        inits = [_init("w", _x(2, 3, 1, 1)), _init("w2", _x(2, 3, 1, 1))]
        model, feeds = _model(nodes, {"s": [1, 3, 4, 4]}, outs, inits), {"s": _x(1, 3, 4, 4)}
    ops = _check(model, feeds, tmp_path)
    assert "com.ortcore:FusedConvConcat" not in ops and "Concat" in ops


def test_fused_conv_concat_never_writes_into_a_feed() -> None:
    """A model whose FusedConvConcat takes a graph input as Into gets the
    joined tensor, and the caller's array is left as it was."""
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    node = helper.make_node(
        "FusedConvConcat", ["x", "w", "", "into"], ["y"], domain="com.ortcore",
        channels=5, channel_offset=3, activation="Relu",
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4]),
         helper.make_tensor_value_info("into", TensorProto.FLOAT, [1, "C", 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [_init("w", _x(2, 3, 1, 1))],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.ortcore", 1)]
    )
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    x, into = _x(1, 3, 4, 4), _x(1, 5, 4, 4)
    kept = into.copy()
    (y,) = sess.run(None, {"x": x, "into": into})
    np.testing.assert_array_equal(into, kept)
    np.testing.assert_array_equal(y[:, :3], kept[:, :3])
    w = numpy_helper.to_array(graph.initializer[0]).reshape(2, 3)
    want = np.maximum(np.einsum("oc,nchw->nohw", w, x), 0)
    np.testing.assert_allclose(y[:, 3:], want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ortcore.RuntimeException, match="Into is float32"):
        sess.run(None, {"x": x, "into": _x(1, 4, 4, 4)})


# -- DenseNet's growing Concats: GrowingConcat chains ------------------------


def _dense_block(layers: int, n: int = 1, extra: Sequence[str] = ()) -> tuple[bytes, Any]:
    """A DenseNet block: each layer's Conv reads the last Concat's output
    (through a Relu) and adds 2 channels to it by a Concat; ``extra`` names
    more graph outputs (``z0`` is the block's input, ``zi`` the i-th
    Concat's output)."""
    nodes, inits = [], []
    for i in range(1, layers + 1):
        c = 3 + 2 * (i - 1)
        nodes += [
            helper.make_node("Relu", [f"z{i - 1}"], [f"r{i}"]),
            helper.make_node("Conv", [f"r{i}", f"w{i}"], [f"y{i}"], pads=[1, 1, 1, 1]),
            helper.make_node("Concat", [f"z{i - 1}", f"y{i}"], [f"z{i}"], axis=1),
        ]
        inits.append(_init(f"w{i}", _x(2, c, 3, 3)))
    model = _model(nodes, {"z0": [n, 3, 5, 5]}, [f"z{layers}", *extra], inits)
    return model, {"z0": _x(n, 3, 5, 5)}


@pytest.mark.parametrize("n", [1, 2])
def test_growing_concats_become_a_chain(cpu: str, tmp_path: Path, n: int) -> None:
    """Each Concat of the last one's output and a layer's channels becomes a
    GrowingConcat that knows the block's channels; the results are the
    Concats' for one image (the block's tensor filled in place) and for a
    batch."""
    model, feeds = _dense_block(3, n)
    ops = _check(model, feeds, tmp_path)
    assert ops.count("com.ortcore:GrowingConcat") == 3 and "Concat" not in ops
    opt = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx")
    caps = [a.i for nd in opt.graph.node if nd.op_type == "GrowingConcat" for a in nd.attribute]
    assert caps == [9, 9, 9]
    got, _ = _run(model, feeds, L.ORT_ENABLE_ALL, tmp_path)
    ref = onnx.reference.ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    assert got[0].shape == (n, 9, 5, 5)


def test_growing_concat_chain_ends_at_a_graph_output(cpu: str, tmp_path: Path) -> None:
    """A Concat whose output the caller gets ends its chain: the outputs
    share no memory (one changed in place leaves the other as it was)."""
    model, feeds = _dense_block(4, extra=["z2"])
    ops = _check(model, feeds, tmp_path)
    assert ops.count("com.ortcore:GrowingConcat") == 4  # two chains of two
    opt = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx")
    caps = [a.i for nd in opt.graph.node if nd.op_type == "GrowingConcat" for a in nd.attribute]
    assert caps == [7, 7, 11, 11]
    (z4, z2), _ = _run(model, feeds, L.ORT_ENABLE_ALL, tmp_path)
    assert not np.shares_memory(z4, z2)
    ref = onnx.reference.ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
    np.testing.assert_allclose(z4, ref[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(z2, ref[1], rtol=1e-4, atol=1e-5)


def test_growing_concat_branches_left_alone(cpu: str, tmp_path: Path) -> None:
    """A Concat whose output two Concats extend ends no chain: a lone Concat
    stays a Concat."""
    nodes = [
        helper.make_node("Concat", ["x", "a"], ["z1"], axis=1),
        helper.make_node("Concat", ["z1", "b"], ["z2"], axis=1),
        helper.make_node("Concat", ["z1", "c"], ["z3"], axis=1),
    ]
    shapes = {"x": [1, 2, 3], "a": [1, 1, 3], "b": [1, 2, 3], "c": [1, 3, 3]}
    model = _model(nodes, shapes, ["z2", "z3"])
    ops = _check(model, {k: _x(*v) for k, v in shapes.items()}, tmp_path)
    assert ops == ["Concat"] * 3


def _growing_links(links: Sequence[tuple[str, str, str]], capacity: int) -> Any:
    """A session of GrowingConcat links ``(x, y, z)`` of ``capacity``,
    unoptimized; every name not made by a link is a graph input."""
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    made = {z for _, _, z in links}
    nodes = [
        helper.make_node("GrowingConcat", [x, y], [z], domain="com.ortcore", capacity=capacity)
        for x, y, z in links
    ]
    feeds = list(dict.fromkeys(n for x, y, _ in links for n in (x, y) if n not in made))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in feeds],
        [helper.make_tensor_value_info(z, TensorProto.FLOAT, None) for _, _, z in links],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.ortcore", 1)]
    )
    so = ortcore.SessionOptions()
    so.graph_optimization_level = L.ORT_DISABLE_ALL
    return ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])


def test_growing_concat_links_never_overwrite() -> None:
    """Two links extending one tensor each get their own channels (the
    second copies), a feed is never written, and a link past ``capacity``
    or on a batch is a plain Concat."""
    sess = _growing_links([("x", "a", "z1"), ("z1", "b", "z2"), ("z1", "c", "z3"),
                           ("z2", "d", "z4")], capacity=8)  # fmt: skip
    feeds = {"x": _x(1, 2, 3), "a": _x(1, 1, 3), "b": _x(1, 2, 3), "c": _x(1, 3, 3),
             "d": _x(1, 3, 3)}  # fmt: skip
    kept = {k: v.copy() for k, v in feeds.items()}
    z1, z2, z3, z4 = sess.run(None, feeds)
    cat = np.concatenate
    np.testing.assert_array_equal(z1, cat([kept["x"], kept["a"]], 1))
    np.testing.assert_array_equal(z2, cat([z1, kept["b"]], 1))
    np.testing.assert_array_equal(z3, cat([z1, kept["c"]], 1))
    np.testing.assert_array_equal(z4, cat([z2, kept["d"]], 1))  # 8 channels: the capacity
    for k, v in feeds.items():
        np.testing.assert_array_equal(v, kept[k])
    batch = {k: np.concatenate([v, v + 1]) for k, v in feeds.items()}
    for got, want in zip(sess.run(None, batch), [z1, z2, z3, z4], strict=True):
        np.testing.assert_array_equal(got[:1], want)
        np.testing.assert_array_equal(got[1:], want + 1)
    over = dict(feeds, d=_x(1, 4, 3))  # 9 channels: more than the capacity
    np.testing.assert_array_equal(sess.run(None, over)[3], cat([z2, over["d"]], 1))
    with pytest.raises(ortcore.RuntimeException):
        sess.run(None, dict(feeds, a=_x(1, 1, 4)))  # lengths disagree


def test_fused_conv_add_kernel_float16_and_float64() -> None:
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    for dtype, elem in ((np.float16, TensorProto.FLOAT16), (np.float64, TensorProto.DOUBLE)):
        x, w = _x(1, 3, 6, 6).astype(dtype), _x(4, 3, 3, 3).astype(dtype)
        z, b = _x(1, 4, 4, 4).astype(dtype), _x(4).astype(dtype)
        node = helper.make_node(
            "FusedConvAdd", ["x", "w", "z", "b"], ["y"], domain="com.ortcore", activation="Relu"
        )
        graph = helper.make_graph(
            [node], "g",
            [helper.make_tensor_value_info(n, elem, a.shape) for n, a in
             (("x", x), ("w", w), ("z", z), ("b", b))],
            [helper.make_tensor_value_info("y", elem, None)],
        )  # fmt: skip
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.ortcore", 1)],
        )
        sess = ortcore.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        (y,) = sess.run(None, {"x": x, "w": w, "z": z, "b": b})
        ref = onnx.reference.ReferenceEvaluator(
            helper.make_model(
                helper.make_graph(
                    [
                        helper.make_node("Conv", ["x", "w", "b"], ["c"]),
                        helper.make_node("Add", ["c", "z"], ["s"]),
                        helper.make_node("Relu", ["s"], ["y"]),
                    ],
                    "r",
                    graph.input,
                    graph.output,
                ),
                opset_imports=[helper.make_opsetid("", 17)],
            )
        )
        (want,) = ref.run(None, {"x": x, "w": w, "z": z, "b": b})  # test oracle
        assert y.dtype == dtype
        tol = 1e-2 if dtype == np.float16 else 1e-9
        np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


# -- MatMul + Add, Gemm/MatMul + activation ----------------------------------


def test_matmul_add_2d_becomes_gemm_and_takes_the_relu(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w"], ["m"]), mk("Add", ["m", "b"], ["a"])]
    nodes.append(mk("Relu", ["a"], ["y"]))
    model = _model(nodes, {"x": [4, 8]}, ["y"], [_init("w", _x(8, 5)), _init("b", _x(5))])
    assert _check(model, {"x": _x(4, 8)}, tmp_path) == ["com.ortcore:FusedGemm"]


def test_matmul_add_3d_becomes_fused_matmul(cpu: str, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["b", "m"], ["y"]),
    ]
    model = _model(nodes, {"x": [2, 4, 8]}, ["y"], [_init("w", _x(8, 5)), _init("b", _x(5))])
    assert _check(model, {"x": _x(2, 4, 8)}, tmp_path) == ["com.ortcore:FusedMatMul"]


def test_matmul_add_not_fused_when_product_is_read_twice(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w"], ["m"]), mk("Add", ["m", "b"], ["y"]), mk("Neg", ["m"], ["z"])]
    model = _model(nodes, {"x": [4, 8]}, ["y", "z"], [_init("w", _x(8, 5)), _init("b", _x(5))])
    assert _check(model, {"x": _x(4, 8)}, tmp_path) == ["MatMul", "Add", "Neg"]


def test_matmul_sigmoid_becomes_fused_matmul(cpu: str, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["y"]),
    ]
    model = _model(nodes, {"x": [2, 3, 8]}, ["y"], [_init("w", _x(8, 5))])
    assert _check(model, {"x": _x(2, 3, 8)}, tmp_path) == ["com.ortcore:FusedMatMul"]


# -- GELU --------------------------------------------------------------------


def _gelu_erf(form: str, c: float = math.sqrt(2)) -> list[onnx.NodeProto]:
    head = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["h"])]  # fmt: skip
    mk = helper.make_node
    tails = {
        "x*h*0.5": [mk("Mul", ["x", "h"], ["t"]), mk("Mul", ["t", "half"], ["y"])],
        "x*(h*0.5)": [mk("Mul", ["h", "half"], ["t"]), mk("Mul", ["x", "t"], ["y"])],
        "(x*0.5)*h": [mk("Mul", ["x", "half"], ["t"]), mk("Mul", ["t", "h"], ["y"])],
    }
    return head + tails[form]


GELU_INITS = [_init("sqrt2", math.sqrt(2)), _init("one", 1.0), _init("half", 0.5)]


@pytest.mark.parametrize("form", ["x*h*0.5", "x*(h*0.5)", "(x*0.5)*h"])
@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_erf_forms(cpu: str, tmp_path: Path, form: str, opset: int) -> None:
    model = _model(_gelu_erf(form), {"x": [3, 8]}, ["y"], GELU_INITS, opset=opset)
    ops = _check(model, {"x": _x(3, 8)}, tmp_path)
    assert ops == (["Gelu"] if opset >= 20 else ["com.ortcore:FusedGelu"])


def test_gelu_tanh_form_with_bias(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [
        mk("Add", ["x0", "bias"], ["x"]), mk("Pow", ["x", "three"], ["c"]),
        mk("Mul", ["k", "c"], ["kc"]), mk("Add", ["x", "kc"], ["i"]),
        mk("Mul", ["i", "s2pi"], ["o"]), mk("Tanh", ["o"], ["e"]),
        mk("Add", ["one", "e"], ["h"]), mk("Mul", ["x", "h"], ["t"]),
        mk("Mul", ["t", "half"], ["y"]),
    ]  # fmt: skip
    inits = [*GELU_INITS, _init("three", 3.0), _init("k", 0.044715),
             _init("s2pi", math.sqrt(2 / math.pi)), _init("bias", _x(8))]  # fmt: skip
    model = _model(nodes, {"x0": [3, 8]}, ["y"], inits, opset=18)
    assert _check(model, {"x0": _x(3, 8)}, tmp_path) == ["com.ortcore:BiasGelu"]


def test_gelu_not_fused_with_wrong_constant(cpu: str, tmp_path: Path) -> None:
    inits = [_init("sqrt2", 1.3), _init("one", 1.0), _init("half", 0.5)]
    model = _model(_gelu_erf("x*h*0.5"), {"x": [3, 8]}, ["y"], inits, opset=20)
    assert "Erf" in _check(model, {"x": _x(3, 8)}, tmp_path)


@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_tanh_form_as_gpt2_exports(cpu: str, tmp_path: Path, opset: int) -> None:
    # transformers' NewGELUActivation: 0.5 * x * (1 + tanh(c * (x + k * pow(x, 3)))).
    mk = helper.make_node
    nodes = [
        mk("Mul", ["x", "half"], ["hx"]), mk("Pow", ["x", "three"], ["c"]),
        mk("Mul", ["c", "k"], ["kc"]), mk("Add", ["x", "kc"], ["i"]),
        mk("Mul", ["s2pi", "i"], ["o"]), mk("Tanh", ["o"], ["e"]),
        mk("Add", ["e", "one"], ["h"]), mk("Mul", ["hx", "h"], ["y"]),
    ]  # fmt: skip
    inits = [*GELU_INITS, _init("three", 3.0), _init("k", 0.044715),
             _init("s2pi", math.sqrt(2 / math.pi))]  # fmt: skip
    model = _model(nodes, {"x": [4, 8]}, ["y"], inits, opset=opset)
    assert _check(model, {"x": _x(4, 8) * 3}, tmp_path) == (
        ["Gelu"] if opset >= 20 else ["com.ortcore:FusedGelu"]
    )
    (node,) = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").graph.node
    assert helper.get_attribute_value(node.attribute[0]) == b"tanh"


# -- Swish: SiLU, QuickGelu ----------------------------------------------------


def _swish_nodes(alpha: bool, swap: bool) -> list[onnx.NodeProto]:
    """``x * Sigmoid(x)``, or ``x * Sigmoid(a * x)``; ``swap`` flips each Mul."""
    mk = helper.make_node
    nodes = []
    if alpha:
        nodes.append(mk("Mul", ["a", "x"] if swap else ["x", "a"], ["ax"]))
    nodes.append(mk("Sigmoid", ["ax" if alpha else "x"], ["s"]))
    nodes.append(mk("Mul", ["s", "x"] if swap else ["x", "s"], ["y"]))
    return nodes


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("alpha", [False, True], ids=["silu", "quick-gelu"])
@pytest.mark.parametrize("opset", [17, 24])
def test_swish_forms(cpu: str, tmp_path: Path, opset: int, alpha: bool, swap: bool) -> None:
    model = _model(_swish_nodes(alpha, swap), {"x": [3, 8]}, ["y"], [_init("a", 1.702)], opset)
    ops = _check(model, {"x": _x(3, 8) * 4}, tmp_path)
    assert ops == (["Swish"] if opset >= 24 else ["com.ortcore:FusedSwish"])
    (node,) = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").graph.node
    want = np.float32(1.702) if alpha else 1.0
    assert helper.get_attribute_value(node.attribute[0]) == pytest.approx(want)


def test_swish_not_fused_when_the_gate_reads_another_tensor(cpu: str, tmp_path: Path) -> None:
    # GLU-style gating, z * Sigmoid(x), is no Swish.
    mk = helper.make_node
    nodes = [mk("Sigmoid", ["x"], ["s"]), mk("Mul", ["z", "s"], ["y"])]
    model = _model(nodes, {"x": [3, 8], "z": [3, 8]}, ["y"])
    assert _check(model, {"x": _x(3, 8), "z": _x(3, 8)}, tmp_path) == ["Sigmoid", "Mul"]


def test_swish_not_fused_when_the_sigmoid_is_read_twice(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [*_swish_nodes(False, False), mk("Neg", ["s"], ["z"])]
    model = _model(nodes, {"x": [3, 8]}, ["y", "z"])
    assert _check(model, {"x": _x(3, 8)}, tmp_path) == ["Sigmoid", "Mul", "Neg"]


def test_quick_gelu_not_fused_with_an_overridable_or_widening_scale(
    cpu: str, tmp_path: Path
) -> None:
    # An alpha a feed may replace is not a constant; a [1, 1] alpha makes a
    # vector 2-D, which Swish would not.
    over = _model(_swish_nodes(True, False), {"x": [3, 8], "a": []}, ["y"], [_init("a", 1.702)])
    assert "Sigmoid" in _check(over, {"x": _x(3, 8)}, tmp_path)
    wide = _model(_swish_nodes(True, False), {"x": [8]}, ["y"], [_init("a", [[1.702]])])
    assert "Sigmoid" in _check(wide, {"x": _x(8)}, tmp_path)


# -- LayerNormalization, RMSNormalization, SkipLayerNormalization ------------


def _layer_norm_nodes(src: str, axes: int = -1) -> list[onnx.NodeProto]:
    mk = helper.make_node
    return [
        mk("ReduceMean", [src], ["m"], axes=[axes]), mk("Sub", [src, "m"], ["d"]),
        mk("Pow", ["d", "two"], ["p"]), mk("ReduceMean", ["p"], ["v"], axes=[axes]),
        mk("Add", ["v", "eps"], ["ve"]), mk("Sqrt", ["ve"], ["s"]), mk("Div", ["d", "s"], ["n"]),
        mk("Mul", ["n", "gamma"], ["g"]), mk("Add", ["g", "beta"], ["y"]),
    ]  # fmt: skip


LN_INITS = [_init("two", 2.0), _init("eps", 1e-5), _init("gamma", _x(8)), _init("beta", _x(8))]


@pytest.mark.parametrize("opset", [13, 17])
def test_layer_norm_from_primitives(cpu: str, tmp_path: Path, opset: int) -> None:
    model = _model(_layer_norm_nodes("x"), {"x": [2, 3, 8]}, ["y"], LN_INITS, opset=opset)
    ops = _check(model, {"x": _x(2, 3, 8)}, tmp_path)
    assert ops == (["LayerNormalization"] if opset >= 17 else ["com.ortcore:FusedLayerNorm"])


def test_layer_norm_not_fused_over_another_axis(cpu: str, tmp_path: Path) -> None:
    inits = [*LN_INITS[:2], _init("gamma", _x(3, 1)), _init("beta", _x(3, 1))]
    model = _model(_layer_norm_nodes("x", axes=1), {"x": [2, 3, 8]}, ["y"], inits)
    assert "ReduceMean" in _check(model, {"x": _x(2, 3, 8)}, tmp_path)


def test_skip_layer_norm_keeps_the_sum(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("Add", ["x", "r"], ["sum"]),
             mk("LayerNormalization", ["sum", "gamma", "beta"], ["y"]),
             mk("Neg", ["sum"], ["z"])]  # fmt: skip
    model = _model(nodes, {"x": [2, 3, 8], "r": [2, 3, 8]}, ["y", "z"], LN_INITS)
    ops = _check(model, {"x": _x(2, 3, 8), "r": _x(2, 3, 8)}, tmp_path)
    assert ops == ["com.ortcore:SkipLayerNormalization", "Neg"]


def test_skip_layer_norm_not_fused_with_a_constant_addend(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("Add", ["x", "c"], ["sum"]), mk("LayerNormalization", ["sum", "gamma"], ["y"])]
    model = _model(nodes, {"x": [2, 8]}, ["y"], [*LN_INITS, _init("c", _x(8))])
    assert _check(model, {"x": _x(2, 8)}, tmp_path) == ["Add", "LayerNormalization"]


def test_rms_norm_from_primitives(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("Mul", ["x", "x"], ["p"]), mk("ReduceMean", ["p"], ["v"], axes=[-1]),
             mk("Add", ["v", "eps"], ["ve"]), mk("Sqrt", ["ve"], ["s"]),
             mk("Reciprocal", ["s"], ["r"]), mk("Mul", ["x", "r"], ["n"]),
             mk("Mul", ["gamma", "n"], ["y"])]  # fmt: skip
    model = _model(nodes, {"x": [2, 3, 8]}, ["y"], LN_INITS)
    assert _check(model, {"x": _x(2, 3, 8)}, tmp_path) == ["com.ortcore:FusedRMSNorm"]


# -- attention ---------------------------------------------------------------


@pytest.mark.parametrize("scale_op", ["Div", "Mul", "both"])
@pytest.mark.parametrize("masked", [False, True])
def test_attention(cpu: str, tmp_path: Path, scale_op: str, masked: bool) -> None:
    mk = helper.make_node
    if scale_op == "both":
        nodes = [mk("Mul", ["q", "c"], ["qs"]), mk("Mul", ["kt", "c"], ["ks"]),
                 mk("MatMul", ["qs", "ks"], ["s"])]  # fmt: skip
    else:
        nodes = [mk("MatMul", ["q", "kt"], ["s0"]), mk(scale_op, ["s0", "c"], ["s"])]
    src = "s"
    if masked:
        nodes.append(mk("Add", ["s", "mask"], ["sm"]))
        src = "sm"
    nodes += [mk("Softmax", [src], ["p"], axis=-1), mk("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": [2, 3, 5, 4], "kt": [2, 3, 4, 6], "v": [2, 3, 6, 4], "mask": [2, 1, 1, 6]}
    if not masked:
        del shapes["mask"]
    model = _model(nodes, shapes, ["y"], [_init("c", 0.7)])
    feeds = {k: _x(*s) for k, s in shapes.items()}
    assert _check(model, feeds, tmp_path) == ["com.ortcore:FusedAttention"]


def test_attention_not_fused_when_softmax_is_read(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("MatMul", ["q", "kt"], ["s"]), mk("Softmax", ["s"], ["p"], axis=-1),
             mk("MatMul", ["p", "v"], ["y"])]  # fmt: skip
    shapes = {"q": [2, 5, 4], "kt": [2, 4, 6], "v": [2, 6, 4]}
    model = _model(nodes, shapes, ["y", "p"])
    feeds = {k: _x(*s) for k, s in shapes.items()}
    assert _check(model, feeds, tmp_path) == ["MatMul", "Softmax", "MatMul"]


def _head_split_attention(
    extra_reader: str | None = None, batch: int = 2
) -> tuple[bytes, dict[str, np.ndarray]]:
    """BERT's attention as torch exports it: Q, K, V (batch, seq, hidden)
    reshaped into heads and transposed, the result transposed back."""
    mk = helper.make_node
    nodes = [mk("Reshape", [n, "heads"], [f"{n}4"]) for n in ("q", "k", "v")]
    nodes += [
        mk("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        mk("Transpose", ["k4"], ["kh"], perm=[0, 2, 3, 1]),
        mk("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        mk("MatMul", ["qh", "kh"], ["s0"]),
        mk("Div", ["s0", "c"], ["s"]),
        mk("Add", ["s", "mask"], ["sm"]),
        mk("Softmax", ["sm"], ["p"], axis=-1),
        mk("MatMul", ["p", "vh"], ["o"]),
        mk("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        mk("Reshape", ["ot", "merged"], ["y"]),
    ]
    outputs = ["y"]
    if extra_reader is not None:
        nodes.append(mk("Neg", [extra_reader], ["z"]))
        outputs.append("z")
    shapes = {n: [batch, 5, 12] for n in ("q", "k", "v")}
    shapes["mask"] = [batch, 1, 1, 5]
    inits = [
        _init("c", 2.0),
        numpy_helper.from_array(np.array([batch, 5, 3, 4], np.int64), "heads"),
        numpy_helper.from_array(np.array([batch, 5, 12], np.int64), "merged"),
    ]
    feeds = {k: _x(*s) for k, s in shapes.items()}
    return _model(nodes, shapes, outputs, inits), feeds


def test_attention_folds_the_head_transposes(cpu: str, tmp_path: Path) -> None:
    """The four Transposes go into the fused node (its perm_* attributes);
    batch 2 makes the heads' views strided in both leading axes."""
    model, feeds = _head_split_attention()
    ops = _check(model, feeds, tmp_path)
    assert ops == ["Reshape", "Reshape", "Reshape", "com.ortcore:FusedAttention", "Reshape"]
    fused = next(
        n for n in onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").graph.node
        if n.op_type == "FusedAttention"
    )  # fmt: skip
    perms = {a.name: list(a.ints) for a in fused.attribute if a.name.startswith("perm")}
    assert perms == {"perm_q": [0, 2, 1, 3], "perm_kt": [0, 2, 3, 1], "perm_v": [0, 2, 1, 3],
                     "perm_out": [0, 2, 1, 3]}  # fmt: skip


def test_attention_keeps_a_transpose_read_elsewhere(cpu: str, tmp_path: Path) -> None:
    """K's Transpose has another reader (a cache output): it stays, and the
    fused node reads its output; the others are folded."""
    model, feeds = _head_split_attention(extra_reader="kh", batch=1)
    ops = _check(model, feeds, tmp_path)
    assert ops.count("Transpose") == 1 and "com.ortcore:FusedAttention" in ops


def test_attention_in_a_branch_keeps_an_outer_transpose(cpu: str, tmp_path: Path) -> None:
    """Q's Transpose is in the outer graph and read only by the attention in
    an If branch: the branch's attention is fused, the outer Transpose stays
    where it is (a pass never moves a node of another graph)."""
    mk = helper.make_node
    then = helper.make_graph(
        [mk("MatMul", ["qh", "kt"], ["s"]), mk("Softmax", ["s"], ["p"], axis=-1),
         mk("MatMul", ["p", "v"], ["o"])],
        "then", [], [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
    )  # fmt: skip
    other = helper.make_graph(
        [mk("Identity", ["alt"], ["o2"])],
        "else", [], [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)],
    )  # fmt: skip
    nodes = [
        mk("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        mk("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
           for n, s in {"q4": [1, 5, 2, 4], "kt": [1, 2, 4, 6], "v": [1, 2, 6, 4],
                        "alt": [1, 2, 5, 4]}.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"c": np.array(True), "q4": _x(1, 5, 2, 4), "kt": _x(1, 2, 4, 6), "v": _x(1, 2, 6, 4),
             "alt": _x(1, 2, 5, 4)}  # fmt: skip
    assert _check(model.SerializeToString(), feeds, tmp_path) == ["Transpose", "If"]
    saved = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx")
    branch = next(a.g for a in saved.graph.node[1].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node] == ["FusedAttention"]
    assert not [a for a in branch.node[0].attribute if a.name == "perm_q"]


# -- provider passes ---------------------------------------------------------


def test_provider_passes_run_in_order() -> None:
    seen: list[str] = []

    class Stub:
        def __init__(self, name: str) -> None:
            self.name = name

        def graph_passes(self) -> list[Any]:
            return [lambda model: seen.append(self.name)]

    model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=8)
    _run_provider_passes(model, [Stub("a"), Stub("b")])  # type: ignore[list-item]
    assert seen == ["a", "b"]


# -- whole models at every level ---------------------------------------------

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _logits(model: onnx.ModelProto) -> bytes:
    """``model`` with its final Softmax's input as the output: light_squeezenet's
    logits are about 9.5e9 and tied to a few ulps, so its softmax is decided by
    rounding (onnxruntime gives 0.001 everywhere, the onnx reference 1.0 at
    one class); the logits themselves agree to 1e-6 and are what is compared."""
    last = model.graph.node[-1]
    if last.op_type == "Softmax":
        del model.graph.node[-1]
        del model.graph.output[:]
        model.graph.output.append(onnx.helper.make_tensor_value_info(last.input[0], 1, None))
    return model.SerializeToString()


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(LIGHT.glob("light_*.onnx")), ids=lambda p: p.stem)
def test_light_model_same_at_every_level(cpu: str, path: Path, tmp_path: Path) -> None:
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    feeds = {inp.name: _x(*shape)}
    data = _logits(model)
    want, _ = _run(data, feeds, L.ORT_DISABLE_ALL, tmp_path)
    for level in LEVELS[1:]:
        got, _ = _run(data, feeds, level, tmp_path)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4, err_msg=str(level))


def test_fused_batchnorm_profiles_under_its_model_node() -> None:
    """A profile names a FusedBatchNorm's event after the BatchNormalization
    it replaced, with that op type, as for FusedConv."""
    from ortcore.profiling import model_node

    assert model_node("node", "FusedBatchNorm", "bn3_fused") == ("bn3", "BatchNormalization")
    assert model_node("node", "FusedConv", "c_fused") == ("c", "Conv")
    assert model_node("node", "FusedConvConcat", "c_fused") == ("c", "Conv")
    assert model_node("node", "FusedConvShuffle", "c_fused") == ("c", "Conv")


# -- channel shuffle after a Conv ---------------------------------------------


def _shuffle_nodes(
    src: str, n: int, c: int, g: int, hw: int, *, perm: Sequence[int] = (0, 2, 1, 3, 4),
    split: Sequence[int] | None = None, back: Sequence[int] | None = None,
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """ShuffleNet's Reshape, Transpose, Reshape of ``src`` (n, c, hw, hw) into ``y``."""
    split = [n, g, c // g, hw, hw] if split is None else split
    back = [n, c, hw, hw] if back is None else back
    nodes = [helper.make_node("Reshape", [src, "s1"], ["r1"]),
             helper.make_node("Transpose", ["r1"], ["t"], perm=list(perm)),
             helper.make_node("Reshape", ["t", "s2"], ["y"])]  # fmt: skip
    inits = [numpy_helper.from_array(np.array(split, np.int64), "s1"),
             numpy_helper.from_array(np.array(back, np.int64), "s2")]  # fmt: skip
    return nodes, inits


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize(
    ("k", "act"), [(1, "Relu"), (1, ""), (1, "Sigmoid"), (3, "Relu")], ids=str
)
def test_grouped_conv_shuffle_becomes_fused_conv_shuffle(
    cpu: str, tmp_path: Path, n: int, k: int, act: str
) -> None:
    """A grouped Conv (1x1: the packed GEMM writes the shuffled rows; 3x3:
    shuffled after) followed by a channel shuffle in as many groups, or in
    other groups than the Conv's, is one FusedConvShuffle with the same
    output."""
    for groups, shuffle in ((4, 4), (4, 2), (2, 4)):
        c, hw = 24, 7
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=groups,
                                  pads=[k // 2] * 4)]  # fmt: skip
        src = "c"
        if act:
            nodes.append(helper.make_node(act, ["c"], ["a"]))
            src = "a"
        more, inits = _shuffle_nodes(src, n, c, shuffle, hw)
        inits += [_init("w", _x(c, c // groups, k, k)), _init("b", _x(c))]
        model = _model([*nodes, *more], {"x": [n, c, hw, hw]}, ["y"], inits)
        ops = _check(model, {"x": _x(n, c, hw, hw)}, tmp_path)
        assert ops == ["com.ortcore:FusedConvShuffle"], (groups, shuffle)


@pytest.mark.parametrize("bias", [True, False])
def test_one_group_conv_shuffle_permutes_its_weights(
    cpu: str, tmp_path: Path, bias: bool
) -> None:
    """A Conv of one group with constant weights followed by a channel
    shuffle keeps its op: its weight's output channels (and bias) come in
    the shuffled order, and the Reshapes and the Transpose go."""
    c, hw = 12, 6
    nodes = [helper.make_node("Conv", ["x", "w", *(["b"] if bias else [])], ["c"],
                              pads=[1, 1, 1, 1])]  # fmt: skip
    more, inits = _shuffle_nodes("c", 1, c, 3, hw, split=[0, 3, -1, hw, hw], back=[1, -1, hw, hw])
    inits += [_init("w", _x(c, 5, 3, 3)), _init("b", _x(c))]
    model = _model([*nodes, *more], {"x": [1, 5, hw, hw]}, ["y"], inits)
    assert _check(model, {"x": _x(1, 5, hw, hw)}, tmp_path) == ["Conv"]


def test_one_group_conv_shuffle_with_a_weight_feed_is_fused(cpu: str, tmp_path: Path) -> None:
    """A weight that is a graph input cannot be permuted ahead: the Conv and
    the shuffle become a FusedConvShuffle."""
    c, hw = 8, 5
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"])]
    more, inits = _shuffle_nodes("c", 1, c, 2, hw)
    model = _model([*nodes, *more], {"x": [1, 3, hw, hw], "w": [c, 3, 1, 1]}, ["y"], inits)
    feeds = {"x": _x(1, 3, hw, hw), "w": _x(c, 3, 1, 1)}
    assert _check(model, feeds, tmp_path) == ["com.ortcore:FusedConvShuffle"]


@pytest.mark.parametrize(
    ("split_n", "back"), [(-1, [0, 12, 5, 5]), (0, [-1, 12, 5, 5]), (0, [0, -1, 5, 5])]
)
def test_conv_shuffle_of_an_unknown_batch(
    cpu: str, tmp_path: Path, split_n: int, back: list[int]
) -> None:
    """A batch dim that shape inference does not know: Reshape targets
    that keep it (0 or -1) are still a channel shuffle, for every batch."""
    c, hw = 12, 5
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=3)]
    more, inits = _shuffle_nodes("c", 1, c, 3, hw, split=[split_n, 3, 4, hw, hw], back=back)
    model = _model([*nodes, *more], {"x": ["N", c, hw, hw]}, ["y"],  # type: ignore[dict-item]
                   [_init("w", _x(c, 4, 1, 1)), *inits])  # fmt: skip
    for n in (1, 3):
        ops = _check(model, {"x": _x(n, c, hw, hw)}, tmp_path)
        assert ops == ["com.ortcore:FusedConvShuffle"]


@pytest.mark.parametrize(
    "case",
    ["perm", "split-spatial", "back-other", "conv-read-twice", "one-per-group", "residual",
     "fixed-batch-of-unknown"],
)  # fmt: skip
def test_conv_shuffle_left_alone(cpu: str, tmp_path: Path, case: str) -> None:
    """Patterns that are not a channel shuffle of the Conv's output alone keep their nodes."""
    c, hw, g = 8, 4, 2
    kw: dict[str, Any] = {}
    if case == "perm":
        kw["perm"] = (0, 1, 2, 4, 3)
    elif case == "split-spatial":  # a split of the width, not of the channels
        kw.update(split=[1, c, hw, 2, hw // 2], perm=(0, 1, 2, 4, 3))
    elif case == "back-other":  # the second Reshape does not restore the shape
        kw["back"] = [1, c * hw, hw]
    elif case == "one-per-group":  # as many groups as channels: no shuffle
        kw.update(split=[1, c, 1, hw, hw])
    batch: int | str = 1
    if case == "fixed-batch-of-unknown":  # a batch of 1 in the target, N in the model
        batch = "N"
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=2)]
    outputs = ["y"]
    inits = [_init("w", _x(c, c // 2, 1, 1))]
    if case == "residual":
        nodes = [helper.make_node("Conv", ["x", "w"], ["c0"], group=2),
                 helper.make_node("Add", ["c0", "x"], ["c"])]  # fmt: skip
    if case == "conv-read-twice":
        outputs.append("c")
    more, shuffle_inits = _shuffle_nodes("c", 1, c, g, hw, **kw)
    shape: list[Any] = [batch, c, hw, hw]
    model = _model([*nodes, *more], {"x": shape}, outputs, inits + shuffle_inits)
    ops = _check(model, {"x": _x(1, c, hw, hw)}, tmp_path)
    assert "com.ortcore:FusedConvShuffle" not in ops and "Transpose" in ops


def _fused_shuffle_model(elem: int, shapes: dict[str, Sequence[int]], **attrs: Any) -> bytes:
    node = helper.make_node(
        "FusedConvShuffle", list(shapes), ["y"], domain="com.ortcore", **attrs
    )
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, elem, s) for n, s in shapes.items()],
        [helper.make_tensor_value_info("y", elem, None)],
    )  # fmt: skip
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.ortcore", 1)]
    ).SerializeToString()


@pytest.mark.parametrize(
    ("dtype", "elem"), [(np.float16, TensorProto.FLOAT16), (np.float64, TensorProto.DOUBLE)]
)
def test_fused_conv_shuffle_kernel_float16_and_float64(cpu: str, dtype: Any, elem: int) -> None:
    """The kernel outside float32's paths: the FusedConv's output, shuffled after."""
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    x, w, b = _x(2, 6, 5, 5).astype(dtype), _x(6, 3, 1, 1).astype(dtype), _x(6).astype(dtype)
    model = _fused_shuffle_model(
        elem, {"x": x.shape, "w": w.shape, "b": b.shape},
        group=2, shuffle_groups=3, activation="Relu",
    )  # fmt: skip
    sess = ortcore.InferenceSession(model, providers=[cpu])
    (y,) = sess.run(None, {"x": x, "w": w, "b": b})
    x64, w64 = x.astype(np.float64), w.astype(np.float64)[:, :, 0, 0]
    conv = np.concatenate(
        [np.einsum("mk,nkhw->nmhw", w64[3 * g : 3 * g + 3], x64[:, 3 * g : 3 * g + 3])
         for g in range(2)], axis=1,
    ) + b.astype(np.float64)[None, :, None, None]  # fmt: skip
    want = np.maximum(conv, 0).reshape(2, 3, 2, 5, 5).transpose(0, 2, 1, 3, 4).reshape(y.shape)
    assert y.dtype == dtype
    tol = 1e-2 if dtype == np.float16 else 1e-9
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(("groups", "match"), [(4, "shuffle_groups is 4; it must be a multiple"),
                                               (0, "shuffle_groups is 0")])  # fmt: skip
def test_fused_conv_shuffle_kernel_refuses_bad_groups(
    cpu: str, groups: int, match: str
) -> None:
    """A shuffle whose group count does not divide the channels, or is not
    positive, is an error that names the node."""
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    model = _fused_shuffle_model(
        TensorProto.FLOAT, {"x": [1, 3, 4, 4], "w": [6, 3, 1, 1]}, shuffle_groups=groups
    )
    with pytest.raises(Exception, match=match):
        sess = ortcore.InferenceSession(model, providers=[cpu])
        sess.run(None, {"x": _x(1, 3, 4, 4), "w": _x(6, 3, 1, 1)})


# -- Conv + MaxPool -----------------------------------------------------------


def _conv_pool_model(act: str, pool: dict[str, Any], n: int = 1, **conv: Any) -> bytes:
    """Conv (3 -> 8 channels, 3x3 stride 2 unless ``conv`` says otherwise),
    the activation ``act`` (none if empty) and a MaxPool of ``pool``."""
    attrs = {"strides": [2, 2], **conv}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)]
    src = "c"
    if act:
        nodes.append(helper.make_node(act, ["c"], ["a"]))
        src = "a"
    nodes.append(helper.make_node("MaxPool", [src], ["y"], **pool))
    inits = [_init("w", _x(8, 3, 3, 3)), _init("b", _x(8))]
    return _model(nodes, {"x": [n, 3, 33, 31]}, ["y"], inits)


@pytest.mark.parametrize(
    "pool",
    [
        {"kernel_shape": [3, 3], "strides": [2, 2]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
        {"kernel_shape": [2, 3], "strides": [1, 2], "dilations": [2, 1]},
    ],
    ids=["squeezenet", "pads-ceil", "dilated"],
)
@pytest.mark.parametrize("act", ["Relu", "", "Sigmoid"])
@pytest.mark.parametrize("n", [1, 2])
def test_conv_max_pool_becomes_fused_conv_pool(
    cpu: str, tmp_path: Path, pool: dict[str, Any], act: str, n: int
) -> None:
    """A Conv (with its activation) whose output a MaxPool alone reads is one
    FusedConvPool with the same output, at every level and reloaded."""
    model = _conv_pool_model(act, pool, n, pads=[1, 0, 2, 1])
    ops = _check(model, {"x": _x(n, 3, 33, 31)}, tmp_path)
    assert ops == ["com.ortcore:FusedConvPool"]


@pytest.mark.parametrize("case", ["indices", "conv-read-twice", "auto-pad", "pool-of-add"])
def test_conv_max_pool_left_alone(cpu: str, tmp_path: Path, case: str) -> None:
    """A MaxPool with its Indices output or automatic pads, a Conv output
    that something else reads too, or a pool of something else keep their
    nodes."""
    pool: dict[str, Any] = {"kernel_shape": [3, 3], "strides": [2, 2]}
    outputs = ["y"]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2])]
    if case == "indices":
        nodes.append(helper.make_node("MaxPool", ["c"], ["y", "i"], **pool))
    elif case == "auto-pad":
        nodes.append(helper.make_node("MaxPool", ["c"], ["y"], auto_pad="SAME_UPPER", **pool))
    elif case == "pool-of-add":
        nodes += [helper.make_node("Add", ["c", "c"], ["s"]),
                  helper.make_node("MaxPool", ["s"], ["y"], **pool)]  # fmt: skip
    else:
        nodes.append(helper.make_node("MaxPool", ["c"], ["y"], **pool))
        outputs.append("c")
    model = _model(nodes, {"x": [1, 3, 33, 31]}, outputs, [_init("w", _x(8, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 33, 31)}, tmp_path)
    assert "com.ortcore:FusedConvPool" not in ops and "MaxPool" in ops


def test_fused_conv_pool_shape_inference() -> None:
    """The fused op's schema infers the pooled output's shape (onnx's Conv,
    then MaxPool), and refuses a node without its pool window."""
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    node = helper.make_node("FusedConvPool", ["x", "w"], ["y"], domain="com.ortcore",
                            strides=[2, 2], activation="Relu", pool_kernel_shape=[3, 3],
                            pool_strides=[2, 2], pool_ceil_mode=1)  # fmt: skip
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [64, 3, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.ortcore", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    dims = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    assert dims == [1, 64, 55, 55]
    fused = model.graph.node[0]
    del fused.attribute[:]
    fused.attribute.extend([helper.make_attribute("activation", "Relu")])
    with pytest.raises(Exception, match="pool_kernel_shape is missing"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
