"""A Conv's bias and its fused Relu/Clip in one Cython pass (``bias_clamp``,
in every build this CPU runs),
against numpy and onnx.reference: every Conv path (depthwise, grouped,
pointwise, im2col, Winograd), strides, pads, dilations, non-contiguous
inputs, NaN, and the float16 and float64 fallbacks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ortcore_cpu.kernels._isa import runnable_builds

ortcore = pytest.importorskip("ortcore")
from ortcore.fused_ops import DOMAIN, register_fused_schemas  # noqa: E402

RNG = np.random.default_rng(15)
BUILDS = runnable_builds("conv")
INF = float("inf")


def _x(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(("lo", "hi"), [(-INF, INF), (0.0, INF), (-0.25, 0.5)])
@pytest.mark.parametrize(("rows", "cols", "channels"), [(6, 7, 3), (5, 1, 5), (8, 33, 0)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", BUILDS, ids=[m.__name__.rsplit(".", 1)[1] for m in BUILDS])
def test_bias_clamp(lo: float, hi: float, rows: int, cols: int, channels: int, threads: int,
                    ext: Any) -> None:  # fmt: skip
    y = _x(rows, cols)
    y[0, 0] = np.nan
    b = _x(channels)
    want = y + (np.tile(b, rows // channels)[:, None] if channels else 0)
    want = np.where(want < lo, lo, want)
    want = np.where(want > hi, hi, want)  # NaN stays NaN
    ext.bias_clamp(y, b, lo, hi, threads)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ext", BUILDS, ids=[m.__name__.rsplit(".", 1)[1] for m in BUILDS])
def test_bias_clamp_rejects_rows_not_a_multiple_of_channels(ext: Any) -> None:
    with pytest.raises(ValueError, match="not a multiple"):
        ext.bias_clamp(_x(5, 3), _x(2), 0.0, INF, 1)


def _conv_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, **attrs: Any):
    names = ["x", "w"] + (["b"] if b is not None else [])
    tp = helper.np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node("Conv", names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, tp, None) for n in names],
        [helper.make_tensor_value_info("y", tp, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = dict(zip(names, [x, w] + ([b] if b is not None else []), strict=True))
    return ReferenceEvaluator(model).run(None, feeds)[0]


def _fused(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, act: str, params: list,
           **attrs: Any) -> np.ndarray:  # fmt: skip
    register_fused_schemas()
    names = ["x", "w"] + (["b"] if b is not None else [])
    tp = helper.np_dtype_to_tensor_dtype(x.dtype)
    extra = {"activation_params": params} if params else {}
    node = helper.make_node(
        "FusedConv", names, ["y"], domain=DOMAIN, activation=act, **extra, **attrs
    )
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, tp, None) for n in names],
        [helper.make_tensor_value_info("y", tp, None)],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    )
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
    feeds = dict(zip(names, [x, w] + ([b] if b is not None else []), strict=True))
    return sess.run(None, feeds)[0]


# (x shape, w shape, attrs): every path of _conv_f32
CONV_CASES = [
    ((1, 6, 9, 8), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 4, 7, 7), (8, 2, 3, 3), {"group": 2, "pads": [1, 0, 2, 1], "dilations": [2, 1]}),
    ((1, 12, 5, 6), (9, 4, 1, 1), {"group": 3}),
    ((1, 5, 9, 9), (7, 5, 1, 1), {"strides": [2, 3]}),
    ((1, 3, 11, 10), (4, 3, 3, 3), {"strides": [2, 2]}),
    ((1, 16, 12, 12), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),  # Winograd
    ((2, 3, 13), (5, 3, 4), {"strides": [3], "pads": [2, 1]}),
]
CLAMPS = [("", []), ("Relu", []), ("Clip", [-0.3, 0.4])]


@pytest.mark.parametrize(("xs", "ws", "attrs"), CONV_CASES)
@pytest.mark.parametrize(("act", "params"), CLAMPS)
@pytest.mark.parametrize("bias", [True, False])
def test_fused_conv_clamp(xs: tuple, ws: tuple, attrs: dict, act: str, params: list,
                          bias: bool) -> None:  # fmt: skip
    x, w = _x(*xs), _x(*ws)
    b = _x(ws[0]) if bias else None
    want = _conv_reference(x, w, b, **attrs)
    if act == "Relu":
        want = np.maximum(want, 0)
    elif act == "Clip":
        want = np.clip(want, *params)
    got = _fused(x, w, b, act, params, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_fused_conv_clamp_non_contiguous_input_and_nan() -> None:
    base = _x(1, 4, 10, 18)
    x = base[:, :, :, ::2]  # a strided view
    x[0, 1, 2, 3] = np.nan
    w, b = _x(6, 2, 3, 3), _x(6)
    attrs = {"group": 2, "pads": [1, 1, 1, 1]}
    want = np.maximum(_conv_reference(np.ascontiguousarray(x), w, b, **attrs), 0)
    got = _fused(x, w, b, "Relu", [], **attrs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_fused_conv_clamp_other_dtypes(dtype: type) -> None:
    x, w, b = _x(1, 3, 6, 6, dtype=dtype), _x(4, 3, 3, 3, dtype=dtype), _x(4, dtype=dtype)
    want = np.clip(_conv_reference(x, w, b, pads=[1, 1, 1, 1]), -0.5, 0.5)
    got = _fused(x, w, b, "Clip", [-0.5, 0.5], pads=[1, 1, 1, 1])
    assert got.dtype == dtype
    tol = 2e-2 if dtype == np.float16 else 1e-9
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_a_bias_pass_worth_two_threads_gets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The separate bias pass weighs each output value as BIAS_PASS_WORK
    elements of a memory-bound loop: ResNet-50's pass over 256 x 56 x 56
    values with a residual takes both threads at a grain of 32768."""
    from spies import record_calls

    from ortcore_cpu.kernels import _common, conv

    monkeypatch.setattr(_common, "_grain", 32768)
    monkeypatch.setattr(_common, "share", lambda: 2)
    seen = record_calls(monkeypatch, conv.common, "bias_add_clamp")
    y, z, b = _x(1, 256, 56, 56), _x(1, 256, 56, 56), _x(256)
    want = np.maximum(y + b[:, None, None] + z, 0)
    conv._add_bias(y, b, 2, (0.0, INF), z)
    assert seen == [2]
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    small, zs = _x(1, 64, 7, 7), _x(1, 64, 7, 7)  # not worth waking a thread
    conv._add_bias(small, b[:64], 2, (0.0, INF), zs)
    assert seen == [2, 1]
