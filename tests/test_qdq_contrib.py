"""QDQ fusion into com.microsoft QLinear ops (Add, Mul, pools, Concat,
Sigmoid, LeakyRelu), and the exact removals: DQ/Q around ops that move
values, DQ -> Q pairs of equal parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto

from .qdq_models import I8, U8, Builder, ContribProvider, calibrated, check, qparams, rng_input
from .qdq_provider import without

ELEM = {U8: TensorProto.UINT8, I8: TensorProto.INT8}


def _unary_model(dtype: Any, op: str, attrs: dict[str, Any], y: Any, shape: list[int]) -> bytes:
    b = Builder()
    x = b.input("x", shape, *qparams(-2.0, 3.0, dtype), dtype)
    out = b.node(op, [x], "o", **attrs)
    if y is None:
        return b.model([(out, TensorProto.FLOAT)])
    b.q(out, *y, dtype, "y")
    return b.model([("y", ELEM[dtype])])


UNARY = [
    ("Sigmoid", {}, "QLinearSigmoid"),
    ("LeakyRelu", {"alpha": 0.2}, "QLinearLeakyRelu"),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, "QLinearAveragePool"),
    (
        "AveragePool",
        {
            "kernel_shape": [2, 2],
            "strides": [2, 2],
            "pads": [0, 0, 1, 1],
            "count_include_pad": 1,
            "ceil_mode": 1,
        },
        "QLinearAveragePool",
    ),
    ("GlobalAveragePool", {}, "QLinearGlobalAveragePool"),
]


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize(
    ("op", "attrs", "fused"), UNARY, ids=[f"{u[0]}{i}" for i, u in enumerate(UNARY)]
)
def test_unary_ops_become_qlinear_ops(
    cpu: str, tmp_path: Path, dtype: Any, op: str, attrs: dict[str, Any], fused: str
) -> None:
    feeds = {"x": rng_input(1, 3, 5, 5)}
    model = calibrated(
        lambda y: _unary_model(dtype, op, attrs, y, [1, 3, 5, 5]), feeds, tmp_path, dtype
    )
    assert check(model, feeds, tmp_path, ContribProvider) == [
        "QuantizeLinear",
        f"com.microsoft:{fused}",
    ]
    plain = check(model, feeds, tmp_path, without(fused))
    assert op in plain and f"com.microsoft:{fused}" not in plain


def _binary_model(dtype: Any, op: str, y: Any, b_shape: list[int]) -> bytes:
    b = Builder()
    x1 = b.input("a", [2, 3, 4], *qparams(-2.0, 2.0, dtype), dtype)
    x2 = b.input("b", b_shape, *qparams(-1.0, 3.0, dtype), dtype)
    out = b.node(op, [x1, x2], "o")
    if y is None:
        return b.model([(out, TensorProto.FLOAT)])
    b.q(out, *y, dtype, "y")
    return b.model([("y", ELEM[dtype])])


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize("op", ["Add", "Mul"])
@pytest.mark.parametrize("b_shape", [[2, 3, 4], [3, 1]], ids=["same", "broadcast"])
def test_add_mul_become_qlinear_add_mul(
    cpu: str, tmp_path: Path, dtype: Any, op: str, b_shape: list[int]
) -> None:
    feeds = {"a": rng_input(2, 3, 4), "b": rng_input(*b_shape, seed=1)}
    model = calibrated(lambda y: _binary_model(dtype, op, y, b_shape), feeds, tmp_path, dtype)
    ops = check(model, feeds, tmp_path, ContribProvider)
    assert ops == ["QuantizeLinear", "QuantizeLinear", f"com.microsoft:QLinear{op}"]


def test_add_of_mixed_types_is_not_fused(cpu: str, tmp_path: Path) -> None:
    b = Builder()
    x1 = b.input("a", [2, 3], *qparams(-2.0, 2.0, U8), U8)
    x2 = b.input("b", [2, 3], *qparams(-2.0, 2.0, I8), I8)
    b.q(b.node("Add", [x1, x2], "o"), 0.02, 128, U8, "y")
    feeds = {"a": rng_input(2, 3), "b": rng_input(2, 3, seed=1)}
    ops = check(b.model([("y", TensorProto.UINT8)]), feeds, tmp_path, ContribProvider)
    assert "Add" in ops


def test_concat_becomes_qlinear_concat(cpu: str, tmp_path: Path) -> None:
    def make(y: Any) -> bytes:
        b = Builder()
        parts = [b.input(f"x{i}", [1, i + 1, 3], *qparams(-1.0 - i, 1.0 + 2 * i, U8), U8)
                 for i in range(3)]  # fmt: skip
        out = b.node("Concat", parts, "o", axis=1)
        if y is None:
            return b.model([(out, TensorProto.FLOAT)])
        b.q(out, *y, U8, "y")
        return b.model([("y", TensorProto.UINT8)])

    feeds = {f"x{i}": rng_input(1, i + 1, 3, seed=i) * (1 + i) for i in range(3)}
    ops = check(calibrated(make, feeds, tmp_path, U8), feeds, tmp_path, ContribProvider)
    assert ops == ["QuantizeLinear"] * 3 + ["com.microsoft:QLinearConcat"]


MOVES = [
    ("Transpose", {"perm": [0, 2, 3, 1]}, []),
    ("Reshape", {}, ["shape"]),
    ("Flatten", {"axis": 2}, []),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, []),
    ("Slice", {}, ["starts", "ends", "axes"]),
]


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize(("op", "attrs", "extra"), MOVES, ids=[m[0] for m in MOVES])
def test_moves_run_on_the_quantized_tensor(
    cpu: str, tmp_path: Path, dtype: Any, op: str, attrs: dict[str, Any], extra: list[str]
) -> None:
    b = Builder()
    s, z = qparams(-2.0, 2.0, dtype)
    x = b.input("x", [1, 2, 4, 4], s, z, dtype)
    b.const("shape", [1, -1], np.int64)
    b.const("starts", [1], np.int64)
    b.const("ends", [3], np.int64)
    b.const("axes", [2], np.int64)
    b.q(b.node(op, [x, *extra], "o", **attrs), s, z, dtype, "y")
    feeds = {"x": rng_input(1, 2, 4, 4)}
    got = check(b.model([("y", ELEM[dtype])]), feeds, tmp_path)
    assert got == ["QuantizeLinear", op]


def test_move_between_different_parameters_stays(cpu: str, tmp_path: Path) -> None:
    b = Builder()
    x = b.input("x", [1, 2, 4, 4], 0.02, 128, U8)
    b.q(b.node("Transpose", [x], "o", perm=[0, 1, 3, 2]), 0.03, 128, U8, "y")
    ops = check(b.model([("y", TensorProto.UINT8)]), {"x": rng_input(1, 2, 4, 4)}, tmp_path)
    assert ops == ["QuantizeLinear", "DequantizeLinear", "Transpose", "QuantizeLinear"]


def test_dq_q_pair_of_equal_parameters_goes(cpu: str, tmp_path: Path) -> None:
    b = Builder()
    x = b.input("x", [2, 5], 0.02, 128, U8)
    b.q(x, 0.02, 128, U8, "x_q2")
    b.dq("x_q2", 0.02, 128, U8, "x_dq2")
    b.node("Sigmoid", ["x_dq2"], "y")
    ops = check(b.model([("y", TensorProto.FLOAT)]), {"x": rng_input(2, 5)}, tmp_path)
    assert ops == ["QuantizeLinear", "DequantizeLinear", "Sigmoid"]


def test_q_dq_pair_on_a_float_tensor_stays(cpu: str, tmp_path: Path) -> None:
    b = Builder()
    b.input("x", [2, 5], 0.02, 128, U8)
    ops = check(b.model([("x_dq", TensorProto.FLOAT)]), {"x": rng_input(2, 5)}, tmp_path)
    assert ops == ["QuantizeLinear", "DequantizeLinear"]
