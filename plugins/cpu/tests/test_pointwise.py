"""1x1 Convs on the packed GEMM (``gemm.pointwise``): every build this CPU
runs against a float64 product with the bias, residual and clamp, its
argument checks, and the Conv nodes that take it (a constant weight, one
group or a few channels a group, no pads, planes whose rows do not alias
in the cache) and the ones that keep BLAS, against onnx.reference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from test_gemm import BUILDS, IDS, _close  # the GEMM builds and their float64 tolerance

from ortcore_cpu.kernels import conv

RNG = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# (M, K, N): under one register tile; ragged tiles and a partial last panel;
# N under one panel; K past one slice (384); M past one row block (240) on
# few panels (split along M); a plane of SqueezeNet's
SHAPES = [(1, 1, 1), (5, 3, 7), (13, 17, 33), (37, 400, 65), (250, 70, 20), (64, 800, 130),
          (16, 64, 3025)]  # fmt: skip


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_build_against_float64(build: Any, shape: tuple[int, int, int], threads: int) -> None:
    """Bias, residual and clamp; the output a window of a wider array (the
    channels of a concatenation), whose other columns stay as they were."""
    m, k, n = shape
    a, x, bias, z = _f32(m, k), _f32(k, n), _f32(m), _f32(m, n)
    ap = build.pack_a_batch(a[None])
    ref = a.astype(np.float64) @ x.astype(np.float64)
    wide = np.full((m, n + 9), 7.0, np.float32)
    build.pointwise(ap, m, x, wide[:, 4 : 4 + n], bias, z, 0.0, 1.5, threads)
    _close(wide[:, 4 : 4 + n], np.clip(ref + bias[:, None] + z, 0.0, 1.5), k)
    assert (wide[:, :4] == 7.0).all() and (wide[:, 4 + n :] == 7.0).all()
    # no bias, residual or clamp
    out = np.full((m, n), np.nan, np.float32)
    build.pointwise(ap, m, x, out, np.empty(0, np.float32), None, -np.inf, np.inf, threads)
    _close(out, ref, k)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize(
    ("group", "mg", "kg", "n"), [(2, 5, 3, 7), (4, 34, 34, 196), (3, 13, 400, 40)]
)
def test_groups_against_float64(
    build: Any, threads: int, group: int, mg: int, kg: int, n: int
) -> None:
    """Each group's rows of the output are its weights times its rows of
    the input, with its bias and residual rows; more threads than groups
    split each group's tiles too."""
    a, x = _f32(group, mg, kg), _f32(group * kg, n)
    bias, z = _f32(group * mg), _f32(group * mg, n)
    out = np.full((group * mg, n), np.nan, np.float32)
    build.pointwise(build.pack_a_batch(a), group * mg, x, out, bias, z, -1.0, 2.0, threads, group)
    xs = x.astype(np.float64).reshape(group, kg, n)
    ref = np.concatenate([a[g].astype(np.float64) @ xs[g] for g in range(group)])
    _close(out, np.clip(ref + bias[:, None] + z, -1.0, 2.0), kg)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize(
    ("group", "mg", "kg", "n"), [(2, 5, 3, 7), (4, 34, 34, 49), (4, 28, 6, 196), (3, 13, 40, 40)]
)
def test_interleaved_groups_against_float64(
    build: Any, threads: int, group: int, mg: int, kg: int, n: int
) -> None:
    """With ``interleave`` row j of group g's output is row j * group + g of
    y (ShuffleNet's channel shuffle), with that group's bias and clamp; the
    output a window of a wider array whose other columns stay."""
    a, x, bias = _f32(group, mg, kg), _f32(group * kg, n), _f32(group * mg)
    wide = np.full((group * mg, n + 5), 7.0, np.float32)
    out = wide[:, 2 : 2 + n]
    build.pointwise(
        build.pack_a_batch(a), group * mg, x, out, bias, None, 0.0, 3.0, threads, group, True
    )
    xs = x.astype(np.float64).reshape(group, kg, n)
    ref = np.concatenate([a[g].astype(np.float64) @ xs[g] for g in range(group)])
    ref = np.clip(ref + bias[:, None], 0.0, 3.0)
    shuffled = ref.reshape(group, mg, n).transpose(1, 0, 2).reshape(group * mg, n)
    _close(out, shuffled, kg)
    assert (wide[:, :2] == 7.0).all() and (wide[:, 2 + n :] == 7.0).all()


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_clamp_keeps_nan(build: Any) -> None:
    """A NaN sum stays NaN through the clamp, as Relu and Clip keep it."""
    a, x = _f32(7, 5), _f32(5, 40)
    x[2, 3] = np.nan
    out = np.zeros((7, 40), np.float32)
    build.pointwise(build.pack_a_batch(a[None]), 7, x, out, _f32(7), None, 0.0, 6.0, 2)
    assert np.isnan(out[:, 3]).all()
    rest = np.delete(out, 3, axis=1)
    assert not np.isnan(rest).any() and rest.min() >= 0.0 and rest.max() <= 6.0


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_refuses_bad_arguments(build: Any) -> None:
    a, x = _f32(6, 4), _f32(4, 20)
    ap = build.pack_a_batch(a[None])
    none = np.empty(0, np.float32)
    y = np.empty((6, 20), np.float32)
    with pytest.raises(ValueError, match="pointwise: packed A"):
        build.pointwise(ap, 6, _f32(5, 20), y, none, None, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="pointwise: packed A"):
        build.pointwise(ap, 6, x, np.empty((6, 21), np.float32), none, None, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="pointwise: bias of 5 values"):
        build.pointwise(ap, 6, x, y, _f32(5), None, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="pointwise: residual"):
        build.pointwise(ap, 6, x, y, none, _f32(6, 19), 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="contiguous"):
        build.pointwise(ap, 6, np.asfortranarray(x), y, none, None, 0.0, 1.0, 1)
    with pytest.raises(TypeError, match="bias"):
        build.pointwise(ap, 6, x, y, None, None, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="4 input and 6 output rows in 4 groups"):
        build.pointwise(ap, 6, x, y, none, None, 0.0, 1.0, 1, 4)
    with pytest.raises(ValueError, match="in 2 groups"):  # packed for one group
        build.pointwise(ap, 6, x, y, none, None, 0.0, 1.0, 1, 2)
    with pytest.raises(ValueError, match="residual with interleaved"):
        build.pointwise(ap, 6, x, y, none, _f32(6, 20), 0.0, 1.0, 1, 1, True)


# --- Conv nodes in sessions ---------------------------------------------------


@pytest.fixture(autouse=True)
def _narrow_direct_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Conv chooses its path as a build with narrow vectors does (the
    AVX-512 build computes 1x1 Convs directly)."""
    monkeypatch.setattr(conv.selection, "DIRECT_WIDE_VECTOR", 1 << 30)


@pytest.fixture
def pointwise_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """Records the input shape of every call of the pointwise path."""
    calls: list[tuple[int, ...]] = []
    real = conv._conv_pointwise

    def spy(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(x.shape)
        return real(x, *args, **kwargs)

    monkeypatch.setattr(conv.pointwise, "_conv_pointwise", spy)
    yield calls


NARROW = conv.gemm.ext.VECTOR >= 8
"""Whether the GEMM build this CPU runs takes pointwise Convs (not the
x86-64 baseline's)."""


def _model(
    xs: tuple[int, ...],
    m: int,
    strides: int = 1,
    tail: str = "Relu",
    weight_input: bool = False,
    group: int = 1,
) -> onnx.ModelProto:
    """x -> Conv 1x1 (m channels in ``group`` groups, bias) -> ``tail``:
    Relu, Add (of a residual input r), Concat (with a second 1x1 Conv of x,
    3 channels) or Identity. ``weight_input``: the weight is a graph input,
    not a constant."""
    c = xs[1]
    w = numpy_helper.from_array(_f32(m, c // group, 1, 1) / np.sqrt(c), "w")
    b = numpy_helper.from_array(_f32(m), "b")
    w2 = numpy_helper.from_array(_f32(3, c, 1, 1), "w2")
    conv_node = helper.make_node(
        "Conv", ["x", "w", "b"], ["c"], strides=[strides, strides], group=group
    )
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))]
    nodes = [conv_node]
    if tail == "Add":
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
        nodes.append(helper.make_node("Add", ["c", "r"], ["y"]))
    elif tail == "Concat":
        nodes.append(helper.make_node("Relu", ["c"], ["cr"]))
        nodes.append(helper.make_node("Conv", ["x", "w2"], ["d"]))
        nodes.append(helper.make_node("Relu", ["d"], ["dr"]))
        nodes.append(helper.make_node("Concat", ["cr", "dr"], ["y"], axis=1))
    else:
        nodes.append(helper.make_node(tail, ["c"], ["y"]))
    inits = [w, b, w2]
    if weight_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, None))
        inits = [b, w2]
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int = 2) -> np.ndarray:
    """The model's output from an ortcore session, checked against onnx.reference."""
    ortcore = pytest.importorskip("ortcore")
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
    got = sess.run(None, feeds)[0]
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return got


@pytest.mark.skipif(not NARROW, reason="the x86-64 baseline build keeps BLAS")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("xs", "m", "strides", "tail"),
    [
        ((1, 16, 55, 55), 64, 1, "Relu"),  # SqueezeNet's expand
        ((1, 64, 13, 13), 16, 1, "Concat"),  # into its channels of a Concat
        ((2, 24, 9, 7), 50, 1, "Add"),  # two images, a residual
        ((1, 32, 28, 28), 40, 2, "Relu"),  # strided: the positions it reads
        ((1, 7, 3, 5), 5, 1, "Identity"),  # less than one panel
    ],
)
def test_conv_nodes_take_pointwise(
    pointwise_calls: list[tuple[int, ...]],
    xs: tuple[int, ...],
    m: int,
    strides: int,
    tail: str,
    threads: int,
) -> None:
    feeds = {"x": _f32(*xs)}
    if tail == "Add":
        out = (xs[0], m, *((s - 1) // strides + 1 for s in xs[2:]))
        feeds["r"] = _f32(*out)
    _run(_model(xs, m, strides, tail), feeds, threads)
    assert pointwise_calls


@pytest.mark.skipif(not NARROW, reason="the x86-64 baseline build keeps BLAS")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("xs", "m", "group"), [((1, 272, 14, 14), 272, 4), ((2, 6, 5, 5), 9, 3)])
def test_grouped_conv_nodes_take_pointwise(
    pointwise_calls: list[tuple[int, ...]], xs: tuple[int, ...], m: int, group: int, threads: int
) -> None:
    """ShuffleNet's grouped 1x1 Convs, and a small one of two images."""
    _run(_model(xs, m, group=group), {"x": _f32(*xs)}, threads)
    assert pointwise_calls


@pytest.mark.skipif(not NARROW, reason="the x86-64 baseline build keeps BLAS")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("n", "shuffle"), [(1, 4), (2, 4), (1, 2)])
def test_shuffled_grouped_conv_nodes(
    monkeypatch: pytest.MonkeyPatch, threads: int, n: int, shuffle: int
) -> None:
    """ShuffleNet's grouped 1x1 Conv, Relu and channel shuffle: one
    FusedConvShuffle on the pointwise path, its rows written shuffled when
    the shuffle's groups are the Conv's, shuffled after otherwise."""
    interleaved: list[bool] = []
    real = conv._conv_pointwise

    def spy(*args: Any, **kwargs: Any) -> np.ndarray:
        interleaved.append(bool(kwargs.get("interleave")))
        return real(*args, **kwargs)

    monkeypatch.setattr(conv.pointwise, "_conv_pointwise", spy)
    xs = (n, 32, 7, 7)
    model = _model(xs, 32, group=4)
    relu = model.graph.node[1]
    relu.output[0] = "a"
    model.graph.node.extend([
        helper.make_node("Reshape", ["a", "s1"], ["r1"]),
        helper.make_node("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "s2"], ["y"]),
    ])  # fmt: skip
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([n, shuffle, 32 // shuffle, 7, 7], np.int64), "s1"),
        numpy_helper.from_array(np.array(xs, np.int64), "s2"),
    ])  # fmt: skip
    _run(model, {"x": _f32(*xs)}, threads)
    assert interleaved and all(i == (shuffle == 4) for i in interleaved)


@pytest.mark.parametrize(
    ("xs", "m", "weight_input", "group"),
    [
        ((1, 16, 56, 56), 64, False, 1),  # 3136 positions: rows 12544 bytes apart alias
        ((1, 512, 13, 13), 1000, False, 1),  # more weights than POINTWISE_MAX_WEIGHTS
        ((1, 16, 13, 13), 8, True, 1),  # a weight that is not a constant
        ((1, 16, 13, 13), 16, False, 16),  # depthwise: a kernel of its own
    ],
)
def test_conv_nodes_keep_blas(
    pointwise_calls: list[tuple[int, ...]],
    xs: tuple[int, ...],
    m: int,
    weight_input: bool,
    group: int,
) -> None:
    feeds = {"x": _f32(*xs)}
    if weight_input:
        feeds["w"] = _f32(m, xs[1], 1, 1)
    _run(_model(xs, m, weight_input=weight_input, group=group), feeds)
    assert not pointwise_calls


def test_float16_conv_on_pointwise(pointwise_calls: list[tuple[int, ...]]) -> None:
    """A float16 Conv computes in float32 and returns float16."""
    model = _model((1, 8, 9, 9), 6)
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init).astype(np.float16)
        init.CopyFrom(numpy_helper.from_array(arr, init.name))
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    x = _f32(1, 8, 9, 9).astype(np.float16)
    ortcore = pytest.importorskip("ortcore")
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    got = sess.run(None, {"x": x})[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=2e-2)
    assert bool(pointwise_calls) == NARROW
