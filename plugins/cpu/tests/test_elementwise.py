"""Elementwise kernels against onnx.reference: arithmetic, unary, logical."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node

RNG = np.random.default_rng(0)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, shape).astype(dtype)
    return (RNG.standard_normal(shape) + 0.1).astype(dtype)


SHAPE_PAIRS = [
    ((2, 3, 4, 5), (2, 3, 4, 5)),  # same shape: Cython path
    ((2, 3, 4, 5), ()),  # scalar
    ((1,), (2, 3, 4, 5)),  # scalar on the left
    ((2, 3, 4, 5), (3, 1, 1)),  # per channel
    ((3, 1, 1), (2, 3, 4, 5)),  # per channel on the left
    ((2, 3, 4, 5), (5,)),  # general broadcasting
    ((2, 1, 4, 1), (1, 3, 1, 5)),
    ((0, 3), (1, 3)),  # empty
    ((64, 1024), (64, 1024)),  # big enough for several threads
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(("sa", "sb"), SHAPE_PAIRS)
def test_arithmetic_float32(op: str, sa: tuple, sb: tuple) -> None:
    check_node(op, [rand(*sa), rand(*sb)], opset=14)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("opset", [7, 13, 14])
def test_arithmetic_dtypes(op: str, dtype: type, opset: int) -> None:
    a, b = rand(3, 4, dtype=dtype), rand(4, dtype=dtype)
    if op == "Div" and np.dtype(dtype).kind in "iu":
        b[b == 0] = 3
    if opset < 14 and dtype == np.uint8:
        pytest.skip("uint8 arithmetic is opset 14+")
    check_node(op, [a, b], opset=opset, rtol=1e-3 if dtype == np.float16 else 1e-5)


def test_integer_div_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 0], np.int32)
    b = np.array([2, 2, -2, -2, 5], np.int32)
    (got,) = run_node("Div", [a, b], opset=14)
    np.testing.assert_array_equal(got, [3, -3, -3, 3, 0])


@pytest.mark.parametrize(
    ("base", "exp"),
    [(np.float32, np.float32), (np.float32, np.int64), (np.float32, np.float64),
     (np.int64, np.int64), (np.float64, np.float32)],
)  # fmt: skip
def test_pow_keeps_base_type(base: type, exp: type) -> None:
    a = np.abs(rand(3, 4, dtype=base)) + 1
    b = np.array([2, 3, 1, 0], dtype=exp)
    (got,) = check_node("Pow", [a, b], opset=15, rtol=1e-5)
    assert got.dtype == base


def test_pow_float32_scalar_stays_float32() -> None:
    (got,) = check_node("Pow", [rand(2, 3), np.array(2.0, np.float32)], opset=7)
    assert got.dtype == np.float32


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("opset", [6, 8, 13])
def test_variadic(op: str, n: int, opset: int) -> None:
    shapes = [(2, 3, 4), (3, 4), (1, 4)] if opset >= 8 else [(2, 3, 4)] * 3
    check_node(op, [rand(*s) for s in shapes[:n]], opset=opset)


def test_max_int_opset12() -> None:
    check_node("Max", [rand(3, 4, dtype=np.int32), rand(4, dtype=np.int32)], opset=12)


UNARY = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Tanh",
         "Sigmoid", "Erf", "Relu", "Softplus"]  # fmt: skip


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(2, 3, 4), (0, 3), (70000,)])
def test_unary(op: str, dtype: type, shape: tuple) -> None:
    x = rand(*shape, dtype=dtype)
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + np.asarray(0.1, dtype)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check_node(op, [x], opset=13, rtol=tol, atol=tol)


@pytest.mark.parametrize("opset", [6, 13, 14])
def test_relu_versions(opset: int) -> None:
    check_node("Relu", [rand(2, 3, 4)], opset=opset)
    if opset >= 14:
        check_node("Relu", [rand(2, 3, dtype=np.int32)], opset=opset)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}), ("HardSigmoid", {}),
     ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Elu", {}), ("Elu", {"alpha": 0.5}),
     ("Selu", {}), ("Selu", {"alpha": 1.5, "gamma": 2.0})],
)  # fmt: skip
def test_activations(op: str, attrs: dict) -> None:
    check_node(op, [rand(3, 4, 5)], attrs, opset=16)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate: str) -> None:
    check_node("Gelu", [rand(3, 4, 5)], {"approximate": approximate}, opset=20)


def test_clip_attributes_opset6() -> None:
    check_node("Clip", [rand(3, 4)], {"min": -0.5, "max": 0.5}, opset=6)
    check_node("Clip", [rand(3, 4)], {}, opset=6)


@pytest.mark.parametrize("opset", [11, 12, 13])
def test_clip_inputs(opset: int) -> None:
    x = rand(3, 4)
    lo, hi = np.array(-0.5, np.float32), np.array(0.5, np.float32)
    check_node("Clip", [x, lo, hi], opset=opset)
    check_node("Clip", [x, None, hi], opset=opset)
    check_node("Clip", [x, lo], opset=opset)
    check_node("Clip", [x], opset=opset)
    if opset >= 12:
        xi = rand(3, 4, dtype=np.int32)
        check_node("Clip", [xi, np.array(-5, np.int32), np.array(5, np.int32)], opset=opset)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_compare(op: str, dtype: type) -> None:
    a = rand(3, 4, dtype=dtype)
    b = a.copy()[0]
    b[::2] += np.asarray(1, dtype)
    check_node(op, [a, b], opset=16)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op: str) -> None:
    a = RNG.random((3, 4)) > 0.5
    check_node(op, [a, RNG.random(4) > 0.5], opset=7)
    check_node("Not", [a], opset=1)


def test_where() -> None:
    cond = RNG.random((3, 4)) > 0.5
    check_node("Where", [cond, rand(3, 4), rand(4)], opset=16)
    check_node("Where", [cond, rand(3, 4, dtype=np.int64), rand(1, dtype=np.int64)], opset=9)
