"""Extended-level fusions of CPU layouts: the channel shuffle after a Conv
(FusedConvShuffle) and Conv + MaxPool (FusedConvPool).
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

from .fusion_helpers import _check, _init, _model, _x

# -- channel shuffle after a Conv ---------------------------------------------


def _shuffle_nodes(
    src: str,
    n: int,
    c: int,
    g: int,
    hw: int,
    *,
    perm: Sequence[int] = (0, 2, 1, 3, 4),
    split: Sequence[int] | None = None,
    back: Sequence[int] | None = None,
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
@pytest.mark.parametrize(("k", "act"), [(1, "Relu"), (1, ""), (1, "Sigmoid"), (3, "Relu")], ids=str)
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
def test_one_group_conv_shuffle_permutes_its_weights(cpu: str, tmp_path: Path, bias: bool) -> None:
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
    node = helper.make_node("FusedConvShuffle", list(shapes), ["y"], domain="com.ortcore", **attrs)
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
def test_fused_conv_shuffle_kernel_refuses_bad_groups(cpu: str, groups: int, match: str) -> None:
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
