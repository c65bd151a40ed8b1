"""The Conv and max pool in one pass (``direct_conv2d_maxpool``, FusedConvPool's
kernel) in every build of ``conv`` this CPU runs, against the direct kernel's
Conv and a numpy max pool: pads, strides, dilations and ceil mode of the pool,
strided Convs, channels past a block, bands of pooled rows, NaN, bias and
clamp; its argument checks; and the FusedConvPool kernel's choice of it (with
onnx.reference as the oracle)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ep_sdk.fused_ops import register_fused_schemas
from ep_sdk.testing import KernelKit
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from spies import record_calls
from test_direct_conv import _packed  # weights packed for a build's block

from ortcore_cpu.kernels import conv
from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

BUILDS = runnable_builds("conv")
IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]
RNG = np.random.default_rng(31)
INF = float("inf")
kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)


def _pool_out(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """MaxPool's output size along one axis (both pads ``p``)."""
    span = n + 2 * p - (k - 1) * d - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:  # the last window must start inside
        out -= 1
    return out


def _numpy_max_pool(
    y: np.ndarray, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
    d: tuple[int, int], out: tuple[int, int],
) -> np.ndarray:  # fmt: skip
    """Max pool of y (M, H, W) to ``out``, pads -inf; NaN never wins."""
    m, h, w = y.shape
    big = np.full((m, h + 2 * p[0] + k[0] * d[0] + out[0] * s[0],
                   w + 2 * p[1] + k[1] * d[1] + out[1] * s[1]), -np.inf)  # fmt: skip
    big[:, p[0] : p[0] + h, p[1] : p[1] + w] = np.where(np.isnan(y), -np.inf, y)
    res = np.full((m, *out), -np.inf)
    for ky in range(k[0]):
        for kx in range(k[1]):
            a, b = ky * d[0], kx * d[1]
            tap = big[:, a : a + out[0] * s[0] : s[0], b : b + out[1] * s[1] : s[1]]
            res = np.maximum(res, tap)
    return res.astype(np.float32)


CASES = [
    # (C, H, W), (M, K), Conv stride, Conv pad, pool (k, s, p, d, ceil)
    ((3, 40, 40), (16, 3), 2, 0, (3, 2, 0, 1, False)),  # SqueezeNet's first layer
    ((3, 45, 37), (12, 7), 2, 3, (3, 2, 1, 1, False)),  # ResNet's, odd sizes
    ((5, 30, 30), (9, 3), 1, 1, (2, 2, 0, 1, False)),  # VGG's 2x2 pools
    ((4, 23, 29), (20, 3), 1, 1, (3, 2, 0, 1, True)),  # ceil mode: a window past the end
    ((2, 19, 21), (7, 5), 1, 2, (3, 1, 1, 1, False)),  # stride-1 pool
    ((3, 26, 26), (11, 3), 1, 0, (2, 2, 0, 2, True)),  # dilated pool
    ((1, 9, 64), (3, 3), 1, 1, (5, 3, 2, 1, True)),
    ((6, 12, 12), (10, 1), 1, 0, (3, 2, 1, 1, False)),  # 1x1 Conv
    ((3, 7, 7), (8, 3), 1, 1, (7, 7, 0, 1, False)),  # one pooled value a channel
    ((2, 5, 5), (4, 3), 1, 1, (3, 3, 2, 1, True)),  # windows wholly in padding
    # many bands of pooled rows (a wide Conv output), channels past a block
    ((2, 150, 300), (9, 3), 1, 1, (3, 2, 1, 1, False)),
]


def _run(
    ext: Any, x: np.ndarray, w: np.ndarray, b: np.ndarray, case: Any,
    clamp: tuple[float, float], threads: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The fused kernel's result and the direct kernel's Conv pooled in numpy."""
    (_, h, wd), (m, k), s, p, (pk, ps, pp, pd, ceil) = case
    oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    out = (_pool_out(oh, pk, ps, pp, pd, ceil), _pool_out(ow, pk, ps, pp, pd, ceil))
    wp = _packed(ext, w)
    scratch = np.empty(ext.direct_conv2d_scratch(x.shape[0], oh, ow, k, k, s, s, 1, 1, True),
                       np.float32)  # fmt: skip
    whole = np.empty((m, oh, ow), np.float32)
    ext.direct_conv2d(x, wp, whole, b, None, scratch, s, s, p, p, 1, 1, *clamp, threads, True)
    y = np.full((m, *out), 7.0, np.float32)
    ext.direct_conv2d_maxpool(x, wp, y, b, scratch, oh, ow, s, s, p, p, 1, 1, *clamp,
                              pk, pk, ps, ps, pp, pp, pd, pd, threads)  # fmt: skip
    return y, _numpy_max_pool(whole, (pk, pk), (ps, ps), (pp, pp), (pd, pd), out)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_conv_maxpool_matches_conv_then_pool(ext: Any, case: Any, threads: int) -> None:
    (c, h, wd), (m, k) = case[:2]
    x = RNG.standard_normal((c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((m, c, k, k)).astype(np.float32)
    b = RNG.standard_normal(m).astype(np.float32)
    for clamp, bias in (((0.0, INF), b), ((-INF, INF), np.empty(0, np.float32)),
                        ((-0.5, 0.5), b)):  # fmt: skip
        got, want = _run(ext, x, w, bias, case, clamp, threads)
        # the sums of a vector may be split otherwise than in the whole
        # Conv's items (AVX2 sums even and odd channels of a lone vector
        # apart): the same up to rounding
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_conv_maxpool_nan_never_wins(ext: Any) -> None:
    """A NaN input makes NaN Conv outputs, which a max pool skips (as the
    MaxPool kernel does) unless a window holds nothing else."""
    x = RNG.standard_normal((2, 20, 20)).astype(np.float32)
    x[1, 7, 9] = np.nan
    w = RNG.standard_normal((5, 2, 3, 3)).astype(np.float32)
    case = ((2, 20, 20), (5, 3), 1, 1, (3, 2, 1, 1, False))
    got, want = _run(ext, x, w, np.empty(0, np.float32), case, (-INF, INF), 2)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_conv_maxpool_refuses_what_it_cannot_do_safely(ext: Any) -> None:
    x = np.zeros((3, 10, 10), np.float32)
    wp = _packed(ext, np.zeros((4, 3, 3, 3), np.float32))
    y = np.zeros((4, 4, 4), np.float32)
    b = np.zeros(4, np.float32)
    scratch = np.zeros(ext.direct_conv2d_scratch(3, 8, 8, 3, 3, 1, 1, 1, 1, True), np.float32)
    conv_args = (8, 8, 1, 1, 0, 0, 1, 1, 0.0, INF)
    pool_args = (3, 3, 2, 2, 0, 0, 1, 1)
    ext.direct_conv2d_maxpool(x, wp, y, b, scratch, *conv_args, *pool_args, 2)
    bad: list[tuple[tuple[Any, ...], str]] = [
        ((x, wp, y, b, scratch[:10], *conv_args, *pool_args, 2), "scratch of 10 floats"),
        ((x, wp, y, np.zeros(3, np.float32), scratch, *conv_args, *pool_args, 2),
         "bias of 3 values"),
        ((x, wp, np.zeros((9, 4, 4), np.float32), b, scratch, *conv_args, *pool_args, 2),
         "packed weights"),
        ((x, wp, y, b, scratch, -1, 8, *conv_args[2:], *pool_args, 2), "negative Conv output"),
        ((x, wp, y, b, scratch, *conv_args, 0, 3, 2, 2, 0, 0, 1, 1, 2), "kernel sizes"),
        ((x, wp, y, b, scratch, *conv_args, 3, 3, 0, 2, 0, 0, 1, 1, 2), "strides"),
        ((x, wp, y, b, scratch, *conv_args, 3, 3, 2, 2, -1, 0, 1, 1, 2), "pads"),
        ((x, wp, y, b, scratch, *conv_args, 3, 3, 2, 2, 0, 0, 1, 0, 2), "dilations"),
        ((np.zeros((0, 10, 10), np.float32), _packed(ext, np.zeros((4, 0, 3, 3), np.float32)),
          y, b, scratch, *conv_args, *pool_args, 2), "no input channels"),
    ]  # fmt: skip
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            ext.direct_conv2d_maxpool(*args)


def _fused_node(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, conv_attrs: dict[str, Any],
    activation: str, pool_attrs: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """FusedConvPool's kernel and onnx.reference's Conv, activation and MaxPool."""
    register_fused_schemas()
    attrs = dict(conv_attrs, activation=activation,
                 **{f"pool_{k}": v for k, v in pool_attrs.items()})  # fmt: skip
    (got,) = kit.build_node("FusedConvPool", [x, w, b], attrs, domain="com.ortcore")(x, w, b)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **conv_attrs)]
    last = "c"
    if activation:
        nodes.append(helper.make_node(activation, ["c"], ["a"]))
        last = "a"
    nodes.append(helper.make_node("MaxPool", [last], ["y"], **pool_attrs))
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in (("x", x), ("w", w), ("b", b))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "w": w, "b": b})
    return got, want


@pytest.mark.parametrize(
    ("shape", "conv_attrs", "activation", "pool_attrs", "fused"),
    [
        # the direct kernel's flat mode (AVX-512) takes the 3-channel image
        ((2, 3, 33, 33), {"kernel_shape": [3, 3], "strides": [2, 2]}, "Relu",
         {"kernel_shape": [3, 3], "strides": [2, 2]}, True),
        ((1, 3, 30, 30), {"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3, 3, 3, 3]}, "",
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
         True),
        # an activation the pass cannot clamp: the Conv's kernel, then the pool's
        ((1, 3, 20, 20), {"kernel_shape": [3, 3]}, "Sigmoid",
         {"kernel_shape": [2, 2], "strides": [2, 2]}, False),
        # a grouped Conv: never the fused kernel
        ((1, 4, 16, 16), {"kernel_shape": [3, 3], "group": 2}, "Relu",
         {"kernel_shape": [2, 2], "strides": [2, 2]}, False),
    ],
)
def test_fused_conv_pool_kernel(
    monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], conv_attrs: dict[str, Any],
    activation: str, pool_attrs: dict[str, Any], fused: bool,
) -> None:  # fmt: skip
    x = RNG.standard_normal(shape).astype(np.float32)
    group = int(conv_attrs.get("group", 1))
    w = RNG.standard_normal((8, shape[1] // group, *conv_attrs["kernel_shape"])).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    calls = record_calls(monkeypatch, conv.common, "direct_conv2d_maxpool")
    got, want = _fused_node(x, w, b, conv_attrs, activation, pool_attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    wide = conv.ext.DIRECT_VECTOR >= conv.DIRECT_WIDE_VECTOR
    assert len(calls) == (shape[0] if fused and wide else 0)


def test_fused_conv_pool_needs_its_pool_window() -> None:
    register_fused_schemas()
    x = np.zeros((1, 3, 8, 8), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match="pool_kernel_shape is missing"):
        kit.build_node("FusedConvPool", [x, w], {"activation": "Relu"}, domain="com.ortcore")


@pytest.mark.parametrize(
    ("pool_attrs", "onnxruntime_runs"),
    [
        # a dilation steps over the Conv's 16 rows: every window is empty
        ({"kernel_shape": [2, 2], "dilations": [17, 1], "pads": [1, 0, 1, 0],
          "strides": [1, 2]}, True),
        # the first row of windows is all pads (a pad as large as the kernel)
        ({"kernel_shape": [1, 2], "pads": [1, 0, 0, 0], "strides": [1, 2]}, False),
        # ceil_mode's last window starts in the end pads (dropped only once)
        ({"kernel_shape": [2, 2], "pads": [0, 0, 3, 0], "strides": [2, 2], "ceil_mode": 1},
         False),
    ],
)  # fmt: skip
def test_fused_conv_pool_windows_without_taps(
    monkeypatch: pytest.MonkeyPatch, pool_attrs: dict[str, Any], onnxruntime_runs: bool
) -> None:
    """FusedConvPool's pool takes MaxPool's rule for a window with no tap on
    the Conv's output (the lowest finite float, as onnxruntime), in the
    direct kernel's pass too: the fused node equals the Conv and MaxPool
    nodes run one after the other (and onnxruntime's, where it runs them)."""
    x = RNG.standard_normal((2, 3, 33, 33)).astype(np.float32)
    w = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    conv_attrs = {"kernel_shape": [3, 3], "strides": [2, 2]}
    calls = record_calls(monkeypatch, conv.common, "direct_conv2d_maxpool")
    register_fused_schemas()
    attrs = dict(conv_attrs, activation="Relu", **{f"pool_{k}": v for k, v in pool_attrs.items()})
    (got,) = kit.build_node("FusedConvPool", [x, w, b], attrs, domain="com.ortcore")(x, w, b)
    (c,) = kit.run_node("Conv", [x, w, b], conv_attrs)
    (want,) = kit.run_node("MaxPool", [np.maximum(c, 0)], pool_attrs, opset=12)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (got == np.finfo(np.float32).min).any()
    if conv.ext.DIRECT_VECTOR >= conv.DIRECT_WIDE_VECTOR:
        assert len(calls) == x.shape[0]
    if onnxruntime_runs:
        ort = pytest.importorskip("onnxruntime")
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **conv_attrs),
                 helper.make_node("Relu", ["c"], ["r"]),
                 helper.make_node("MaxPool", ["r"], ["y"], **pool_attrs)]  # fmt: skip
        graph = helper.make_graph(
            nodes, "g",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
             for n, a in (("x", x), ("w", w), ("b", b))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (ref,) = sess.run(None, {"x": x, "w": w, "b": b})
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
