"""Signal-processing kernels against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node

RNG = np.random.default_rng(11)


def signal(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("last", [1, 2])
@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dft_opset17(last: int, inverse: int, onesided: int, dtype: type) -> None:
    if inverse and onesided and last == 1:
        pytest.skip("an inverse one-sided DFT reads a complex spectrum")
    x = signal(2, 8, 3, last, dtype=dtype)
    attrs = {"axis": 1, "inverse": inverse, "onesided": onesided}
    check_node("DFT", [x], attrs, opset=17, rtol=1e-4, atol=1e-5)
    check_node("DFT", [x, np.array(6, np.int64)], attrs, opset=17, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [1, 2, -2, -3])
@pytest.mark.parametrize("length", [None, 5, 12])
def test_dft_opset20_axis_input(axis: int, length: int | None) -> None:
    x = signal(2, 6, 4, 2)
    ln = None if length is None else np.array(length, np.int64)
    check_node("DFT", [x, ln, np.array(axis, np.int64)], opset=20, rtol=1e-4, atol=1e-5)
    check_node("DFT", [x, ln, np.array(axis, np.int64)], {"onesided": 1}, opset=20,
               rtol=1e-4, atol=1e-5)  # fmt: skip


def test_dft_bad_axis() -> None:
    with pytest.raises(ValueError):
        run_node("DFT", [signal(2, 4, 2), None, np.array(-1, np.int64)], opset=20)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_window", [False, True])
@pytest.mark.parametrize("last", [1, 2])
def test_stft(onesided: int, with_window: bool, last: int) -> None:
    if onesided and last == 2:
        pytest.skip("one-sided output needs a real signal")
    x = signal(2, 40, last)
    step = np.array(6, np.int64)
    if with_window:
        window = np.hanning(10).astype(np.float32)
        inputs = [x, step, window, np.array(10, np.int64)]
    else:
        inputs = [x, step, None, np.array(10, np.int64)]
    check_node("STFT", inputs, {"onesided": onesided}, opset=17, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [1, 2, 10])
@pytest.mark.parametrize("dtype_code", [1, 11])
def test_windows(op: str, periodic: int, size: int, dtype_code: int) -> None:
    attrs = {"periodic": periodic, "output_datatype": dtype_code}
    if size == 1 and not periodic:
        got = run_node(op, [np.array(size, np.int64)], attrs, opset=17)[0]
        assert got.shape == (1,)
        return
    check_node(op, [np.array(size, np.int64)], attrs, opset=17, atol=1e-6)


@pytest.mark.parametrize(
    "bins,length,rate,lo,hi", [(8, 16, 8192, 0.0, 4096.0), (20, 512, 16000, 20.0, 8000.0)]
)
def test_mel_weight_matrix(bins: int, length: int, rate: int, lo: float, hi: float) -> None:
    inputs = [np.array(bins, np.int64), np.array(length, np.int64), np.array(rate, np.int64),
              np.array(lo, np.float32), np.array(hi, np.float32)]  # fmt: skip
    check_node("MelWeightMatrix", inputs, opset=17)
    check_node("MelWeightMatrix", inputs, {"output_datatype": 11}, opset=17)
