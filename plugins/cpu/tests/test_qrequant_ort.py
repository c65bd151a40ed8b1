"""QLinearConv and QLinearMatMul equal onnxruntime's outputs bit for bit.

onnxruntime (MLAS ``MlasRequantizeOutput``) requantizes in float32: the
int32 sum converted to float32, times ``x_scale * w_scale / y_scale``
computed in float32, clamped, rounded half to even, plus the zero point.
Beside random cases (a generic scale ratio; ratios 0.5 and 0.25 that put
sums exactly on halves), :func:`float32_tie` constructs a multiplier for
which some product of two 8-bit values lands on a half in float32 but not
exactly (onnxruntime rounds it to even, a float64 product would not), and
every product of two 8-bit values is requantized with it.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

_TYPES = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}
# (x_scale, w_scale, y_scale): a generic ratio, exact ties, float32-only ties
SCALES = [
    (0.02, 0.0037, 0.11),
    (1.0, 0.5, 1.0),
    (0.5, 0.5, 1.0),
    (2.0, 0.125, 1.0),
]


def _both(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    data = model.SerializeToString()
    got = ortcore.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return got, want


def _model(op: str, x: np.ndarray, consts: list[np.ndarray], attrs: dict[str, Any]) -> Any:
    names = ["x", *(f"c{i}" for i in range(len(consts)))]
    if op == "QLinearConv":  # y_zero_point before the optional bias
        names = names[:9]
    node = helper.make_node(op, names, ["y"], **attrs)
    out_type = _TYPES[consts[6].dtype]
    graph = helper.make_graph(
        [node],
        "q",
        [helper.make_tensor_value_info("x", _TYPES[x.dtype], None)],
        [helper.make_tensor_value_info("y", out_type, None)],
        [numpy_helper.from_array(c, n) for n, c in zip(names[1:], consts, strict=True)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _ints(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...], spread: int = 0) -> Any:
    info = np.iinfo(dtype)
    if spread:
        mid = (int(info.min) + int(info.max) + 1) // 2
        return rng.integers(mid - spread, mid + spread, shape).astype(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def _spread_scale(sx: np.float32, sw: np.float32, k: int) -> np.float32:
    """A y scale that spreads sums of ``k`` products of full-range 8-bit
    values (about 75 * 75 * sqrt(k) in size) over about +-40 steps."""
    return np.float32(float(sx) * float(sw) * np.sqrt(k) * 75 * 75 / 40)


def _check(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 4  # neither flat nor all saturated


CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 8, 9, 9), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 6, 11, 7), (6, 1, 3, 3), {"group": 6, "strides": [2, 1], "pads": [1, 1, 1, 1]}),
    ((1, 16, 7, 7), (24, 16, 1, 1), {}),
    ((1, 4, 19), (5, 4, 3), {"strides": [2]}),
]


@pytest.mark.parametrize(
    ("case", "scales", "types", "per_channel"),
    list(itertools.product(range(len(CONV_CASES)), SCALES, [(np.uint8, np.int8),
                                                             (np.uint8, np.uint8),
                                                             (np.int8, np.int8)], [False, True])),
)  # fmt: skip
def test_qlinear_conv_equals_onnxruntime(
    case: int, scales: tuple, types: tuple, per_channel: bool
) -> None:
    xs, ws, attrs = CONV_CASES[case]
    tx, tw = types
    rng = np.random.default_rng(case)
    m = ws[0]
    sx, sw, sy = (np.float32(s) for s in scales)
    # small operands keep the sums in the 8-bit range at multipliers near 1/2
    spread = 3 if sy == 1 else 0
    x = _ints(rng, tx, xs, spread)
    w = _ints(rng, tw, ws, spread or 0)
    xz = _ints(rng, tx, (), 2)
    wz = np.zeros((m,) if per_channel else (), tw) if tw == np.int8 else _ints(rng, tw, (), 2)
    w_scale = np.full(m, sw, np.float32) if per_channel else np.array(sw, np.float32)
    if per_channel:  # other channels at a generic ratio
        w_scale[1::2] = np.float32(0.0037 if sy != 1 else 0.3)
    y_scale = sy if sy == 1 else _spread_scale(sx, sw, int(np.prod(ws[1:])))
    bias = rng.integers(-40, 40, m).astype(np.int32)
    yz = _ints(rng, tx, (), 4)
    consts = [np.array(sx, np.float32), xz, w, w_scale, wz,
              np.array(y_scale, np.float32), yz, bias]  # fmt: skip
    got, want = _both(_model("QLinearConv", x, consts, attrs), {"x": x})
    _check(got, want)


MATMUL_SHAPES = [((7, 40), (40, 33)), ((2, 5, 64), (64, 17)), ((3, 130), (130, 9))]


@pytest.mark.parametrize(
    ("shapes", "scales", "types", "per_column"),
    list(itertools.product(MATMUL_SHAPES, SCALES, [(np.uint8, np.int8), (np.uint8, np.uint8),
                                                   (np.int8, np.int8)], [False, True])),
)  # fmt: skip
def test_qlinear_matmul_equals_onnxruntime(
    shapes: tuple, scales: tuple, types: tuple, per_column: bool
) -> None:
    (sa_shape, sb_shape), (ta, tb) = shapes, types
    rng = np.random.default_rng(len(sa_shape) * 100 + sb_shape[0])
    n = sb_shape[-1]
    sx, sw, sy = (np.float32(s) for s in scales)
    spread = 3 if sy == 1 else 0
    a = _ints(rng, ta, sa_shape, spread)
    b = _ints(rng, tb, sb_shape, spread)
    az = _ints(rng, ta, (), 2)
    bz = _ints(rng, tb, (n,) if per_column else (), 2)
    b_scale = np.full(n, sw, np.float32) if per_column else np.array(sw, np.float32)
    if per_column:
        b_scale[1::2] = np.float32(0.0037 if sy != 1 else 0.3)
    y_scale = sy if sy == 1 else _spread_scale(sx, sw, sb_shape[0])
    yz = _ints(rng, ta, (), 4)
    consts = [np.array(sx, np.float32), az, b, b_scale, bz, np.array(y_scale, np.float32), yz]
    got, want = _both(_model("QLinearMatMul", a, consts, {}), {"x": a})
    _check(got, want)


def float32_tie(near: float, accs: np.ndarray) -> tuple[np.float32, np.ndarray]:
    """A float32 multiplier ``m`` near ``near`` and the sums of ``accs`` whose
    float32 product with it is a half-integer the exact product is not, and
    which rounds otherwise than the exact one would."""
    accs = accs[accs != 0]
    for acc in accs[np.argsort(-np.abs(accs), kind="stable")]:
        h = np.floor(float(acc) * near) + 0.5
        m = np.float32(h / float(acc))
        p32 = accs.astype(np.float32) * m
        exact = accs.astype(np.float64) * np.float64(m)
        tied = (p32 % 1 == 0.5) & (np.rint(p32) != np.rint(exact))
        if tied.any():
            return m, accs[tied]
    raise AssertionError("no float32 tie found")


_ALL = {
    t: np.arange(np.iinfo(t).min, int(np.iinfo(t).max) + 1).astype(t) for t in (np.uint8, np.int8)
}


@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("op", ["QLinearMatMul", "QLinearConv"])
def test_float32_ties_equal_onnxruntime(types: tuple, op: str) -> None:
    """Every product of two 8-bit values, requantized with a multiplier that
    puts some of them on float32-only ties: onnxruntime's results, which a
    float64 product would not give."""
    ta, tb = types
    va, vb = _ALL[ta], _ALL[tb]
    accs = np.unique(va.astype(np.int64)[:, None] * vb.astype(np.int64)[None, :])
    top = max(abs(int(accs.min())), int(accs.max()))
    m, tied = float32_tie(100.0 / top, accs)
    one = np.array(1.0, np.float32)
    yz = np.array(128 if ta == np.uint8 else 0, ta)
    if op == "QLinearMatMul":
        a, b = va.reshape(-1, 1), vb.reshape(1, -1)
        consts = [np.array(m, np.float32), np.array(0, ta), b, one, np.array(0, tb), one, yz]
        got, want = _both(_model(op, a, consts, {}), {"x": a})
        acc = va.astype(np.int64)[:, None] * vb.astype(np.int64)[None, :]
    else:  # a 1x1 convolution: channel c of y is x times w[c]
        x = va.reshape(1, 1, 16, 16)
        w = vb.reshape(-1, 1, 1, 1)
        consts = [np.array(m, np.float32), np.array(0, ta), w, one, np.array(0, tb), one, yz]
        got, want = _both(_model(op, x, consts, {}), {"x": x})
        acc = vb.astype(np.int64)[:, None] * va.astype(np.int64)[None, :]
        acc = acc.reshape(1, -1, 16, 16)
    np.testing.assert_array_equal(got, want)
    # the ties are there, inside the range, and a float64 product differs
    info = np.iinfo(ta)
    exact = np.rint(acc * np.float64(m)) + int(yz)
    inside = (exact > info.min) & (exact < info.max)
    assert np.isin(acc[inside], tied).any()
    assert np.any(want[inside] != exact[inside])
