"""Pooling kernels against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.kernels._common import KEPT_PER_NODE
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node

RNG = np.random.default_rng(2)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


POOL_CASES = [
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    (
        (1, 2, 10, 10),
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    ),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 9, 9), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 2, 9), {"kernel_shape": [3], "pads": [1, 1]}),
    (
        (1, 2, 5, 6, 7),
        {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 1, 0, 0, 1, 1]},
    ),
    ((1, 64, 28, 28), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((0, 2, 8, 8), {"kernel_shape": [2, 2]}),
    # stride 1 (the padded-plane path): asymmetric pads, windows wider than the input
    ((1, 3, 7, 10), {"kernel_shape": [2, 3], "pads": [1, 0, 0, 2]}),
    ((2, 2, 3, 2), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),
]


def _oracle(xs: tuple, attrs: dict) -> str:
    """onnx.reference gets SAME_LOWER output sizes and 1-D MaxPool wrong."""
    if len(xs) == 3 or attrs.get("auto_pad") == "SAME_LOWER":
        return "onnxruntime"
    return "reference"


@pytest.mark.parametrize(("xs", "attrs"), POOL_CASES)
def test_max_pool(xs: tuple, attrs: dict) -> None:
    check_node("MaxPool", [rand(*xs)], attrs, opset=12, oracle=_oracle(xs, attrs))


@pytest.mark.parametrize("dilations", [[2, 2], [1, 2]])
def test_max_pool_dilations(dilations: list) -> None:
    attrs = {"kernel_shape": [3, 3], "dilations": dilations, "pads": [2, 2, 2, 2]}
    check_node("MaxPool", [rand(1, 2, 9, 9)], attrs, opset=12)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("case", [1, 2, 3, 10])
def test_max_pool_indices(storage_order: int, case: int) -> None:
    xs, attrs = POOL_CASES[case]
    attrs = {**attrs, "storage_order": storage_order}
    # onnx.reference computes wrong indices when pads are present.
    check_node("MaxPool", [rand(*xs)], attrs, opset=12, num_outputs=2, oracle="onnxruntime")


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int8, np.uint8])
def test_max_pool_dtypes(dtype: type) -> None:
    x = (rand(1, 2, 9, 9) * 20).astype(dtype)
    oracle = "onnxruntime" if dtype in (np.int8, np.uint8) else "reference"
    check_node(
        "MaxPool", [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, opset=12, oracle=oracle
    )


def test_max_pool_indices_float64() -> None:
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "storage_order": 1}
    x = rand(1, 2, 9, 9, dtype=np.float64)
    want = run_node("MaxPool", [x.astype(np.float32)], attrs, opset=12, num_outputs=2)
    want = [want[0].astype(np.float64), want[1]]
    check_node("MaxPool", [x], attrs, opset=12, num_outputs=2, expected=want)


@pytest.mark.parametrize("opset", [1, 8, 10, 11, 22])
def test_max_pool_opsets(opset: int) -> None:
    check_node("MaxPool", [rand(1, 2, 8, 8)], {"kernel_shape": [3, 3]}, opset=opset)


@pytest.mark.parametrize(("xs", "attrs"), POOL_CASES)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool(xs: tuple, attrs: dict, include_pad: int) -> None:
    attrs = {**attrs, "count_include_pad": include_pad}
    check_node("AveragePool", [rand(*xs)], attrs, opset=19, rtol=1e-5, atol=1e-6,
               oracle=_oracle(xs, attrs))  # fmt: skip


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_average_pool_dtypes(include_pad: int, dtype: type) -> None:
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": include_pad,
             "strides": [2, 2]}  # fmt: skip
    tol = 1e-2 if dtype == np.float16 else 1e-9
    check_node("AveragePool", [rand(1, 2, 9, 9, dtype=dtype)], attrs, opset=19, rtol=tol, atol=tol)


def test_average_pool_dilations() -> None:
    attrs = {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}
    check_node("AveragePool", [rand(1, 2, 8, 8)], attrs, opset=19)


@pytest.mark.parametrize("opset", [7, 10, 11, 19, 22])
def test_average_pool_opsets(opset: int) -> None:
    check_node("AveragePool", [rand(1, 2, 8, 8)], {"kernel_shape": [3, 3]}, opset=opset)


def test_average_pool_ceil_mode_include_pad_matches_onnxruntime() -> None:
    # The last window starts inside the data but runs past the end pad: the
    # divisor counts only positions inside the padded extent (onnxruntime).
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
             "ceil_mode": 1, "count_include_pad": 1}  # fmt: skip
    (got,) = run_node("AveragePool", [x], attrs, opset=19)
    ort = pytest.importorskip("onnxruntime")
    from ep_sdk.testing import make_node_model

    model = make_node_model("AveragePool", [x], attributes=attrs, opset=19)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x0": x})[0], rtol=1e-6)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (1, 4, 7), (1, 2, 3, 4, 5), (1, 3, 0, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_global_pool(op: str, shape: tuple, dtype: type) -> None:
    if 0 in shape and op == "GlobalMaxPool":
        pytest.skip("max of an empty plane is undefined")
    # onnx.reference's GlobalMaxPool is wrong for other than 2 spatial dims.
    oracle = "onnxruntime" if op == "GlobalMaxPool" and len(shape) != 4 else "reference"
    if oracle == "onnxruntime" and dtype == np.float64:
        pytest.skip("onnxruntime has no float64 GlobalMaxPool")
    check_node(op, [rand(*shape, dtype=dtype)], opset=1, rtol=1e-5, atol=1e-6, oracle=oracle)


@pytest.mark.parametrize("length", [1, 7, 8, 9, 16, 23, 49, 169])
def test_global_pools_of_every_plane_length_with_special_values(length: int) -> None:
    """The float32 global pools sum and compare in several lanes at once:
    every plane length (tails of the 8-wide steps included) gives numpy's
    mean (in float64) and max, and a NaN anywhere in a plane, or an
    infinity, reaches its result."""
    rng = np.random.default_rng(length)
    x = rng.standard_normal((1, 6, length)).astype(np.float32) * 100
    x[0, 1, length - 1] = np.nan  # in the tail (or the only value)
    x[0, 2, length // 2] = np.nan
    x[0, 3, 0] = np.inf
    x[0, 4, length - 1] = -np.inf
    x[0, 5] = -3.0  # every value the same and negative
    (mean,) = run_node("GlobalAveragePool", [x], opset=1)
    (top,) = run_node("GlobalMaxPool", [x], opset=1)
    with np.errstate(invalid="ignore"):
        want_mean = x.astype(np.float64).mean(axis=2, keepdims=True).astype(np.float32)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)
    np.testing.assert_array_equal(top, x.max(axis=2, keepdims=True))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool_kernel_keeps_one_window_per_input_size(op: str) -> None:
    """A pooling node fed inputs of many sizes (more than the windows it
    keeps) computes each with its own pads and output size, in any order."""
    attrs = {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 1]}
    x0 = np.random.default_rng(3).standard_normal((1, 2, 5, 5)).astype(np.float32)
    compute = kit.build_node(op, [x0], attrs)
    sizes = [5 + i for i in range(KEPT_PER_NODE + 3)]
    for h in [*sizes, *reversed(sizes)]:
        x = np.random.default_rng(h).standard_normal((1, 2, h, 12 - h % 4)).astype(np.float32)
        (y,) = compute(x)
        (want,) = kit.check_node(op, [x], attrs)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_a_pool_worth_two_threads_gets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool's thread count weighs each window tap as POOL_TAP_WORK elements
    of a memory-bound loop: SqueezeNet's 3x3 max pool over 256 channels of
    27x27 (389K taps) takes both threads at a grain of 32768."""
    from spies import record_calls

    from ortcore_cpu.kernels import _common, pool

    monkeypatch.setattr(_common, "_grain", 32768)
    monkeypatch.setattr(_common, "share", lambda: 2)
    seen = record_calls(monkeypatch, pool, "max_pool")
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2]}
    compute = kit.build_node("MaxPool", [rand(1, 256, 27, 27)], attrs)
    x = rand(1, 256, 27, 27)
    (y,) = compute(x)
    assert seen == [2]
    want = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    np.testing.assert_array_equal(y, want.max(axis=(4, 5)))
    monkeypatch.setattr(pool, "POOL_TAP_WORK", 1)  # the old weight: one thread
    compute(x)
    assert seen == [2, 1]
