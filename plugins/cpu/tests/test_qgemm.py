"""The native 8-bit GEMM (``_ext/qgemm*``, through ``kernels/_qgemm.py``)
against the numpy reference (``kernels/_qgemm_ref.py``), bit for bit, on
every build this CPU runs; and the quantized kernels' native paths against
their numpy paths and onnx.reference."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.kernels import _qconv, _qgemm, _qgemm_ref, quantization
from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

BUILDS = runnable_builds("qgemm")
IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]
TYPES = (np.uint8, np.int8)
PAIRS = list(itertools.product(TYPES, TYPES))

kit = KernelKit(CPUExecutionProvider, opset=21, threads=2)


@pytest.fixture(params=BUILDS, ids=IDS)
def build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Each build of the GEMM this CPU runs, put in place of the best one."""
    monkeypatch.setattr(_qgemm, "ext", request.param)
    monkeypatch.setattr(_qconv, "ext", request.param)
    yield request.param


def ints(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def zero(rng: np.random.Generator, dtype: type, kind: str, n: int) -> Any:
    if kind == "none":
        return None
    if kind == "scalar" or n == 0:  # the reference takes no empty vector
        return ints(rng, dtype, ())
    return ints(rng, dtype, (n,))


SHAPES = [(0, 3, 4), (1, 1, 1), (3, 0, 5), (1, 17, 1), (5, 7, 3), (9, 64, 49), (17, 301, 50),
          (2, 1031, 9), (33, 96, 130)]  # fmt: skip


@pytest.mark.parametrize(("ta", "tb"), PAIRS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("zeros", ["none", "scalar", "vector"])
def test_int_matmul_matches_reference(build: Any, ta: type, tb: type, zeros: str) -> None:
    rng = np.random.default_rng(11)
    for m, k, n in SHAPES:
        a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
        za, zb = zero(rng, ta, zeros, m), zero(rng, tb, zeros, n)
        want = _qgemm_ref.int_matmul(a, za, b, zb)
        for threads in (1, 2):
            got = _qgemm.int_matmul(a, za, b, zb, threads=threads)
            assert got.dtype == np.int32 and got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{(m, k, n)} threads={threads}")
        packed = _qgemm.pack_b(b, zb)
        assert packed is not None
        got = _qgemm.int_matmul(a, za, b, zb, threads=2, packed=packed)
        np.testing.assert_array_equal(got, want, err_msg=f"packed {(m, k, n)}")


def test_int_matmul_wraps_as_int32(build: Any) -> None:
    """Sums past int32 wrap as the reference's cast does."""
    a = np.full((3, 70000), 255, np.uint8)
    b = np.full((70000, 5), -128, np.int8)
    want = _qgemm_ref.int_matmul(a, 0, b, 127)
    np.testing.assert_array_equal(_qgemm.int_matmul(a, 0, b, 127, threads=2), want)


def test_batch_broadcast_and_vectors(build: Any) -> None:
    rng = np.random.default_rng(3)
    a = ints(rng, np.uint8, (2, 1, 6, 10))
    b = ints(rng, np.int8, (3, 10, 7))
    cases = [
        (a, np.arange(6, dtype=np.uint8), b, np.int8(-3)),
        (a[0, 0], None, b, None),
        (a, 5, b[0], np.arange(7, dtype=np.int8)),
        (a[0, 0, 0], 1, b, 2),
        (a, 0, b[0, :, 0], 4),
        (a[0, 0, 0], None, b[0, :, 0], None),
    ]
    for x, zx, y, zy in cases:
        want = _qgemm_ref.int_matmul(x, zx, y, zy)
        got = _qgemm.int_matmul(x, zx, y, zy, threads=2)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_packed_weight_is_used_only_for_its_arrays(build: Any) -> None:
    rng = np.random.default_rng(5)
    a, b = ints(rng, np.uint8, (8, 20)), ints(rng, np.int8, (20, 40))
    other = ints(rng, np.int8, (20, 40))
    packed = _qgemm.pack_b(b, None)
    got = _qgemm.int_matmul(a, None, other, None, packed=packed)
    np.testing.assert_array_equal(got, _qgemm_ref.int_matmul(a, None, other, None))
    cache = _qgemm.WeightCache()
    assert cache.get(b, None) is cache.get(b, None)
    assert cache.get(other, None) is not packed


@pytest.mark.parametrize(("ta", "tb"), PAIRS, ids=lambda t: np.dtype(t).name)
def test_int_matmul_to_float(build: Any, ta: type, tb: type) -> None:
    rng = np.random.default_rng(9)
    a, b = ints(rng, ta, (2, 19, 45)), ints(rng, tb, (45, 37))
    za, zb = ints(rng, ta, ()), ints(rng, tb, (37,))
    scale = np.float32(0.0123)
    for b_scale, bias in [
        (np.float32(0.5), None),
        ((rng.random(37) * 0.1).astype(np.float32), rng.standard_normal(37).astype(np.float32)),
        (np.float32(0.25), rng.standard_normal((19, 37)).astype(np.float32)),
        # one scale, a bias per column (dynamic quantization's MatMul + Add)
        (np.float32(0.75), rng.standard_normal(37).astype(np.float32)),
        # a scale per column, one bias
        ((rng.random(37) * 0.1).astype(np.float32), np.float32(0.5)),
    ]:
        want = _qgemm_ref.int_matmul_to_float(a, za, scale, b, zb, b_scale, bias)
        got = _qgemm.int_matmul_to_float(a, za, scale, b, zb, b_scale, bias, threads=2)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("ta", "tb"), PAIRS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("out", TYPES, ids=lambda t: np.dtype(t).name)
def test_int_matmul_requantize(build: Any, ta: type, tb: type, out: type) -> None:
    rng = np.random.default_rng(13)
    a, b = ints(rng, ta, (23, 70)), ints(rng, tb, (70, 29))
    za, zb = ints(rng, ta, ()), ints(rng, tb, (29,))
    yz = ints(rng, out, ())
    bias = rng.integers(-3000, 3000, 29).astype(np.int32)
    for mult in (np.float32(0.0007), (rng.random(29) * 0.002).astype(np.float32)):
        acc = _qgemm_ref.int_matmul(a, za, b, zb).astype(np.int64) + bias
        want = _qgemm_ref.requantize(acc, mult, yz, out)
        got = _qgemm.int_matmul_requantize(a, za, b, zb, mult, yz, out, bias=bias, threads=2)
        np.testing.assert_array_equal(got, want)
        # the reference is onnxruntime's float32 arithmetic, element by element
        lo, hi = np.iinfo(out).min, np.iinfo(out).max
        ms = np.broadcast_to(mult, (29,))
        for (i, j), v in np.ndenumerate(acc):
            y = np.float32(v) * ms[j]
            assert isinstance(y, np.float32)
            y = min(max(y, np.float32(lo - int(yz))), np.float32(hi - int(yz)))
            assert want[i, j] == int(np.rint(y)) + int(yz)


def _isa_choice(cap: str) -> str:
    code = "from ortcore_cpu.kernels import _qgemm; print(_qgemm.ext.__name__)"
    env = {**os.environ, "ORTCORE_CPU_ISA": cap}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().rsplit(".", 1)[1]


def test_isa_cap_chooses_the_build() -> None:
    assert _isa_choice("baseline") == "qgemm"
    names = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]
    capped = _isa_choice("avx2")
    assert capped in {"qgemm", "qgemm_avx2", "qgemm_avxvnni"} and capped in names
    assert _isa_choice("") == names[-1]


def test_builds_need_their_instructions() -> None:
    from ortcore_cpu._ext import qgemm

    features = qgemm.cpu_features()
    names = {m.__name__.rsplit(".", 1)[1] for m in BUILDS}
    assert ("qgemm_avx512" in names) == ("avx512vnni" in features)
    assert ("qgemm_avxvnni" in names) <= ("avxvnni" in features)
    assert ("qgemm_avx2" in names) <= ("avx2" in features)


# -- kernels: native against the numpy path and onnx.reference ---------------


def _reference_requantize(a, a_zero, b, b_zero, mult, y_zero, dtype, **kw):  # type: ignore[no-untyped-def]
    acc = np.matmul(
        a.astype(np.float64) - np.asarray(0 if a_zero is None else a_zero, np.float64),
        b.astype(np.float64) - np.asarray(0 if b_zero is None else b_zero, np.float64),
    )
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    yz = 0 if y_zero is None else int(y_zero)
    assert np.asarray(mult).dtype == np.float32  # computed in float32
    y = acc.astype(np.float32) * mult  # onnxruntime's float32 product
    return (np.rint(np.clip(y, np.float32(lo - yz), np.float32(hi - yz))) + yz).astype(dtype)


CONV_GEOMETRY = [
    # (x shape, w shape, attributes)
    ((1, 4, 9, 8), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 8), (6, 2, 3, 3), {"group": 2, "strides": [2, 1]}),
    ((1, 6, 10, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 2, 0, 1]}),
    ((1, 6, 10, 7), (6, 1, 5, 3), {"group": 6, "strides": [2, 2], "dilations": [1, 2]}),
    ((1, 8, 7, 7), (5, 8, 1, 1), {}),
    ((1, 8, 7, 7), (5, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 11, 9), (4, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 3, 11, 9), (4, 3, 2, 3), {"auto_pad": "SAME_LOWER", "dilations": [2, 1]}),
    ((1, 3, 11, 9), (4, 3, 3, 3), {"auto_pad": "VALID"}),
    ((2, 3, 13), (5, 3, 3), {"pads": [2, 1], "strides": [2]}),
    ((1, 4, 13), (4, 1, 3), {"group": 4, "dilations": [3]}),
    ((1, 2, 4, 5, 3), (2, 2, 2, 2, 2), {"pads": [1, 0, 1, 0, 1, 0]}),
    ((1, 64, 12, 12), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
]


def _conv_inputs(rng: np.random.Generator, xs, ws, tx, tw, per_channel):  # type: ignore[no-untyped-def]
    x, w = ints(rng, tx, xs), ints(rng, tw, ws)
    m = ws[0]

    def mid(dtype: type, shape: tuple[int, ...]) -> np.ndarray:
        """Zero points near the middle of the range: outputs that rarely saturate."""
        centre = 128 if dtype == np.uint8 else 0
        return (centre + rng.integers(-12, 12, shape)).astype(dtype)

    return x, mid(tx, ()), w, mid(tw, (m,) if per_channel else ())


@pytest.mark.parametrize(
    ("case", "pair"), list(itertools.product(range(len(CONV_GEOMETRY)), PAIRS))
)
def test_conv_integer(case: int, pair: tuple[type, type]) -> None:
    xs, ws, attrs = CONV_GEOMETRY[case]
    rng = np.random.default_rng(case)
    # onnx.reference's ConvInteger takes per-channel zero points in 2-D only
    per_channel = pair[1] == np.uint8 and len(xs) == 4
    x, xz, w, wz = _conv_inputs(rng, xs, ws, *pair, per_channel=per_channel)
    inputs = [x, w, xz, wz]
    got = kit.run_node("ConvInteger", inputs, attrs, opset=10)[0]
    want = kit.reference_node("ConvInteger", inputs, attrs, opset=10)[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("case", "pair"), list(itertools.product(range(len(CONV_GEOMETRY)), PAIRS))
)
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(
    case: int, pair: tuple[type, type], per_channel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    xs, ws, attrs = CONV_GEOMETRY[case]
    rng = np.random.default_rng(100 + case)
    x, xz, w, wz = _conv_inputs(rng, xs, ws, *pair, per_channel=per_channel)
    m = ws[0]
    w_scale = (rng.random(m if per_channel else ()) * 0.01 + 0.001).astype(np.float32)
    y_type = pair[0]
    # a y scale that spreads the outputs over the 8 bits, few saturated
    k = int(np.prod(ws[1:]))
    y_scale = np.float32(0.02 * float(w_scale.max()) * np.sqrt(k) * 12000 / 60)
    inputs = [x, np.array(0.02, np.float32), xz, w, w_scale, wz,
              np.array(y_scale, np.float32), ints(rng, y_type, ()),
              rng.integers(-500, 500, m).astype(np.int32)]  # fmt: skip
    got = kit.run_node("QLinearConv", inputs, attrs, opset=10)[0]
    with monkeypatch.context() as patch:
        patch.setattr(_qconv.QConv, "run", lambda self, *a, **k: None)
        want = kit.run_node("QLinearConv", inputs, attrs, opset=10)[0]
    np.testing.assert_array_equal(got, want)
    if len(xs) == 4 or not per_channel:  # onnx.reference: per channel in 2-D only
        oracle = kit.reference_node("QLinearConv", inputs, attrs, opset=10)[0]
        # onnx.reference rounds in float32: a value may land one step away
        assert np.abs(got.astype(np.int32) - oracle.astype(np.int32)).max() <= 1
    assert np.any(got != got.flat[0])  # not saturated flat


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{np.dtype(p[0])}x{np.dtype(p[1])}")
@pytest.mark.parametrize("shapes", [((5, 16), (16, 7)), ((2, 3, 40), (40, 33)),
                                    ((2, 1, 9, 12), (3, 12, 5)), ((0, 4), (4, 3))])  # fmt: skip
def test_qlinear_matmul_and_matmul_integer(pair, shapes, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(21)
    (sa, sb), (ta, tb) = shapes, pair
    a, b = ints(rng, ta, sa), ints(rng, tb, sb)
    n = sb[-1]
    az, bz = ints(rng, ta, ()), ints(rng, tb, (n,) if len(sb) == 2 else ())
    got = kit.run_node("MatMulInteger", [a, b, az, bz], opset=10)[0]
    np.testing.assert_array_equal(got, kit.reference_node("MatMulInteger", [a, b, az, bz],
                                                          opset=10)[0])  # fmt: skip
    b_scale = (rng.random(n) * 0.01 + 0.001).astype(np.float32) if len(sb) == 2 else np.array(
        0.004, np.float32)  # fmt: skip
    inputs = [a, np.array(0.05, np.float32), az, b, b_scale, bz, np.array(0.2, np.float32),
              ints(rng, ta, ())]  # fmt: skip
    got = kit.run_node("QLinearMatMul", inputs, opset=21)[0]
    with monkeypatch.context() as patch:
        patch.setattr(quantization, "int_matmul_requantize", _reference_requantize)
        want = kit.run_node("QLinearMatMul", inputs, opset=21)[0]
    np.testing.assert_array_equal(got, want)
    if a.size:
        oracle = kit.reference_node("QLinearMatMul", inputs, opset=21)[0]
        assert np.abs(got.astype(np.int32) - oracle.astype(np.int32)).max() <= 1


def test_constant_weights_are_packed_once() -> None:
    """QConv keeps a constant weight's packing; a fed one is packed anew."""
    rng = np.random.default_rng(1)
    x = ints(rng, np.uint8, (1, 4, 6, 6))
    w = ints(rng, np.int8, (3, 4, 3, 3))
    wz = np.array(0, np.int8)

    def pads(sp, k):  # type: ignore[no-untyped-def]
        return [1, 1], [1, 1], [0, 0], [0, 0]

    kept = _qconv.QConv(1, pads, constant_weight=True)
    y1 = kept.run(x, 3, w, wz, np.dtype(np.int32), 1)
    first = kept._packed
    y2 = kept.run(x, 3, w, wz, np.dtype(np.int32), 1)
    assert kept._packed is first
    fresh = _qconv.QConv(1, pads, constant_weight=False)
    y3 = fresh.run(x, 3, w, wz, np.dtype(np.int32), 1)
    assert fresh._packed is None
    assert y1 is not None and y2 is not None and y3 is not None
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(y1, y3)
