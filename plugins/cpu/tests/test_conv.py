"""Conv and ConvTranspose against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node

RNG = np.random.default_rng(1)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 10, 9), (4, 3, 3, 2), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    ((1, 2, 11, 11), (3, 2, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 4, 9, 9), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 9), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 6, 9, 8), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 9), (4, 1, 5, 5), {"group": 4, "dilations": [2, 1], "pads": [4, 2, 4, 2]}),
    # depthwise, stride 1 (padded-plane path): asymmetric and no pads, dilation,
    # non-square kernels and planes, a kernel wider than the input, and bias
    ((1, 5, 7, 10), (5, 1, 3, 3), {"group": 5, "pads": [0, 2, 1, 0]}),
    ((2, 3, 6, 5), (3, 1, 3, 3), {"group": 3}),
    ((1, 3, 9, 11), (3, 1, 3, 3), {"group": 3, "dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ((1, 4, 8, 6), (4, 1, 2, 5), {"group": 4, "pads": [1, 2, 0, 2]}),
    ((1, 2, 3, 2), (2, 1, 3, 3), {"group": 2, "pads": [2, 2, 2, 2]}),
    ((1, 24, 20, 20), (24, 1, 3, 3), {"group": 24, "pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 9), (8, 2, 1, 1), {"group": 2}),  # grouped pointwise
    ((2, 8, 7, 7), (5, 8, 1, 1), {}),  # pointwise
    ((1, 8, 7, 7), (5, 8, 1, 1), {"strides": [2, 2]}),  # strided pointwise
    ((1, 3, 9, 9), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 9, 9), (4, 3, 2, 2), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 3, 8, 8), (4, 3, 2, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 9, 9), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 3, 9), (4, 3, 3), {"pads": [1, 2]}),  # 1-D
    ((1, 3, 12), (3, 1, 3), {"group": 3, "strides": [2]}),  # 1-D depthwise
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),  # 3-D
    ((1, 2, 5, 6, 7), (4, 1, 2, 3, 2), {"group": 2, "strides": [2, 1, 2]}),
    ((1, 2, 3, 3, 3, 3), (2, 2, 2, 2, 2, 2), {}),  # 4-D: numpy path
    ((0, 3, 9, 9), (4, 3, 3, 3), {}),  # empty batch
]


@pytest.mark.parametrize(("xs", "ws", "attrs"), CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_float32(xs: tuple, ws: tuple, attrs: dict, bias: bool) -> None:
    inputs = [rand(*xs), rand(*ws)]
    if bias:
        inputs.append(rand(ws[0]))
    check_node("Conv", inputs, attrs, opset=11, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("case", [0, 4, 5, 21])
def test_conv_other_dtypes(dtype: type, case: int) -> None:
    xs, ws, attrs = CONV_CASES[case]
    tol = 2e-2 if dtype == np.float16 else 1e-9
    check_node("Conv", [rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)], attrs,
               opset=11, rtol=tol, atol=tol)  # fmt: skip


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_opsets(opset: int) -> None:
    check_node("Conv", [rand(1, 2, 6, 6), rand(3, 2, 3, 3)], {"pads": [1, 1, 1, 1]},
               opset=opset, rtol=1e-4, atol=1e-5)  # fmt: skip


def test_conv_kernel_shape_attribute() -> None:
    check_node("Conv", [rand(1, 2, 6, 6), rand(3, 2, 3, 3)], {"kernel_shape": [3, 3]},
               opset=11, rtol=1e-4, atol=1e-5)  # fmt: skip


def test_conv_threads_agree() -> None:
    x, w = rand(1, 16, 40, 40), rand(32, 16, 3, 3)
    one = run_node("Conv", [x, w], {"pads": [1, 1, 1, 1]}, opset=11, threads=1)[0]
    two = run_node("Conv", [x, w], {"pads": [1, 1, 1, 1]}, opset=11, threads=2)[0]
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-5)


CONV_T_CASES = [
    ((1, 3, 4, 4), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 4, 4, 4), (4, 1, 3, 3), {"group": 2, "strides": [2, 1]}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"dilations": [2, 2]}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [9, 9]}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 9]}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 5), (2, 3, 3), {"strides": [3]}),  # 1-D
    ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), {"strides": [2, 1, 2]}),  # 3-D
]


@pytest.mark.parametrize(("xs", "ws", "attrs"), CONV_T_CASES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_transpose(xs: tuple, ws: tuple, attrs: dict, bias: bool, dtype: type) -> None:
    if dtype == np.float64 and (attrs.get("group", 1) > 1 or attrs.get("output_shape") == [8, 9]):
        pytest.skip("no oracle: onnx.reference is wrong, onnxruntime lacks float64")
    inputs = [rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)]
    if bias:
        inputs.append(rand(ws[1] * attrs.get("group", 1), dtype=dtype))
    # onnx.reference mishandles grouped ConvTranspose and output_shape with
    # uneven padding: use onnxruntime there.
    odd = attrs.get("group", 1) > 1 or attrs.get("output_shape") == [8, 9]
    oracle = "onnxruntime" if odd else "reference"
    check_node("ConvTranspose", inputs, attrs, opset=11, rtol=1e-4, atol=1e-4, oracle=oracle)
