"""The native integer convolution (``_ext/_qgemm.h``'s fused im2col packing,
the float32 depthwise loop, the vectorized epilogue) and the native
QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear loops against
their numpy paths, bit for bit, on every build of ``qgemm`` this CPU runs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.kernels import _qconv, _qgemm, _qgemm_ref, _qlinear, quantization
from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

BUILDS = runnable_builds("qgemm")
IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]
TYPES = (np.uint8, np.int8)

kit = KernelKit(CPUExecutionProvider, opset=21, threads=2)


@pytest.fixture(params=BUILDS, ids=IDS)
def build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each build this CPU runs, put in place of the best one."""
    for module in (_qgemm, _qconv, _qlinear):
        monkeypatch.setattr(module, "ext", request.param)
    return request.param


def ints(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


# (x shape, w shape, group, strides, dilations, pads begin, pads end)
GEOMETRY = [
    ((1, 5, 50, 53), (7, 5, 3, 3), 1, [1, 1], [1, 1], [1, 1], [1, 1]),  # runs across rows
    ((2, 6, 9, 8), (4, 3, 3, 3), 2, [2, 1], [1, 1], [0, 1], [2, 0]),
    ((1, 3, 23, 31), (9, 3, 7, 7), 1, [2, 2], [1, 1], [3, 3], [3, 3]),  # a ResNet stem
    ((1, 4, 17, 19), (5, 4, 3, 2), 1, [3, 2], [2, 3], [2, 0], [1, 4]),
    ((1, 16, 14, 14), (20, 16, 1, 1), 1, [1, 1], [1, 1], [0, 0], [0, 0]),  # read in place
    ((1, 16, 14, 13), (20, 16, 1, 1), 1, [2, 2], [1, 1], [0, 0], [0, 0]),
    ((1, 9, 7, 7), (50, 9, 3, 3), 1, [1, 1], [1, 1], [1, 1], [1, 1]),  # 49 columns
    ((1, 2, 1, 40), (3, 2, 1, 5), 1, [1, 3], [1, 1], [0, 2], [0, 2]),  # a 1-D one
    ((1, 8, 20, 30), (8, 1, 3, 3), 8, [1, 1], [1, 1], [1, 1], [1, 1]),  # depthwise
    ((2, 6, 21, 22), (6, 1, 5, 3), 6, [2, 3], [2, 1], [2, 1], [0, 3]),
    ((1, 3, 40, 40), (3, 1, 17, 17), 3, [1, 1], [1, 1], [8, 8], [8, 8]),  # > 258 taps: int32
]


def requantize_f32(acc: np.ndarray, mult: Any, zero: int, dtype: Any) -> np.ndarray:
    """onnxruntime's requantization written out: the exact sums ``acc`` as
    float32, times the float32 ``mult``, clamped to the range less the zero
    point, rounded half to even, plus the zero point."""
    info = np.iinfo(dtype)
    y = np.asarray(acc).astype(np.float32) * np.asarray(mult, np.float32)
    assert y.dtype == np.float32
    y = np.clip(y, np.float32(info.min - zero), np.float32(info.max - zero))
    return (np.rint(y) + zero).astype(dtype)


def _conv(
    x: np.ndarray, w: np.ndarray, group: int, strides: list[int], dil: list[int],
    begin: list[int], end: list[int],
) -> np.ndarray:  # fmt: skip
    """float64 (x, w already centered) by a plain loop over the window."""
    n, _, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (begin[0], end[0]), (begin[1], end[1])])
    oh = (h + begin[0] + end[0] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (wd + begin[1] + end[1] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for i, j in itertools.product(range(kh), range(kw)):
        r0, c0 = i * dil[0], j * dil[1]
        win = xp[:, :, r0 : r0 + (oh - 1) * strides[0] + 1 : strides[0],
                 c0 : c0 + (ow - 1) * strides[1] + 1 : strides[1]]  # fmt: skip
        for g in range(group):
            wg = w[g * mg : (g + 1) * mg, :, i, j]
            y[:, g * mg : (g + 1) * mg] += np.einsum(
                "mc,nchw->nmhw", wg, win[:, g * cg : (g + 1) * cg]
            )
    return y


@pytest.mark.parametrize("case", range(len(GEOMETRY)))
@pytest.mark.parametrize(("tx", "tw"), list(itertools.product(TYPES, TYPES)),
                         ids=lambda t: np.dtype(t).name)  # fmt: skip
def test_conv_is_exact(
    build: Any, case: int, tx: Any, tw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_qconv, "threads_for", lambda work, threads: threads)  # small shapes too
    xs, ws, group, strides, dil, begin, end = GEOMETRY[case]
    rng = np.random.default_rng(case)
    x, w = ints(rng, tx, xs), ints(rng, tw, ws)
    m = ws[0]
    xz = ints(rng, tx, ())
    # per-channel weight zero points, some nonzero (the column sums' path)
    wz = ints(rng, tw, (m,)) if case % 2 else np.zeros(m, tw)
    acc = _conv(
        x.astype(np.float64) - float(xz), w.astype(np.float64) - wz.reshape(-1, 1, 1, 1),
        group, strides, dil, begin, end,
    )  # fmt: skip
    conv = _qconv.QConv(group, lambda sp, k: (strides, dil, begin, end), constant_weight=True)
    for threads in (1, 3):
        got = conv.run(x, xz, w, wz, np.dtype(np.int32), threads)
        assert got is not None
        np.testing.assert_array_equal(got, acc.astype(np.int64).astype(np.int32))
        for out in TYPES:
            mult = ((rng.random(m) + 0.5) * 100 / (np.abs(acc).max() + 300)).astype(np.float32)
            bias = rng.integers(-300, 300, m).astype(np.int32)
            yz = int(ints(rng, out, ()))
            got = conv.run(x, xz, w, wz, np.dtype(out), threads, mult=mult, bias=bias, y_zero=yz)
            total = acc + bias.reshape(-1, 1, 1)
            want = requantize_f32(total, mult.reshape(-1, 1, 1), yz, out)
            np.testing.assert_array_equal(got, want)
            ref = _qgemm_ref.requantize(total.astype(np.int32), mult.reshape(-1, 1, 1), yz, out)
            np.testing.assert_array_equal(ref, want)
            assert len(np.unique(got)) > 3  # neither flat nor all saturated


@pytest.mark.parametrize("out", [np.uint8, np.int8, np.int32])
def test_epilogue_ties_round_half_to_even(build: Any, out: Any) -> None:
    """Accumulators whose scaled values end in .5 round to even, in every
    column of a tile (the vector lanes and the scalar tail)."""
    a = np.arange(-40, 40, dtype=np.int8).reshape(-1, 1)  # acc = a * b: -40..39
    b = np.ones((1, 53), np.int8)
    b[0, ::2] = -1
    if out == np.int32:
        got = _qgemm.int_matmul(a, None, b, None)
        np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))
        return
    got = _qgemm.int_matmul_requantize(a, None, b, None, np.float32(0.5), 3, out)
    acc = (a.astype(np.float64) @ b.astype(np.float64)) * 0.5
    info = np.iinfo(out)
    np.testing.assert_array_equal(got, np.clip(np.rint(acc) + 3, info.min, info.max))


@pytest.mark.parametrize("mult", [0.5, 0.25, 0.5 - 2.0**-25, 0.5 + 2.0**-24, 1.5 - 2.0**-23, 1 / 3])
@pytest.mark.parametrize("bias", [None, 1 << 23, -(1 << 25)])
def test_requantize_near_half_integers(build: Any, mult: float, bias: int | None) -> None:
    """Multipliers that put many scaled sums on or next to a half-integer,
    sums past 2**24 (rounded as they become float32) and biases past it:
    every build gives onnxruntime's float32 results (the product rounded to
    float32 first, so a product just off a half that lands on it in float32
    rounds to even), as the numpy reference does."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 4, (37, 600)).astype(np.uint8)
    b = rng.integers(-2, 3, (600, 61)).astype(np.int8)
    a[:3] = 255
    b[:, :5] = 127  # sums of 600 * 255 * 127 > 2**24 there
    m = np.float32(mult)
    ib = None
    if bias is not None:  # small biases, and a few large ones
        ib = rng.integers(-50, 50, 61)
        ib[5:9] = bias
    acc = a.astype(np.float64) @ b.astype(np.float64) + (0 if ib is None else ib)
    exact = acc * np.float64(m)
    for zero, out in ((3, np.uint8), (-5, np.int8)):
        got = _qgemm.int_matmul_requantize(a, None, b, None, m, zero, out, bias=ib)
        want = requantize_f32(acc, m, zero, out)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(_qgemm_ref.requantize(acc, m, zero, out), want)
        info = np.iinfo(out)
        inside = (exact + zero > info.min) & (exact + zero < info.max)
        assert inside.sum() > 500
        if mult in (0.5, 0.25):
            assert np.any(inside & (exact % 1 == 0.5))  # ties inside the range


@pytest.mark.parametrize("out", [np.uint8, np.int8])
def test_requantize_float32_only_ties(build: Any, out: Any) -> None:
    """A multiplier for which some products of two 8-bit values land on a
    half in float32 but not exactly: every build rounds those to even, as
    onnxruntime does, where the exact product rounds the other way."""
    a = np.arange(256).astype(np.uint8).reshape(-1, 1)
    b = np.arange(-128, 128).astype(np.int8).reshape(1, -1)
    acc = a.astype(np.float64) @ b.astype(np.float64)
    m, tied = None, None
    for v in np.unique(acc)[::-1]:  # m = float32(h / v) for a half h near v / 300
        h = np.floor(v / 300) + 0.5
        m = np.float32(h / v)
        p32 = acc.astype(np.float32) * m
        tied = (p32 % 1 == 0.5) & (np.rint(p32) != np.rint(acc * np.float64(m)))
        if tied.any():
            break
    assert tied is not None and tied.any()
    zero = 128 if out == np.uint8 else 0
    got = _qgemm.int_matmul_requantize(a, None, b, None, m, zero, out, threads=2)
    np.testing.assert_array_equal(got, requantize_f32(acc, m, zero, out))
    exact = np.rint(acc * np.float64(m)) + zero
    assert np.all((exact[tied] > np.iinfo(out).min) & (exact[tied] < np.iinfo(out).max))
    assert np.all(got[tied] != exact[tied])


def _quantize_reference(x: np.ndarray, s: np.ndarray, z: np.ndarray, dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        return np.clip(np.rint(x / s) + z.astype(np.float32), info.min, info.max).astype(dtype)


def _floats(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values that end in .5 after division by 0.5 .. 2 (ties), large ones,
    and NaN and the infinities."""
    x = (rng.integers(-600, 600, n) / 4).astype(np.float32)
    x[::7] = rng.standard_normal(x[::7].size) * 1e6
    x[3::11] = [np.nan, np.inf, -np.inf][0 : x[3::11].size][:] if n < 40 else x[3::11]
    x[5] = np.nan
    x[6] = np.inf
    x[8] = -np.inf
    return x


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [17, 1000, 70001])
def test_quantize_and_dequantize(build: Any, dtype: Any, n: int) -> None:
    rng = np.random.default_rng(n)
    x = _floats(rng, n)
    for s, z in ((0.5, 3), (2.0, -1 if dtype == np.int8 else 200), (0.25, 0)):
        sv, zv = np.array([s], np.float32), np.array([z], np.float32)
        y = np.empty(n, dtype)
        build.quantize(x, sv, zv, dtype == np.int8, y.view(np.uint8), n, 3)
        want = _quantize_reference(x, np.float32(s), np.array(z), dtype)
        np.testing.assert_array_equal(y, want)
        back = np.empty(n, np.float32)
        build.dequantize(y.view(np.uint8), dtype == np.int8, np.array([z], np.int32), sv, back,
                         n, 3)  # fmt: skip
        np.testing.assert_array_equal(back, (y.astype(np.float32) - np.float32(z)) * sv[0])
    # per channel: 5 channels of 13 values, twice over
    x = _floats(rng, 130).reshape(2, 5, 13)
    s = (rng.random(5) + 0.5).astype(np.float32)
    z = ints(rng, dtype, (5,))
    got = _qlinear.quantize(x, s, z, np.dtype(dtype), axis=1, threads=2)
    np.testing.assert_array_equal(got, _quantize_reference(x, s.reshape(5, 1), z.reshape(5, 1),
                                                           dtype))  # fmt: skip
    got = _qlinear.dequantize(ints(rng, dtype, (2, 5, 13)), s, z, axis=-2)
    assert got is not None and got.dtype == np.float32


@pytest.mark.parametrize("n", [0, 1, 15, 1000, 100003])
def test_dynamic_quantize(build: Any, n: int) -> None:
    rng = np.random.default_rng(n)
    for spread in (1e-3, 1.0, 1e5):
        x = (rng.standard_normal(n) * spread).astype(np.float32)
        for sample in (x, np.abs(x), -np.abs(x)):
            got = _qlinear.dynamic_quantize(sample.reshape(1, -1), threads=3)
            want = _qlinear._dynamic_reference(sample.reshape(1, -1))
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1] == want[1] and got[2] == want[2]
            assert type(got[1]) is np.float32 and type(got[2]) is np.uint8
    if n > 10:
        x[n // 2] = np.nan  # the reference's range is then [0, 0]
        with np.errstate(invalid="ignore"):
            want = _qlinear._dynamic_reference(x)
        got = _qlinear.dynamic_quantize(x)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1] and got[2] == want[2]


def test_dynamic_quantize_is_public_in_qgemm() -> None:
    assert _qgemm.dynamic_quantize is _qlinear.dynamic_quantize


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize(("shape", "axis", "per"), [((3, 4, 5), 1, 4), ((3, 4, 5), -1, 5),
                                                    ((6, 7), 0, 6), ((2, 9), 1, 1)])  # fmt: skip
def test_onnx_kernels_use_the_native_loops(dtype: Any, shape: tuple, axis: int, per: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    rng = np.random.default_rng(3)
    x = _floats(rng, int(np.prod(shape))).reshape(shape)
    s = (rng.random(per) + 0.25).astype(np.float32).reshape(() if per == 1 else (per,))
    z = ints(rng, dtype, s.shape)
    got = kit.run_node("QuantizeLinear", [x, s, z], {"axis": axis})[0]
    back = kit.run_node("DequantizeLinear", [got, s, z], {"axis": axis})[0]
    with monkeypatch.context() as patch, np.errstate(invalid="ignore"):
        patch.setattr(quantization, "native_quantize", lambda *a: None)
        patch.setattr(quantization, "native_dequantize", lambda *a: None)
        want = kit.run_node("QuantizeLinear", [x, s, z], {"axis": axis})[0]
        want_back = kit.run_node("DequantizeLinear", [got, s, z], {"axis": axis})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(back, want_back)
    y, scale, zp = kit.run_node("DynamicQuantizeLinear", [np.abs(x) - 3], num_outputs=3)
    want = _qlinear._dynamic_reference(np.abs(x) - 3)
    np.testing.assert_array_equal(y, want[0])
    assert scale.dtype == np.float32 and scale == want[1] and zp == want[2]
