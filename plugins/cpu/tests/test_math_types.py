"""Math and type kernels against onnx.reference: casts, bit ops, rounding,
trigonometry, activations, matrix helpers and the legacy (opset < 7) forms."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from ep_sdk.testing import KernelKit
from onnx import TensorProto
from onnx_ir import DataType

from ortcore_cpu.kernels.casting import cast_array
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, reference_node, run_node = kit.check_node, kit.reference_node, kit.run_node

RNG = np.random.default_rng(1)
SPECIAL = np.array([0.48, -0.25, 1e6, -1e6, 1e-7, np.nan, np.inf, -np.inf, 0.0, 3.5], np.float32)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        low = -20 if np.dtype(dtype).kind == "i" else 0
        return RNG.integers(low, 20, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# --- casts -----------------------------------------------------------------

F8 = [DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ]


@pytest.mark.parametrize("to", F8)
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_cast_float8_saturates(to: DataType, src: type) -> None:
    x = SPECIAL.astype(src)
    target = to.numpy()
    info = ml_dtypes.finfo(target)
    want = np.clip(x, float(info.min), float(info.max)).astype(target)
    got = cast_array(x, to)
    assert got.dtype == target
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    plain = cast_array(x, to, saturate=False)
    np.testing.assert_array_equal(plain.astype(np.float32), x.astype(target).astype(np.float32))


def test_cast_float8e8m0_round_modes() -> None:
    x = np.array([0.0, 0.124, 0.25, 1.1, 3.0, 8.0, np.nan, 3e38], np.float32)
    up = cast_array(x, DataType.FLOAT8E8M0).astype(np.float32)
    np.testing.assert_array_equal(up[:6], [2.0**-127, 0.125, 0.25, 2.0, 4.0, 8.0])
    assert np.isnan(up[6]) and up[7] == 2.0**127
    down = cast_array(x, DataType.FLOAT8E8M0, round_mode="down").astype(np.float32)
    np.testing.assert_array_equal(down[1:6], [0.0625, 0.25, 1.0, 2.0, 8.0])
    near = cast_array(x, DataType.FLOAT8E8M0, round_mode="nearest").astype(np.float32)
    np.testing.assert_array_equal(near[1:6], [0.125, 0.25, 1.0, 4.0, 8.0])


@pytest.mark.parametrize(
    ("to", "values"),
    [(DataType.INT4, np.arange(-8, 8)), (DataType.UINT4, np.arange(16)), (DataType.INT2, [-2, 1])],
)
def test_cast_subbyte_ints(to: DataType, values: list[int]) -> None:
    x = np.asarray(values, np.float32)
    got = cast_array(x, to)
    assert got.dtype == to.numpy()
    np.testing.assert_array_equal(cast_array(got, DataType.INT8), x.astype(np.int8))


def test_cast_strings() -> None:
    text = np.array(["1.5", "-INF", "NaN", "1e-5", "+inf", "100"], dtype=object)
    got = cast_array(text, DataType.FLOAT)
    np.testing.assert_array_equal(got, np.array([1.5, -np.inf, np.nan, 1e-5, np.inf, 100], "f4"))
    ints = cast_array(np.array(["7", "-3", "100.5"], dtype=object), DataType.INT32)
    np.testing.assert_array_equal(ints, np.array([7, -3, 100], np.int32))
    out = cast_array(np.array([0.5, np.nan], np.float32), DataType.STRING)
    assert out.dtype == object and list(out) == ["0.5", "nan"]
    assert list(cast_array(np.array([1], ml_dtypes.bfloat16), DataType.STRING)) == ["1.0"]
    flags = cast_array(np.array(["0", "2"], dtype=object), DataType.BOOL)
    np.testing.assert_array_equal(flags, [False, True])


def test_cast_bfloat16_and_bool() -> None:
    x = rand(3, 4)
    b = cast_array(x, DataType.BFLOAT16)
    np.testing.assert_array_equal(b, x.astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(cast_array(b, DataType.FLOAT16), b.astype(np.float16))
    np.testing.assert_array_equal(
        cast_array(np.array([True, False]), DataType.BFLOAT16).astype(np.float32), [1, 0]
    )


def test_cast_opset1_names_type() -> None:
    (got,) = run_node("Cast", [np.array([1.7, -2.2], np.float32)], {"to": "INT32"}, opset=1)
    np.testing.assert_array_equal(got, np.array([1, -2], np.int32))


@pytest.mark.parametrize("opset", [15, 19, 21])
def test_castlike(opset: int) -> None:
    check_node("CastLike", [rand(2, 3), np.zeros(1, np.float16)], opset=opset, rtol=1e-3)
    check_node("CastLike", [rand(2, 3, dtype=np.int32), np.zeros(1, np.float64)], opset=opset)


def test_bitcast() -> None:
    x = rand(2, 3)
    (got,) = run_node("BitCast", [x], {"to": TensorProto.INT32}, opset=26)
    np.testing.assert_array_equal(got, x.view(np.int32))
    (scalar,) = run_node(
        "BitCast", [np.float32(1.0).reshape(())], {"to": TensorProto.UINT32}, opset=26
    )
    assert scalar.shape == () and scalar == 0x3F800000


# --- integer and rounding ops ---------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint16, np.float32, np.float16])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(dtype: type, fmod: int) -> None:
    if np.dtype(dtype).kind == "f" and fmod == 0:
        pytest.skip("float Mod requires fmod=1")
    a, b = rand(3, 4, dtype=dtype), rand(4, dtype=dtype)
    b[b == 0] = 3
    check_node("Mod", [a, b], {"fmod": fmod}, opset=13, rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(dtype: type, direction: str) -> None:
    a = np.array([[16, 4, 1], [255, 0, 7]], dtype)
    b = np.array([1, 2, 3], dtype)
    check_node("BitShift", [a, b], {"direction": direction}, opset=11)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint64])
def test_bitwise(op: str, dtype: type) -> None:
    check_node(op, [rand(3, 4, dtype=dtype), rand(4, dtype=dtype)], opset=18)
    check_node("BitwiseNot", [rand(3, 4, dtype=dtype)], opset=18)


def test_round_sign_isinf_isnan() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, np.nan, np.inf, -np.inf, 0.0], np.float32)
    check_node("Round", [x], opset=11)
    check_node("Round", [x.astype(np.float16)], opset=22)
    check_node("Sign", [x], opset=13)
    check_node("Sign", [rand(5, dtype=np.int32)], opset=13)
    check_node("IsNaN", [x], opset=13)
    for pos, neg in [(1, 1), (1, 0), (0, 1)]:
        check_node("IsInf", [x], {"detect_positive": pos, "detect_negative": neg}, opset=10)


# --- trigonometry and activations -----------------------------------------


@pytest.mark.parametrize(
    "op", ["Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Asin", "Acos", "Atanh"]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_trig(op: str, dtype: type) -> None:
    x = (RNG.uniform(-0.9, 0.9, (3, 4))).astype(dtype)
    check_node(op, [x], opset=9, rtol=2e-3 if dtype == np.float16 else 1e-5)


def test_acosh() -> None:
    check_node("Acosh", [RNG.uniform(1, 5, (2, 3)).astype(np.float32)], opset=22)


@pytest.mark.parametrize(
    ("op", "attrs", "opset"),
    [
        ("Celu", {"alpha": 2.0}, 12),
        ("ThresholdedRelu", {"alpha": 0.3}, 10),
        ("Shrink", {"lambd": 0.6, "bias": 0.2}, 9),
        ("Softsign", {}, 1),
        ("Swish", {"alpha": 0.7}, 24),
        ("HardSwish", {}, 14),
        ("Mish", {}, 18),
        ("Hardmax", {}, 13),
        ("Hardmax", {"axis": 1}, 11),
        ("Hardmax", {"axis": -2}, 13),
        ("Hardmax", {"axis": 0}, 1),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation(op: str, attrs: dict, opset: int, dtype: type) -> None:
    # onnx.reference ignores Hardmax's 2-D view before opset 13
    oracle = "onnxruntime" if op == "Hardmax" and opset < 13 else "reference"
    if dtype == np.float64 and (op == "Celu" or oracle == "onnxruntime"):
        pytest.skip("float32 only")
    check_node(op, [rand(2, 3, 4, dtype=dtype) * 3], attrs, opset=opset, oracle=oracle)


def test_activation_empty_and_shrink_ints() -> None:
    check_node("Hardmax", [np.zeros((0, 3), np.float32)], opset=13)
    check_node("Shrink", [np.arange(-5, 5, dtype=np.int8)], {"lambd": 1.5}, opset=9)


def test_prelu() -> None:
    x = rand(2, 3, 4, 5)
    check_node("PRelu", [x, rand(3, 1, 1)], opset=16)
    check_node("PRelu", [x, rand(5)], opset=9)
    # opset 6 models give a per-channel slope of shape (C,)
    slope = rand(3)
    (got,) = run_node("PRelu", [x, slope], opset=6)
    np.testing.assert_allclose(got, np.where(x > 0, x, x * slope.reshape(3, 1, 1)))


# --- matrix and index helpers ----------------------------------------------


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("ii->i", [(4, 4)]),
        ("ij->", [(3, 4)]),
        ("...ij,...jk", [(2, 3, 4), (2, 4, 2)]),
        ("i,i", [(5,), (5,)]),
    ],
)
def test_einsum(equation: str, shapes: list[tuple[int, ...]]) -> None:
    check_node(
        "Einsum", [rand(*s, dtype=np.float64) for s in shapes], {"equation": equation}, opset=12
    )


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_cumulative(op: str, exclusive: int, reverse: int, axis: int) -> None:
    opset = 26 if op == "CumProd" else 14
    attrs = {"exclusive": exclusive, "reverse": reverse}
    x = rand(3, 4, dtype=np.float64)
    check_node(op, [x, np.array(axis, np.int64)], attrs, opset=opset)
    check_node(op, [rand(2, 3, dtype=np.int32), np.array(axis, np.int32)], attrs, opset=opset)


def test_det_eyelike_trilu_nonzero() -> None:
    check_node("Det", [rand(3, 3)], opset=11, rtol=1e-4)
    check_node("Det", [rand(2, 4, 4, dtype=np.float64)], opset=22)
    check_node("EyeLike", [rand(3, 4)], {"k": 1}, opset=9)
    check_node("EyeLike", [rand(4, 3)], {"k": -1, "dtype": TensorProto.INT32}, opset=22)
    for k in (None, np.array(1, np.int64), np.array(-2, np.int64), np.array(9, np.int64)):
        for upper in (0, 1):
            check_node("Trilu", [rand(2, 4, 5), k], {"upper": upper}, opset=14)
    check_node("Trilu", [np.zeros((0, 3), np.int64)], opset=14)
    check_node("NonZero", [rand(3, 4, dtype=np.int32)], opset=13)
    check_node("NonZero", [np.array([[True, False], [False, True]])], opset=9)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot(axis: int) -> None:
    indices = np.array([[0, 3, -1], [2, 7, -5]], np.int64)
    values = np.array([2, 5], np.float32)
    check_node("OneHot", [indices, np.array(4, np.int64), values], {"axis": axis}, opset=11)
    check_node("OneHot", [indices.astype(np.float32), np.array(4.0, np.float32), values], opset=9)


# --- legacy (opset < 7) broadcasting ---------------------------------------


def test_legacy_broadcast_axis() -> None:
    a, b = rand(2, 3, 4, 5), rand(3, 4)
    (got,) = run_node("Add", [a, b], {"broadcast": 1, "axis": 1}, opset=6)
    np.testing.assert_allclose(got, a + b.reshape(3, 4, 1))
    (got,) = run_node("Mul", [a, rand(5)], {"broadcast": 1}, opset=1)
    assert got.shape == a.shape
    x, y = rand(2, 3), rand(2)
    (eq,) = run_node("Greater", [x, y], {"broadcast": 1, "axis": 0}, opset=1)
    np.testing.assert_array_equal(eq, x > y[:, None])
    (p,) = run_node("Pow", [np.abs(a), rand(3)], {"broadcast": 1, "axis": 1}, opset=1)
    assert p.shape == a.shape


@pytest.mark.parametrize("op", ["Abs", "Neg", "Exp", "Sqrt", "Relu", "Sigmoid", "Tanh", "Floor"])
def test_unary_opset1(op: str) -> None:
    x = np.abs(rand(2, 3)) + 0.1
    (got,) = run_node(op, [x], {"consumed_inputs": [0]}, opset=1)
    check_node(op, [x], opset=6, expected=[got])


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("opset", [1, 8, 13])
def test_variadic(op: str, opset: int) -> None:
    xs = [rand(3, 4), rand(3, 4), rand(3, 4)]
    check_node(op, xs, opset=opset)


def test_bfloat16_arithmetic() -> None:
    a = rand(3, 4).astype(ml_dtypes.bfloat16)
    (got,) = run_node("Add", [a, a], opset=14)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got.astype(np.float32), (a.astype(np.float32) * 2))
    (s,) = run_node("Sin", [a], opset=22)
    assert s.dtype == a.dtype


def test_pow_mixed_types() -> None:
    check_node("Pow", [rand(3, 4), np.array([2, 3, 1, 0], np.int64)], opset=15)
    check_node("Pow", [np.array([2, 3, 4], np.int32), np.array([2.0], np.float32)], opset=15)
    check_node("Pow", [np.array([2, 3, 4], np.int64), np.array([3], np.int64)], opset=12)


@pytest.mark.parametrize(
    ("to", "attrs", "opset"),
    [
        (TensorProto.FLOAT8E4M3FN, {"saturate": 0}, 19),
        (TensorProto.FLOAT8E5M2, {}, 19),
        (TensorProto.FLOAT8E8M0, {"round_mode": "nearest"}, 24),
        (TensorProto.INT4, {}, 21),
        (TensorProto.FLOAT4E2M1, {}, 23),
        (TensorProto.DOUBLE, {}, 6),
    ],
)
def test_cast_node(to: int, attrs: dict, opset: int) -> None:
    x = np.array([0.3, 1.5, -2.0, 6.0, 0.0, 2.5], np.float32)
    (got,) = run_node("Cast", [x], {"to": to, **attrs}, opset=opset)
    (want,) = reference_node("Cast", [x], {"to": to, **attrs}, opset=opset)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
