"""Quantization kernels against onnx.reference (and onnxruntime where noted)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, reference_node, run_node = kit.check_node, kit.reference_node, kit.run_node

RNG = np.random.default_rng(7)


def floats(*shape: int, scale: float = 10.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.uint16, np.int16])
@pytest.mark.parametrize("opset", [13, 19, 21])
def test_quantize_per_tensor(zp_dtype: type, opset: int) -> None:
    if opset < 21 and zp_dtype in (np.uint16, np.int16):
        pytest.skip("16-bit types arrive in opset 21")
    x = floats(3, 4, 5)
    x[0, 0, :3] = [0.5, 1.5, 2.5]  # ties round to even
    zp = np.array(3, dtype=zp_dtype)
    check_node("QuantizeLinear", [x, np.array(0.5, np.float32), zp], opset=opset)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_dequantize_per_axis(axis: int) -> None:
    x = floats(2, 3, 4)
    n = x.shape[axis]
    scale = (RNG.random(n) + 0.1).astype(np.float32)
    zp = RNG.integers(0, 20, n).astype(np.uint8)
    q = check_node("QuantizeLinear", [x, scale, zp], {"axis": axis}, opset=13)[0]
    check_node("DequantizeLinear", [q, scale, zp], {"axis": axis}, opset=19)


@pytest.mark.parametrize("block", [2, 3])
@pytest.mark.parametrize("dtype", [np.int8, ml_dtypes.int4, ml_dtypes.uint4])
def test_blocked(block: int, dtype: type) -> None:
    x = floats(4, 7)
    blocks = -(-7 // block)
    scale = (RNG.random((4, blocks)) + 0.5).astype(np.float32)
    zp = np.ones((4, blocks), dtype=dtype)
    attrs = {"axis": 1, "block_size": block}
    q = check_node("QuantizeLinear", [x, scale, zp], attrs, opset=21)[0]
    check_node("DequantizeLinear", [q, scale, zp], attrs, opset=21)


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fnuz]
)
@pytest.mark.parametrize("saturate", [0, 1])
def test_float8(dtype: type, saturate: int) -> None:
    x = np.array([0.0, 1.0, -3.3, 1e6, -1e6, 448.0, np.inf], np.float32)
    zp = np.zeros((), dtype)
    inputs = [x, np.array(2.0, np.float32), zp]
    q = run_node("QuantizeLinear", inputs, {"saturate": saturate}, opset=19)[0]
    want = reference_node("QuantizeLinear", inputs, {"saturate": saturate}, opset=19)[0]
    assert q.dtype == want.dtype
    np.testing.assert_array_equal(q.view(np.uint8), want.view(np.uint8))  # NaN bits too
    check_node("DequantizeLinear", [q, np.array(2.0, np.float32), zp], opset=19)


def test_output_dtype_and_small_ints() -> None:
    x = floats(5, scale=3)
    for code, dtype in ((22, ml_dtypes.int4), (26, ml_dtypes.int2), (25, ml_dtypes.uint2)):
        got = run_node("QuantizeLinear", [x, np.array(1.0, np.float32)], {"output_dtype": code},
                       opset=25)[0]  # fmt: skip
        assert got.dtype == np.dtype(dtype)
        info = ml_dtypes.iinfo(dtype)
        want = np.clip(np.rint(x), info.min, info.max).astype(dtype)
        np.testing.assert_array_equal(got, want)
    q = check_node("QuantizeLinear", [x, np.array(1.0, np.float32),
                                      np.zeros((), ml_dtypes.float4_e2m1fn)], opset=23)[0]  # fmt: skip
    check_node("DequantizeLinear", [q, np.array(1.0, np.float16)], opset=23)


def test_dequantize_int32_and_float16_scale() -> None:
    x = RNG.integers(-1000, 1000, (3, 4)).astype(np.int32)
    check_node("DequantizeLinear", [x, np.array(0.25, np.float32)], opset=19)
    q = RNG.integers(0, 255, (3, 4)).astype(np.uint8)
    check_node("DequantizeLinear", [q, np.array(0.5, np.float16), np.array(7, np.uint8)], opset=19)
    check_node("DequantizeLinear", [q[:0], np.array(0.5, np.float32)], opset=19)


@pytest.mark.parametrize("shape", [(3, 4), (0, 2), (7,)])
def test_dynamic_quantize(shape: tuple[int, ...]) -> None:
    x = floats(*shape)
    if x.size:
        check_node("DynamicQuantizeLinear", [x], num_outputs=3)
    else:
        y, scale, _zp = run_node("DynamicQuantizeLinear", [x], num_outputs=3)
        assert y.shape == shape and y.dtype == np.uint8 and scale.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer(dtype: type) -> None:
    lo, hi = (0, 255) if dtype == np.uint8 else (-128, 127)
    a = RNG.integers(lo, hi, (2, 3, 5)).astype(dtype)
    b = RNG.integers(lo, hi, (5, 4)).astype(dtype)
    check_node("MatMulInteger", [a, b, np.array(3, dtype), np.array(5, dtype)], opset=10)
    check_node("MatMulInteger", [a, b], opset=10)
    bzp = RNG.integers(0, 9, 4).astype(dtype)
    check_node("MatMulInteger", [a, b, None, bzp], opset=10, oracle="onnxruntime")


@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul(opset: int) -> None:
    a = RNG.integers(0, 255, (2, 4, 3)).astype(np.uint8)
    b = RNG.integers(0, 255, (3, 5)).astype(np.uint8)
    f32 = np.float32
    check_node("QLinearMatMul", [a, np.array(0.02, f32), np.array(100, np.uint8), b,
                                 np.array(0.03, f32), np.array(120, np.uint8),
                                 np.array(0.5, f32), np.array(10, np.uint8)], opset=opset)  # fmt: skip


@pytest.mark.parametrize(
    "attrs",
    [{}, {"pads": [1, 1, 1, 1]}, {"strides": [2, 1], "dilations": [1, 2]},
     {"auto_pad": "SAME_UPPER"}, {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
     {"group": 2}],
)  # fmt: skip
def test_conv_integer(attrs: dict) -> None:
    x = RNG.integers(0, 255, (2, 4, 6, 7)).astype(np.uint8)
    w = RNG.integers(0, 255, (6, 4 // attrs.get("group", 1), 3, 2)).astype(np.uint8)
    check_node("ConvInteger", [x, w, np.array(128, np.uint8), np.array(3, np.uint8)], attrs,
               opset=10)  # fmt: skip


def test_conv_integer_1d_and_3d() -> None:
    x1 = RNG.integers(0, 255, (1, 2, 9)).astype(np.uint8)
    w1 = RNG.integers(0, 255, (3, 2, 3)).astype(np.uint8)
    check_node("ConvInteger", [x1, w1], {"pads": [1, 2]}, opset=10)
    x3 = RNG.integers(0, 255, (1, 2, 4, 5, 3)).astype(np.uint8)
    w3 = RNG.integers(0, 255, (2, 2, 2, 2, 2)).astype(np.uint8)
    check_node("ConvInteger", [x3, w3, np.array(7, np.uint8)], opset=10)


@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(per_channel: bool) -> None:
    x = RNG.integers(0, 255, (1, 3, 5, 5)).astype(np.uint8)
    w = RNG.integers(0, 255, (4, 3, 3, 3)).astype(np.uint8)
    w_scale = (RNG.random(4) * 0.01 + 0.001).astype(np.float32) if per_channel else np.array(
        0.004, np.float32)  # fmt: skip
    w_zp = np.array([120, 125, 130, 128], np.uint8) if per_channel else np.array(128, np.uint8)
    bias = RNG.integers(-500, 500, 4).astype(np.int32)
    inputs = [x, np.array(0.02, np.float32), np.array(100, np.uint8), w, w_scale, w_zp,
              np.array(0.3, np.float32), np.array(90, np.uint8), bias]  # fmt: skip
    check_node("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, opset=10, oracle="onnxruntime")
