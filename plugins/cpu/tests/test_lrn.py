"""LRN's native kernel (``lrn_f32``, in every activation build this CPU runs)
against a float64 brute-force oracle: window sizes odd and even, the usual
beta (square roots) and others (exp and log), planes that split into runs
of positions unevenly, several images, one to three threads, zeros, NaN,
infinities and overflow as float32 arithmetic gives them; and the LRN node
on float32, float16 and float64, against onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import ortcore
import pytest
from ep_sdk.testing import KernelKit
from onnx import TensorProto, helper
from ortcore.errors import OrtcoreError

from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=13, threads=2)
RNG = np.random.default_rng(21)
BUILDS = runnable_builds("activation")


def _oracle(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """LRN in float64, one channel's window at a time."""
    x = x.astype(np.float64)
    c = x.shape[1]
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    y = np.empty_like(x)
    for i in range(c):
        window = (x[:, max(0, i - before) : min(c, i + after + 1)] ** 2).sum(axis=1)
        y[:, i] = x[:, i] / (bias + alpha / size * window) ** beta
    return y


def _run(build: object, x: np.ndarray, size: int, alpha: float, beta: float, bias: float,
         threads: int) -> np.ndarray:  # fmt: skip
    n, c = x.shape[:2]
    shape3 = (n, c, x.size // max(n * c, 1))
    y = np.full(x.shape, -7.0, np.float32)
    build.lrn_f32(x.reshape(shape3), y.reshape(shape3), size, alpha, beta, bias, threads)  # type: ignore[attr-defined]
    return y


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("shape", [(1, 96, 55, 55), (2, 7, 3, 5), (3, 5, 17), (1, 1, 1, 1),
                                   (2, 16, 9, 9), (1, 3, 2, 2, 3)])  # fmt: skip
@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_builds_against_float64(build: object, shape: tuple, size: int) -> None:
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    for beta, bias, threads in [(0.75, 1.0, 2), (0.5, 2.0, 1), (1.0, 0.5, 3), (0.3, 1.5, 2),
                                (1.7, 1.0, 2)]:  # fmt: skip
        got = _run(build, x, size, 1e-2, beta, bias, threads)
        want = _oracle(x, size, 1e-2, beta, bias)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=0, err_msg=f"beta {beta}")


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("beta", [0.75, 0.3])
@pytest.mark.parametrize("bias", [0.0, 1.0, -1.0])
def test_special_values_as_float32_arithmetic(build: object, beta: float, bias: float) -> None:
    """A base of 0 gives x / 0, one below 0 NaN, inf and NaN inputs NaN, a
    square past float32's range a base of inf: what numpy's float32 power
    gives, element by element."""
    x = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 3e38, -2.5, 1e-3], np.float32)
    x = x.reshape(1, 1, -1)
    got = _run(build, x, 1, 1.0, beta, bias, 1)
    with np.errstate(all="ignore"):
        want = x / np.power(np.float32(bias) + x * x, np.float32(beta))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


def test_kernel_rejects_bad_arguments() -> None:
    build = BUILDS[-1]
    x = np.ones((1, 4, 3), np.float32)
    with pytest.raises(ValueError, match="size 0"):
        build.lrn_f32(x, np.empty_like(x), 0, 1e-4, 0.75, 1.0, 1)
    with pytest.raises(ValueError, match="out of shape"):
        build.lrn_f32(x, np.empty((1, 4, 2), np.float32), 3, 1e-4, 0.75, 1.0, 1)


@pytest.mark.parametrize("shape", [(1, 32, 27, 27), (2, 5, 7, 3), (3, 6, 1, 1)])
@pytest.mark.parametrize("size", [1, 5])
def test_node_against_onnxruntime(shape: tuple, size: int) -> None:
    """onnxruntime's LRN takes 4-D float32 and odd sizes only."""
    x = RNG.standard_normal(shape).astype(np.float32)
    attrs = {"size": size, "alpha": 3e-3, "beta": 0.75, "bias": 1.2}
    kit.check_node("LRN", [x], attrs, opset=13, rtol=1e-5, atol=1e-6, oracle="onnxruntime")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("shape", [(2, 9, 4, 4), (3, 6), (2, 5, 7)])
def test_node_dtypes_ranks_even_size_other_beta(dtype: type, shape: tuple) -> None:
    x = (RNG.standard_normal(shape) * 2).astype(dtype)
    attrs = {"size": 4, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}
    (y,) = kit.run_node("LRN", [x], attrs, opset=13)
    assert y.dtype == dtype
    # the attributes are float32 in the model
    want = _oracle(x, 4, float(np.float32(1e-2)), float(np.float32(0.6)), 2.0)
    rtol = {np.float64: 1e-12, np.float32: 2e-6, np.float16: 1e-3}[dtype]
    np.testing.assert_allclose(y, want.astype(dtype), rtol=rtol)


@pytest.mark.parametrize("size", [0, -3])
def test_session_rejects_a_size_below_one(size: int) -> None:
    node = helper.make_node("LRN", ["x"], ["y"], size=size)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OrtcoreError, match="size must be at least 1"):
        sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
        sess.run(None, {"x": np.ones((1, 4, 3, 3), np.float32)})


def test_node_rejects_rank_one() -> None:
    with pytest.raises(Exception, match="LRN input X of rank 1"):
        kit.run_node("LRN", [np.ones(4, np.float32)], {"size": 3}, opset=13)


def test_marked_native_and_runs_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore_cpu.kernels import normalization, registry
    from ortcore_cpu.kernels._paths import NATIVE, float32_path_of

    marks = {float32_path_of(k.builder) for k in registry if (k.domain, k.op_type) == ("", "LRN")}
    assert marks == {NATIVE}
    calls: list[int] = []
    real = normalization._act

    class Spy:
        @staticmethod
        def lrn_f32(*args: object) -> None:
            calls.append(1)
            real.lrn_f32(*args)

    monkeypatch.setattr(normalization, "_act", Spy)
    x = RNG.standard_normal((1, 6, 5, 5)).astype(np.float32)
    (y,) = kit.run_node("LRN", [x], {"size": 3}, opset=13)
    assert calls
    np.testing.assert_allclose(y, _oracle(x, 3, float(np.float32(1e-4)), 0.75, 1.0), rtol=2e-6)
