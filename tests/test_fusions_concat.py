"""Extended-level fusions of concatenations: Concat of Convs (FusedConvConcat
chains) and DenseNet's growing Concats (GrowingConcat chains).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore

from .fusion_helpers import L, _check, _init, _model, _run, _x

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
