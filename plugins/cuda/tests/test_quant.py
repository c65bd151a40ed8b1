"""Quantization kernels (:mod:`ortcore_cuda.kernels.quant`) under the CPU
emulation against numpy, every quantized type, float32/float16/bfloat16
inputs and scales, per-tensor, per-axis and blocked, odd sizes; then the
provider end to end on the emulation against the CPU provider, and its
declines."""

from __future__ import annotations

import zlib
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import quant as kq
from ortcore_cuda.kernels.cast import cast_suffixes

TYPES = cast_suffixes()
FLOAT8 = ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz")
QUANT_OUT = [q for q in kq.QTYPES if q != "i32"]
FLOATS = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def emu() -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(kq.all_kernels())


def _dt(s: str) -> np.dtype:
    return np.dtype(FLOATS[s]) if s in FLOATS else TYPES[s][1]


def _expand(v: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """``v`` (a scale or zero point) broadcast to ``shape`` (as onnx's reference)."""
    if v.size == 1:
        return np.broadcast_to(v.reshape(()), shape)
    if not block:
        dims = [1] * len(shape)
        dims[axis] = v.size
        return np.broadcast_to(v.reshape(dims), shape)
    return np.repeat(v, block, axis=axis).take(range(shape[axis]), axis=axis)


def _quotient_type(a: np.dtype, b: np.dtype) -> np.dtype:
    """The type numpy divides float32/float16/bfloat16 ``a`` by ``b`` in: float32
    for two different ones (float16 with bfloat16 too, which numpy promotes only
    under ml_dtypes 0.7 and refuses before)."""
    return a if a == b else np.dtype(np.float32)


def _range(q: str) -> tuple[int, int]:
    lo, hi = kq.QTYPES[q][1:]
    assert lo is not None and hi is not None
    return lo, hi


def ref_quantize(
    x: np.ndarray,
    s: np.ndarray,
    zp: np.ndarray | None,
    axis: int,
    block: int,
    q: str,
    sat: bool,
    prec: np.dtype,
) -> np.ndarray:
    S = _expand(s, x.shape, axis, block)
    with np.errstate(all="ignore"):
        v = (x.astype(prec) / S.astype(prec)).astype(np.float32)
        d = _dt(q)
        if q in FLOAT8:
            if sat:
                info = ml_dtypes.finfo(d)
                v = np.clip(v, float(info.min), float(info.max))
            return v.astype(d)
        if q == "f4e2m1":
            if zp is not None:
                v = v + _expand(zp, x.shape, axis, block).astype(np.float32)
            return v.astype(d)
        r = np.rint(v.astype(np.float64))
        if zp is not None:
            r = r + _expand(zp, x.shape, axis, block).astype(np.float64)
        lo, hi = _range(q)
        return np.clip(np.nan_to_num(r, nan=lo), lo, hi).astype(np.int64).astype(d)


def _quantize(
    emu: Emulator,
    x: np.ndarray,
    s: np.ndarray,
    zp: np.ndarray | None,
    axis: int,
    block: int,
    q: str,
    sat: int = 1,
    prec: int | None = None,
) -> np.ndarray:
    y = np.empty(x.shape, _dt(q))
    codes = {np.dtype(d): kq.FLOAT_CODES[k] for k, d in FLOATS.items()}
    xc, sc = codes[x.dtype], codes[s.dtype]
    p = prec if prec is not None else (xc if xc == sc else 0)
    args = kq.qaxis_args(x.shape, s.shape, axis, block)
    z = np.ascontiguousarray(zp) if zp is not None else 0
    emu.launch(
        kq.quantize_kernel(q).name,
        2,
        32,
        np.ascontiguousarray(x),
        xc,
        np.ascontiguousarray(s),
        sc,
        z,
        int(zp is not None),
        y,
        y.size,
        args,
        p,
        sat,
    )
    return y


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8 if a.itemsize == 1 else f"u{a.itemsize}")


def _zp(q: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if q in FLOAT8:
        return np.zeros(shape, _dt(q))
    if q == "f4e2m1":
        return rng.choice([0.0, 0.5, -1.0, 2.0], shape).astype(_dt(q))
    lo, hi = _range(q)
    return rng.integers(lo, hi + 1, shape).astype(_dt(q))


LAYOUTS = [
    ("tensor", 0, 0, ()),
    ("tensor1", 0, 0, (1,)),
    ("axis1", 1, 0, (5,)),
    ("axis0", 0, 0, (3,)),
    ("blocked", 1, 2, (3, 3, 7)),
    ("blocked_last", 2, 3, (3, 5, 3)),
]


@pytest.mark.parametrize("q", QUANT_OUT)
@pytest.mark.parametrize("xt", ["f32", "f16"])
def test_quantize_matches_numpy(emu: Emulator, q: str, xt: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{q}{xt}".encode()))
    x = (rng.standard_normal((3, 5, 7)) * 40).astype(_dt(xt))
    x.reshape(-1)[:6] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1e4], np.float32)  # ties, range
    for name, axis, block, sshape in LAYOUTS:
        for st in ("f32", "f16", "bf16"):
            s = rng.uniform(0.05, 2.0, sshape).astype(_dt(st))
            if name == "tensor":
                s = np.asarray(0.5, _dt(st))  # exact halves: ties to even
            for zp in (None, _zp(q, sshape, rng)):
                for sat in (1, 0) if q in FLOAT8 else (1,):
                    got = _quantize(emu, x, s, zp, axis, block, q, sat)
                    prec = _quotient_type(x.dtype, s.dtype)
                    want = ref_quantize(x, s, zp, axis, block, q, bool(sat), prec)
                    np.testing.assert_array_equal(
                        _bits(got), _bits(want), err_msg=f"{q} {xt} {name} {st} zp={zp is not None}"
                    )


def test_quantize_precision_rounds_operands_and_quotient(emu: Emulator) -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(301) * 100).astype(np.float32)
    s = np.asarray(0.3, np.float32)
    for code, dtype in ((1, np.dtype(np.float16)), (2, ml_dtypes.bfloat16), (0, np.float32)):
        got = _quantize(emu, x, s, None, 0, 0, "i16", prec=code)
        want = ref_quantize(x, s, None, 0, 0, "i16", True, np.dtype(dtype))
        np.testing.assert_array_equal(got, want)


def test_quantize_saturates_and_writes_sub_byte_high_bits_zero(emu: Emulator) -> None:
    x = np.array([1e9, -1e9, np.inf, -np.inf, 3.5, -8.5, 7.49], np.float32)
    s = np.asarray(1.0, np.float32)
    for q in ("u8", "i8", "u16", "i16", "u4", "i4", "u2", "i2"):
        got = _quantize(emu, x, s, None, 0, 0, q)
        lo, hi = _range(q)
        assert got[0] == hi and got[1] == lo and got[2] == hi and got[3] == lo, q
        assert int(_bits(got).max()) < (1 << (8 * got.itemsize)), q
        if q in ("u4", "i4", "u2", "i2"):
            assert int(got.view(np.uint8).max()) < (16 if q[1] == "4" else 4), q


def test_qaxis_args_checks_shapes() -> None:
    with pytest.raises(ValueError):
        kq.qaxis_args((3, 4), (5,), 1, 0)
    with pytest.raises(ValueError):
        kq.qaxis_args((3, 4), (3, 3), 1, 2)
    a = kq.qaxis_args((3, 5), (3, 3), 1, 2)
    assert (int(a["inner"]), int(a["d"]), int(a["so"]), int(a["sa"])) == (1, 5, 3, 1)


def ref_dequantize(
    x: np.ndarray,
    s: np.ndarray,
    zp: np.ndarray | None,
    axis: int,
    block: int,
    q: str,
    out: np.dtype,
) -> np.ndarray:
    dx = x.astype(np.float32)
    if zp is not None and q not in (*FLOAT8, "f4e2m1"):  # the floats' zero point is unused
        dx = dx - _expand(zp, x.shape, axis, block).astype(np.float32)
    with np.errstate(over="ignore"):
        return (dx * _expand(s, x.shape, axis, block).astype(np.float32)).astype(out)


@pytest.mark.parametrize("q", list(kq.QTYPES))
def test_dequantize_matches_numpy(emu: Emulator, q: str) -> None:
    rng = np.random.default_rng(len(q) * 7)
    d = _dt(q)
    if q in FLOAT8 or q == "f4e2m1":
        bits = 16 if q == "f4e2m1" else 256
        x = rng.integers(0, bits, (3, 5, 7)).astype(np.uint8).view(d)
        x = np.where(np.isnan(x.astype(np.float32)), np.zeros(1, d), x).astype(d)
    elif q == "i32":
        x = rng.integers(-(2**20), 2**20, (3, 5, 7)).astype(np.int32)
    else:
        lo, hi = _range(q)
        x = rng.integers(lo, hi + 1, (3, 5, 7)).astype(d)
    for name, axis, block, sshape in LAYOUTS:
        for st in ("f32", "f16", "bf16"):
            s = rng.uniform(0.05, 2.0, sshape).astype(_dt(st))
            zps = [None] if q == "i32" else [None, _zp(q, sshape, rng)]
            for zp in zps:
                for out in ("f32", "f16", "bf16"):
                    y = np.empty(x.shape, _dt(out))
                    emu.launch(
                        kq.dequantize_kernel(q).name,
                        2,
                        32,
                        x,
                        s,
                        kq.FLOAT_CODES[st],
                        np.ascontiguousarray(zp) if zp is not None else 0,
                        int(zp is not None),
                        y,
                        kq.FLOAT_CODES[out],
                        y.size,
                        kq.qaxis_args(x.shape, s.shape, axis, block),
                    )
                    want = ref_dequantize(x, s, zp, axis, block, q, _dt(out))
                    np.testing.assert_array_equal(
                        _bits(y), _bits(want), err_msg=f"{q} {name} {st}->{out}"
                    )


def test_dequantize_float8e8m0_scale(emu: Emulator) -> None:
    x = np.arange(-100, 101, dtype=np.int8)
    s = np.array([120, 127, 130], np.uint8)  # 2^-7, 1, 2^3
    y = np.empty(x.shape, np.float32)
    args = kq.qaxis_args((201,), (1,), 0, 0)
    for b in s:
        sb = np.array([b], np.uint8)
        emu.launch("dequantize_i8", 2, 32, x, sb, 3, 0, 0, y, 0, y.size, args)
        np.testing.assert_array_equal(y, x.astype(np.float32) * np.float32(2.0 ** (int(b) - 127)))


def ref_dynamic(x: np.ndarray) -> tuple[np.ndarray, np.float32, np.uint8]:
    maxx = np.float32(np.maximum(0, np.max(x)))
    minx = np.float32(np.minimum(0, np.min(x)))
    scale = np.float32(1.0 if maxx == minx else (maxx - minx)) / np.float32(255)
    zp = np.rint(np.clip(np.float32(0) - minx / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255)
    return y.astype(np.uint8), np.float32(scale), np.uint8(zp)


@pytest.mark.parametrize("n", [1, 6, 37, 1001])
@pytest.mark.parametrize("threads", [1, 16, 64])
def test_dynamic_quantize_matches_numpy(emu: Emulator, n: int, threads: int) -> None:
    rng = np.random.default_rng(n)
    for shift in (0.0, 3.0, -3.0):
        x = (rng.standard_normal(n) + shift).astype(np.float32)
        scale = np.empty((), np.float32)
        zp = np.empty((), np.uint8)
        y = np.empty(n, np.uint8)
        emu.launch("dynquant_stats", 1, threads, x, n, scale, zp)
        emu.launch("dynquant_apply", 2, 32, x, scale, zp, y, n)
        wy, ws, wz = ref_dynamic(x)
        assert scale == ws and zp == wz, (n, shift)
        np.testing.assert_array_equal(y, wy)


def _ints(rng: np.random.Generator, t: str, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(_dt(t))
    return rng.integers(info.min, info.max + 1, shape).astype(_dt(t))


@pytest.mark.parametrize("a", kq.GEMM_TYPES)
@pytest.mark.parametrize("b", kq.GEMM_TYPES)
@pytest.mark.parametrize("out", kq.GEMM_OUT)
def test_qgemm_matches_numpy(emu: Emulator, a: str, b: str, out: str) -> None:
    rng = np.random.default_rng(3)
    A = _ints(rng, a, (2, 5, 13))
    B = _ints(rng, b, (1, 13, 7))  # broadcast over A's batch
    azp = _ints(rng, a, (5,)).astype(np.int32)
    bzp = _ints(rng, b, (7,)).astype(np.int32)
    offs = np.array([[0, 0], [5 * 13, 0]], np.int64)
    C = (A.astype(np.int64) - azp[:, None]) @ (B.astype(np.int64) - bzp)
    mult = rng.uniform(1e-5, 1e-3, 7)
    yzp = 3 if out == "u8" else -2
    y = np.empty(C.shape, np.int32 if out == "i32" else _dt(out))
    emu.launch(
        kq.qgemm_kernel(a, b, out).name,
        2,
        32,
        A,
        B,
        offs,
        5,
        7,
        13,
        azp,
        1,
        bzp,
        1,
        mult,
        1,
        yzp,
        y,
        y.size,
    )
    if out == "i32":
        np.testing.assert_array_equal(y, C)
    else:
        info = np.iinfo(_dt(out))
        want = np.clip(np.rint(C * mult + yzp), info.min, info.max).astype(_dt(out))
        np.testing.assert_array_equal(y, want)


def _conv_ref(
    x: np.ndarray, w: np.ndarray, groups: int, stride: int, pad: int, dil: int
) -> np.ndarray:
    n, _c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - (kh - 1) * dil - 1) // stride + 1
    ow = (wd + 2 * pad - (kw - 1) * dil - 1) // stride + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    mg = m // groups
    for co in range(m):
        g = co // mg
        for i in range(oh):
            for j in range(ow):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * stride : i * stride + (kh - 1) * dil + 1 : dil,
                    j * stride : j * stride + (kw - 1) * dil + 1 : dil,
                ]
                y[:, co, i, j] = (patch * w[co]).sum(axis=(1, 2, 3))
    return y


@pytest.mark.parametrize("out", kq.GEMM_OUT)
def test_qconv_matches_numpy(emu: Emulator, out: str) -> None:
    from ortcore_cuda.kernels.nn import CONV_ARGS

    rng = np.random.default_rng(11)
    x = _ints(rng, "u8", (2, 4, 5, 6))
    w = _ints(rng, "i8", (6, 2, 3, 2))
    xzp, wzp = 7, rng.integers(-5, 5, 6).astype(np.int32)
    bias = rng.integers(-1000, 1000, 6).astype(np.int32)
    groups, stride, pad, dil = 2, 2, 1, 2
    acc = _conv_ref(
        x.astype(np.int64) - xzp,
        w.astype(np.int64) - wzp[:, None, None, None],
        groups,
        stride,
        pad,
        dil,
    )
    acc = acc + bias[None, :, None, None]
    oh, ow = acc.shape[2:]
    args = CONV_ARGS.pack(
        c=4,
        h=5,
        w=6,
        kh=3,
        kw=2,
        oh=oh,
        ow=ow,
        sh=stride,
        sw=stride,
        ph=pad,
        pw=pad,
        dh=dil,
        dw=dil,
    )
    mult = rng.uniform(1e-4, 1e-2, 6)
    y = np.empty(acc.shape, np.int32 if out == "i32" else _dt(out))
    emu.launch(
        kq.qconv_kernel("u8", "i8", out).name,
        2,
        32,
        x,
        w,
        args,
        6,
        groups,
        xzp,
        wzp,
        1,
        bias,
        1,
        mult,
        1,
        5,
        y,
        y.size,
    )
    if out == "i32":
        np.testing.assert_array_equal(y, acc)
    else:
        info = np.iinfo(_dt(out))
        want = np.rint(acc * mult[None, :, None, None] + 5)
        np.testing.assert_array_equal(y, np.clip(want, info.min, info.max).astype(_dt(out)))


def test_kernels_refuse_what_they_lack() -> None:
    with pytest.raises(ValueError):
        kq.quantize_kernel("i32")
    with pytest.raises(ValueError):
        kq.qgemm_kernel("u8", "u16", "i32")


# -- the provider on the emulation ----------------------------------------------------


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], opset: int = 21) -> bytes:
    graph = helper.make_graph(nodes, "quant", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _vi(name: str, t: int, shape: list[int] | None) -> Any:
    return helper.make_tensor_value_info(name, t, shape)


def _run(pm: Any, model: bytes, feeds: dict[str, np.ndarray], providers: list[str]) -> Any:
    import ortcore

    sess = ortcore.InferenceSession(model, providers=providers, plugin_manager=pm)
    return sess, sess.run(None, feeds)


def _compare(pm: Any, model: bytes, feeds: dict[str, Any]) -> None:
    sess, got = _run(pm, model, feeds, ["cuda"])
    assert sess.get_providers()[0] == "CUDAExecutionProvider"
    _, want = _run(pm, model, feeds, ["cpu"])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(
            _bits(np.ascontiguousarray(g)), _bits(np.ascontiguousarray(w))
        )


def test_provider_quantize_dequantize_chain(emulated: Any) -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["d"], axis=1),
        helper.make_node("QuantizeLinear", ["x", "sb"], ["q4"], axis=2, block_size=3,
                         output_dtype=TensorProto.INT4),
        helper.make_node("DequantizeLinear", ["q4", "sb"], ["d4"], axis=2, block_size=3),
        helper.make_node("QuantizeLinear", ["x", "s1"], ["f8"],
                         output_dtype=TensorProto.FLOAT8E4M3FN, saturate=0),
    ]  # fmt: skip
    model = _model(
        nodes,
        [
            _vi("x", TensorProto.FLOAT, [2, 3, 7]),
            _vi("s", TensorProto.FLOAT, [3]),
            _vi("zp", TensorProto.UINT8, [3]),
            _vi("sb", TensorProto.FLOAT, [2, 3, 3]),
            _vi("s1", TensorProto.FLOAT, []),
        ],
        [
            _vi("q", TensorProto.UINT8, [2, 3, 7]),
            _vi("d", TensorProto.FLOAT, [2, 3, 7]),
            _vi("q4", TensorProto.INT4, [2, 3, 7]),
            _vi("d4", TensorProto.FLOAT, [2, 3, 7]),
            _vi("f8", TensorProto.FLOAT8E4M3FN, [2, 3, 7]),
        ],
    )
    rng = np.random.default_rng(0)
    feeds = {
        "x": (rng.standard_normal((2, 3, 7)) * 30).astype(np.float32),
        "s": np.array([0.25, 0.5, 0.3], np.float32),
        "zp": np.array([128, 0, 10], np.uint8),
        "sb": rng.uniform(0.5, 3, (2, 3, 3)).astype(np.float32),
        "s1": np.array(0.01, np.float32),
    }
    _compare(emulated, model, feeds)


def test_provider_dynamic_quantize(emulated: Any) -> None:
    model = _model(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
        [_vi("x", TensorProto.FLOAT, [3, 11])],
        [_vi("y", TensorProto.UINT8, None), _vi("s", TensorProto.FLOAT, None),
         _vi("z", TensorProto.UINT8, None)],
    )  # fmt: skip
    x = np.random.default_rng(1).standard_normal((3, 11)).astype(np.float32) + 1
    _compare(emulated, model, {"x": x})


def test_provider_qlinear_matmul_and_matmul_integer(emulated: Any) -> None:
    T = TensorProto
    nodes = [
        helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"]),
        helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["i"]),
    ]
    model = _model(
        nodes,
        [
            _vi("a", T.INT8, [2, 3, 9]),
            _vi("as", T.FLOAT16, [1]),
            _vi("az", T.INT8, [1]),
            _vi("b", T.INT8, [9, 5]),
            _vi("bs", T.FLOAT16, [5]),
            _vi("bz", T.INT8, [5]),
            _vi("ys", T.FLOAT16, []),
            _vi("yz", T.INT8, []),
        ],
        [_vi("y", T.INT8, [2, 3, 5]), _vi("i", T.INT32, [2, 3, 5])],
    )
    rng = np.random.default_rng(2)
    feeds = {
        "a": _ints(rng, "i8", (2, 3, 9)),
        "as": np.array([0.02], np.float16),
        "az": np.array([3], np.int8),
        "b": _ints(rng, "i8", (9, 5)),
        "bs": rng.uniform(0.01, 0.05, 5).astype(np.float16),
        "bz": _ints(rng, "i8", (5,)),
        "ys": np.array(1.5, np.float16),
        "yz": np.array(-4, np.int8),
    }
    sess, (y, i) = _run(emulated, model, feeds, ["cuda"])
    assert sess.get_providers()[0] == "CUDAExecutionProvider"
    acc = (feeds["a"].astype(np.int32) - 3) @ (feeds["b"].astype(np.int32) - feeds["bz"])
    np.testing.assert_array_equal(i, acc)
    mult = feeds["as"] * feeds["bs"] / feeds["ys"]
    want = np.clip(np.rint(acc * mult.astype(np.float64) - 4), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(y, want)


def test_provider_conv_integer_and_qlinear_conv(emulated: Any) -> None:
    T = TensorProto
    nodes = [
        helper.make_node("ConvInteger", ["x", "w", "xz"], ["c"], pads=[1, 2], strides=[2]),
        helper.make_node(
            "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["q"],
            auto_pad="SAME_UPPER",
        ),
    ]  # fmt: skip
    model = _model(
        nodes,
        [
            _vi("x", T.UINT8, [2, 3, 10]),
            _vi("w", T.UINT8, [4, 3, 3]),
            _vi("xz", T.UINT8, []),
            _vi("xs", T.FLOAT, []),
            _vi("ws", T.FLOAT, [4]),
            _vi("wz", T.UINT8, [4]),
            _vi("ys", T.FLOAT, []),
            _vi("yz", T.UINT8, []),
            _vi("b", T.INT32, [4]),
        ],
        [_vi("c", T.INT32, None), _vi("q", T.UINT8, None)],
        opset=10,
    )
    rng = np.random.default_rng(4)
    feeds = {
        "x": _ints(rng, "u8", (2, 3, 10)),
        "w": _ints(rng, "u8", (4, 3, 3)),
        "xz": np.array(100, np.uint8),
        "xs": np.array(0.05, np.float32),
        "ws": rng.uniform(0.001, 0.01, 4).astype(np.float32),
        "wz": _ints(rng, "u8", (4,)),
        "ys": np.array(0.7, np.float32),
        "yz": np.array(120, np.uint8),
        "b": rng.integers(-500, 500, 4).astype(np.int32),
    }
    _compare(emulated, model, feeds)


def test_decline_says_why() -> None:
    from ortcore_cuda.ops_quant import decline

    T = TensorProto
    model = onnx.load_from_string(
        _model(
            [helper.make_node("ConvInteger", ["x", "w"], ["y"])],
            [_vi("x", T.UINT8, [1, 1, 2, 3, 3]), _vi("w", T.UINT8, [1, 1, 1, 1, 1])],
            [_vi("y", T.INT32, None)],
            opset=10,
        )
    )
    (node,) = ir.from_proto(model).graph
    assert decline(node, None) == "CUDA: ConvInteger of rank 5 (1-D and 2-D only)"  # type: ignore[arg-type]
    model = onnx.load_from_string(
        _model(
            [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], precision=T.DOUBLE)],
            [_vi("x", T.FLOAT, [4]), _vi("s", T.FLOAT, [])],
            [_vi("y", T.UINT8, [4])],
            opset=23,
        )
    )
    (node,) = ir.from_proto(model).graph
    assert decline(node, None) == "CUDA: QuantizeLinear in precision DOUBLE"  # type: ignore[arg-type]
