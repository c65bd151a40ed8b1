"""Quantized contrib op cases with an integer product: MatMulIntegerToFloat,
DynamicQuantizeMatMul, QGemm, QAttention, MatMulNBits; and com.microsoft's
QuantizeLinear/DequantizeLinear."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..precision import Tolerance
from .spec import DTYPES, FLOAT_TOL, ONE_UNIT, QSpec, Slot, draw_ints, draw_scale, draw_zero, seeded

__all__ = ["pack_nbits", "specs_matmul"]

_n = helper.make_node


def _const(name: str, x: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(x), name)


def _b_params(rng: np.random.Generator, dt: Any, n: int, per_column: bool) -> tuple[Any, Any]:
    return (
        (draw_scale(rng, n), draw_zero(rng, dt, n))
        if per_column
        else (draw_scale(rng), draw_zero(rng, dt))
    )


def _mitf(
    detail: str,
    dim: str,
    a_dt: Any,
    b_dt: Any,
    sa: tuple[int, ...],
    sb: tuple[int, ...],
    per_column: bool,
    bias: bool,
) -> QSpec:
    rng = seeded(f"MatMulIntegerToFloat/{dim}/{detail}")
    n = sb[-1]
    bs, bz = _b_params(rng, b_dt, n, per_column)
    slots = [
        Slot("A", draw_ints(rng, a_dt, sa), fed=True),
        Slot("B", draw_ints(rng, b_dt, sb)),
        Slot("as", draw_scale(rng)),
        Slot("bs", bs),
        Slot("az", draw_zero(rng, a_dt)),
        Slot("bz", bz),
        Slot("bias", rng.standard_normal(n).astype(np.float32) if bias else None),
    ]

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        nodes = [
            _n("DequantizeLinear", ["A", "as", "az"], ["af"]),
            _n("DequantizeLinear", ["B", "bs", "bz"], ["bf"], axis=len(sb) - 1),
            _n("MatMul", ["af", "bf"], ["mm" if bias else s.out()]),
        ]
        if bias:
            nodes.append(_n("Add", ["mm", "bias"], [s.out()]))
        return nodes, []

    return QSpec(
        "MatMulIntegerToFloat",
        dim,
        detail,
        slots,
        decompose,
        quantized=False,
        tolerance=FLOAT_TOL,
        redraw=lambda r: [draw_ints(r, a_dt, sa)],
    )


def _dqmm(
    detail: str,
    dim: str,
    b_dt: Any,
    sa: tuple[int, ...],
    k: int,
    n: int,
    per_column: bool,
    bias: bool,
) -> QSpec:
    rng = seeded(f"DynamicQuantizeMatMul/{dim}/{detail}")
    bs, bz = _b_params(rng, b_dt, n, per_column)
    slots = [
        Slot("A", rng.standard_normal(sa).astype(np.float32), fed=True),
        Slot("B", draw_ints(rng, b_dt, (k, n))),
        Slot("bs", bs),
        Slot("bz", bz),
        Slot("bias", rng.standard_normal(n).astype(np.float32) if bias else None),
    ]

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        nodes = [
            _n("DynamicQuantizeLinear", ["A"], ["qa", "sa", "za"]),
            _n("DequantizeLinear", ["qa", "sa", "za"], ["af"]),
            _n("DequantizeLinear", ["B", "bs", "bz"], ["bf"], axis=1),
            _n("MatMul", ["af", "bf"], ["mm" if bias else s.out()]),
        ]
        if bias:
            nodes.append(_n("Add", ["mm", "bias"], [s.out()]))
        return nodes, []

    return QSpec(
        "DynamicQuantizeMatMul",
        dim,
        detail,
        slots,
        decompose,
        quantized=False,
        tolerance=FLOAT_TOL,
        redraw=lambda r: [r.standard_normal(sa).astype(np.float32)],
    )


def _qgemm(
    detail: str,
    dim: str,
    a_dt: Any,
    b_dt: Any,
    m: int,
    k: int,
    n: int,
    attrs: dict[str, Any],
    per_column: bool,
    c_shape: tuple[int, ...] | None,
    quantized: bool,
) -> QSpec:
    rng = seeded(f"QGemm/{dim}/{detail}")
    ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)
    bs, bz = _b_params(rng, b_dt, n, per_column)
    alpha = float(attrs.get("alpha", 1.0))
    sa_ = (k, m) if ta else (m, k)
    slots = [
        Slot("A", draw_ints(rng, a_dt, sa_), fed=True),
        Slot("as", draw_scale(rng)),
        Slot("az", draw_zero(rng, a_dt)),
        Slot("B", draw_ints(rng, b_dt, (n, k) if tb else (k, n))),
        Slot("bs", bs),
        Slot("bz", bz),
        Slot("C", rng.integers(-2000, 2000, c_shape).astype(np.int32) if c_shape else None),
        Slot("ys", np.asarray(0.2, np.float32) if quantized else None),
        Slot("yz", draw_zero(rng, a_dt) if quantized else None),
    ]

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        last = s.out() if not quantized else "yf"
        nodes = [
            _n("DequantizeLinear", ["A", "as", "az"], ["af"]),
            _n("DequantizeLinear", ["B", "bs", "bz"], ["bf"], axis=0 if tb else 1),
            _n("Gemm", ["af", "bf"], ["g" if c_shape else last], alpha=alpha, transA=ta, transB=tb),
        ]
        extra = []
        if c_shape:  # C is int32 with scale alpha * a_scale * b_scale, zero point 0
            c_scale = np.float32(alpha) * s.value("as") * s.value("bs")  # type: ignore[operator]
            extra.append(_const("c_scale", np.asarray(c_scale, np.float32)))
            nodes += [
                _n("Cast", ["C"], ["cf"], to=onnx.TensorProto.FLOAT),
                _n("Mul", ["cf", "c_scale"], ["cs"]),
                _n("Add", ["g", "cs"], [last]),
            ]
        if quantized:
            nodes.append(_n("QuantizeLinear", ["yf", "ys", "yz"], [s.out()]))
        return nodes, extra

    return QSpec(
        "QGemm",
        dim,
        detail,
        slots,
        decompose,
        attrs,
        quantized=quantized,
        tolerance=ONE_UNIT if quantized else FLOAT_TOL,
        redraw=lambda r: [draw_ints(r, a_dt, sa_)],
    )


def _qattention(
    detail: str, dim: str, w_dt: Any, mask: str, attrs: dict[str, Any], per_column: bool
) -> QSpec:
    rng = seeded(f"QAttention/{dim}/{detail}")
    b, s_, hin, heads, hd = 2, 5, 8, 2, 4
    hid = heads * hd
    ws, wz = _b_params(rng, w_dt, 3 * hid, per_column)
    masks = {
        "none": None,
        "lengths": np.array([3, 5], np.int32),
        "raw_2d": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32),
    }
    slots = [
        Slot("X", draw_ints(rng, np.uint8, (b, s_, hin)), fed=True),
        Slot("W", draw_ints(rng, w_dt, (hin, 3 * hid))),
        Slot("bias", rng.standard_normal(3 * hid).astype(np.float32)),
        Slot("xs", np.asarray(0.02, np.float32)),
        Slot("ws", ws),
        Slot("mask", masks[mask]),
        Slot("xz", np.asarray(128, np.uint8)),
        Slot("wz", wz),
    ]
    causal = bool(attrs.get("unidirectional", 0))

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        extra = [
            _const("qkv_shape", np.array([b, s_, 3, heads, hd], np.int64)),
            _const("out_shape", np.array([b, s_, hid], np.int64)),
            _const("mask_shape", np.array([b, 1, 1, s_], np.int64)),
            _const("scale", np.float32(1 / np.sqrt(hd))),
            _const("zero_f", np.float32(0)),
            _const("fill", np.float32(-10000)),
            _const("keys", np.arange(s_, dtype=np.int32).reshape(1, s_)),
            _const("ax1", np.array([1], np.int64)),
            _const("ax0", np.array([0], np.int64)),
        ]
        nodes = [
            _n("DequantizeLinear", ["X", "xs", "xz"], ["xf"]),
            _n("DequantizeLinear", ["W", "ws", "wz"], ["wf"], axis=1),
            _n("MatMul", ["xf", "wf"], ["mm"]),
            _n("Add", ["mm", "bias"], ["qkv"]),
            _n("Reshape", ["qkv", "qkv_shape"], ["qkv5"]),
            _n("Transpose", ["qkv5"], ["qkvt"], perm=[2, 0, 3, 1, 4]),
            _n("Split", ["qkvt"], ["q1", "k1", "v1"], axis=0, num_outputs=3),
            _n("Squeeze", ["q1", "ax0"], ["q"]),
            _n("Squeeze", ["k1", "ax0"], ["k"]),
            _n("Squeeze", ["v1", "ax0"], ["v"]),
            _n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            _n("MatMul", ["q", "kt"], ["qk"]),
            _n("Mul", ["qk", "scale"], ["scores0"]),
        ]
        scores = "scores0"
        if mask != "none":
            if mask == "lengths":
                nodes += [
                    _n("Unsqueeze", ["mask", "ax1"], ["len"]),
                    _n("Less", ["keys", "len"], ["ok"]),
                ]
            else:
                nodes += [_n("Greater", ["mask", "zero_i"], ["ok"])]
                extra.append(_const("zero_i", np.int32(0)))
            nodes += [
                _n("Where", ["ok", "zero_f", "fill"], ["mb"]),
                _n("Reshape", ["mb", "mask_shape"], ["mb4"]),
                _n("Add", [scores, "mb4"], ["scores1"]),
            ]
            scores = "scores1"
        if causal:
            future = np.triu(np.ones((s_, s_), bool), 1)
            extra.append(_const("causal", np.where(future, -np.inf, 0).astype(np.float32)))
            nodes.append(_n("Add", [scores, "causal"], ["scores2"]))
            scores = "scores2"
        nodes += [
            _n("Softmax", [scores], ["p"], axis=-1),
            _n("MatMul", ["p", "v"], ["o"]),
            _n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
            _n("Reshape", ["ot", "out_shape"], [s.out()]),
        ]
        return nodes, extra

    return QSpec(
        "QAttention",
        dim,
        detail,
        slots,
        decompose,
        {"num_heads": heads, **attrs},
        quantized=False,
        tolerance=FLOAT_TOL,
        redraw=lambda r: [draw_ints(r, np.uint8, (b, s_, hin))],
    )


def pack_nbits(q: np.ndarray, bits: int) -> np.ndarray:
    """Pack ``bits``-bit values (uint8, last axis a multiple of 8 / bits)
    into bytes, the first value in the lowest bits, as onnxruntime packs
    MatMulNBits' B and zero points."""
    per = 8 // bits
    q = q.reshape(*q.shape[:-1], -1, per).astype(np.uint8)
    out = np.zeros(q.shape[:-1], np.uint8)
    for i in range(per):
        out |= (q[..., i] << (i * bits)).astype(np.uint8)
    return out


def _nbits(
    detail: str,
    dim: str,
    m: int,
    k: int,
    n: int,
    block: int,
    zeros: str,
    bias: bool,
    bits: int = 4,
    accuracy: int = 0,
) -> QSpec:
    rng = seeded(f"MatMulNBits/{dim}/{detail}")
    kb = -(-k // block)
    q = rng.integers(0, 1 << bits, (n, kb, block)).astype(np.uint8)
    b_packed = pack_nbits(q, bits)
    scales = draw_scale(rng, n * kb, lo=0.02).reshape(n, kb)
    zq = rng.integers(0, 1 << bits, (n, kb)).astype(np.uint8)
    per = 8 // bits
    zpad = np.zeros((n, -(-kb // per) * per), np.uint8)
    zpad[:, :kb] = zq
    zp = {
        "none": None,
        "packed": pack_nbits(zpad, bits),
        "float": rng.uniform(0, 1 << bits, (n, kb)).astype(np.float32),
    }[zeros]
    slots = [
        Slot("A", rng.standard_normal((m, k)).astype(np.float32), fed=True),
        Slot("B", b_packed),
        Slot("scales", scales.reshape(-1)),
        Slot("zp", zp),
        Slot("g_idx", None),
        Slot("bias", rng.standard_normal(n).astype(np.float32) if bias else None),
    ]
    attrs = {"K": k, "N": n, "bits": bits, "block_size": block, "accuracy_level": accuracy}

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        # unpack B with integer ops: value i of a byte is (byte >> i*bits) & mask
        extra = [
            _const("mask", np.uint8((1 << bits) - 1)),
            _const("shifts", (np.arange(per, dtype=np.uint8) * bits).reshape(1, 1, 1, per)),
            _const("ax3", np.array([3], np.int64)),
            _const("blk_shape", np.array([n, kb, block], np.int64)),
            _const("w_shape", np.array([n, kb * block], np.int64)),
            _const("k_start", np.array([0], np.int64)),
            _const("k_end", np.array([k], np.int64)),
            _const("k_axis", np.array([1], np.int64)),
            _const("sc3", scales.reshape(n, kb, 1)),
        ]
        nodes = [
            _n("Unsqueeze", ["B", "ax3"], ["b4"]),
            _n("BitShift", ["b4", "shifts"], ["bsh"], direction="RIGHT"),
            _n("BitwiseAnd", ["bsh", "mask"], ["bq"]),
            _n("Reshape", ["bq", "blk_shape"], ["bq3"]),
            _n("Cast", ["bq3"], ["bqf"], to=onnx.TensorProto.FLOAT),
        ]
        if zeros == "float":
            extra.append(_const("z3", zp.reshape(n, kb, 1)))  # type: ignore[union-attr]
        else:
            z3 = zq if zeros == "packed" else np.full((n, kb), 1 << (bits - 1), np.uint8)
            # packed zero points unpack the same way; checked against onnxruntime in the tests
            extra.append(_const("z3", z3.reshape(n, kb, 1).astype(np.float32)))
        nodes += [
            _n("Sub", ["bqf", "z3"], ["bc"]),
            _n("Mul", ["bc", "sc3"], ["wd3"]),
            _n("Reshape", ["wd3", "w_shape"], ["wd"]),
            _n("Slice", ["wd", "k_start", "k_end", "k_axis"], ["wk"]),
            _n("Transpose", ["wk"], ["w"], perm=[1, 0]),
            _n("MatMul", ["A", "w"], ["mm" if bias else s.out()]),
        ]
        if bias:
            nodes.append(_n("Add", ["mm", "bias"], [s.out()]))
        return nodes, extra

    return QSpec(
        "MatMulNBits",
        dim,
        detail,
        slots,
        decompose,
        attrs,
        quantized=False,
        tolerance=Tolerance(1e-4, 1e-3) if accuracy < 4 else Tolerance(2e-2, 5e-2),
        redraw=lambda r: [r.standard_normal((m, k)).astype(np.float32)],
    )


def _qdq(
    op: str, detail: str, dim: str, dt: Any, shape: tuple[int, ...], axis: int | None
) -> QSpec:
    rng = seeded(f"com.microsoft.{op}/{dim}/{detail}")
    count = shape[axis] if axis is not None else None
    scale, zero = draw_scale(rng, count, lo=0.02), draw_zero(rng, dt, count)
    x = (
        draw_ints(rng, dt, shape)
        if op == "DequantizeLinear"
        else rng.standard_normal(shape).astype(np.float32)
    )
    slots = [Slot("x", x, fed=True), Slot("s", scale), Slot("z", zero)]
    attrs: dict[str, Any] = {} if axis is None else {"axis": axis}

    def decompose(s: QSpec) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        return [_n(op, ["x", "s", "z"], [s.out()], **attrs)], []

    return QSpec(
        op,
        dim,
        detail,
        slots,
        decompose,
        attrs,
        quantized=op == "QuantizeLinear",
        label=f"com.microsoft.{op}",
    )


def specs_matmul() -> Iterator[QSpec]:
    """The integer-product cases (see the module docstring)."""
    pairs = [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)]
    for a_dt, b_dt in pairs:
        t = f"{np.dtype(a_dt).name}_{np.dtype(b_dt).name}"
        yield _mitf(t, "dtype", a_dt, b_dt, (4, 16), (16, 6), False, True)
        yield _mitf(f"per_column_{t}", "per_channel", a_dt, b_dt, (2, 3, 16), (16, 6), True, True)
        yield _dqmm(t, "dtype", b_dt, (5, 16), 16, 6, False, False)
        yield _dqmm(f"per_column_bias_{t}", "per_channel", b_dt, (2, 3, 16), 16, 6, True, True)
        for ta in (0, 1):
            for tb in (0, 1):
                attrs = {"transA": ta, "transB": tb, "alpha": 0.75}
                yield _qgemm(
                    f"tA{ta}_tB{tb}_{t}",
                    "attribute",
                    a_dt,
                    b_dt,
                    4,
                    16,
                    6,
                    attrs,
                    tb == 1,
                    (6,),
                    False,
                )
        yield _qgemm(f"quantized_{t}", "dtype", a_dt, b_dt, 4, 16, 6, {}, False, (4, 6), True)
        yield _qgemm(
            f"quantized_per_column_{t}",
            "per_channel",
            a_dt,
            b_dt,
            4,
            16,
            6,
            {"alpha": 0.5},
            True,
            (1, 6),
            True,
        )
        yield _qgemm(f"no_C_{t}", "optional", a_dt, b_dt, 3, 8, 5, {}, False, None, False)
    yield _mitf("M0", "empty", np.uint8, np.int8, (0, 16), (16, 6), False, True)
    yield _qgemm("M0", "empty", np.uint8, np.int8, 0, 16, 6, {}, False, (6,), False)
    for w_dt in (np.uint8, np.int8):
        t = np.dtype(w_dt).name
        for mask in ("none", "lengths", "raw_2d"):
            yield _qattention(f"mask_{mask}_{t}", "attribute", w_dt, mask, {}, mask == "raw_2d")
        yield _qattention(
            f"unidirectional_{t}", "attribute", w_dt, "lengths", {"unidirectional": 1}, False
        )
    for zeros in ("none", "packed", "float"):
        yield _nbits(f"zero_points_{zeros}", "attribute", 3, 64, 5, 32, zeros, zeros == "float")
    yield _nbits("K_not_multiple", "shape", 2, 40, 3, 16, "packed", True)
    yield _nbits("odd_k_blocks", "shape", 2, 48, 4, 16, "packed", False)
    yield _nbits("block_128", "attribute", 2, 256, 3, 128, "none", False)
    yield _nbits("bits_8", "attribute", 2, 32, 3, 16, "packed", True, bits=8)
    yield _nbits("bits_2", "attribute", 2, 32, 3, 16, "packed", False, bits=2)
    yield _nbits("accuracy_level_4", "attribute", 4, 64, 5, 32, "packed", False, accuracy=4)
    for dt in DTYPES:
        t = np.dtype(dt).name
        for op in ("QuantizeLinear", "DequantizeLinear"):
            yield _qdq(op, t, "dtype", dt, (3, 4), None)
            yield _qdq(op, f"axis1_{t}", "per_channel", dt, (2, 3, 4), 1)
            yield _qdq(op, f"axis0_{t}", "per_channel", dt, (3, 5), 0)
