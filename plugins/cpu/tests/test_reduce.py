"""Reductions and ArgMax/ArgMin against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node = kit.check_node

RNG = np.random.default_rng(4)

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"]
AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18,
                    "ReduceProd": 18}  # fmt: skip


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(1, 4, shape).astype(dtype)
    return (RNG.random(shape) + 0.5).astype(dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", [None, [1], [-1], [0, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.float16])
def test_reduce_axes_attribute(op: str, axes: list | None, keepdims: int, dtype: type) -> None:
    attrs: dict = {"keepdims": keepdims}
    if axes is not None:
        attrs["axes"] = axes
    tol = 1e-2 if dtype == np.float16 else 1e-5
    check_node(op, [rand(2, 3, 4, dtype=dtype)], attrs, opset=11, rtol=tol)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", [None, [1], [-1, 0], []])
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_axes_input(op: str, axes: list | None, noop: int) -> None:
    opset = AXES_INPUT_SINCE[op]
    inputs = [rand(2, 3, 4)]
    if axes is not None:
        inputs.append(np.array(axes, np.int64))
    check_node(op, inputs, {"noop_with_empty_axes": noop}, opset=opset, rtol=1e-5)


@pytest.mark.parametrize("op", OPS)
def test_reduce_empty(op: str) -> None:
    opset = AXES_INPUT_SINCE[op]
    x = np.zeros((2, 0, 3), np.float32)
    check_node(op, [x, np.array([1], np.int64)], {"keepdims": 1}, opset=opset)


def test_reduce_max_bool_opset20() -> None:
    check_node("ReduceMax", [RNG.random((3, 4)) > 0.5, np.array([1], np.int64)], opset=20)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(op: str, axis: int, keepdims: int, last: int) -> None:
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    check_node(op, [x], attrs, opset=13)


def test_arg_opset1_ignores_select_last_index() -> None:
    check_node("ArgMax", [rand(3, 4)], {"axis": 1}, opset=1)
