"""Copies between devices: inserted where needed, counted, constants copied once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper, numpy_helper

import ortcore
from ep_sdk import Device, ExecutionProvider, KernelRegistry

from .conftest import chain_model, chain_reference, fvi, make_model, manager_with, no_fallback
from .providers import FakeDeviceProvider, FakeTensor

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
W = np.array([[0.5, 2.0, -1.0], [3.0, -0.25, 4.0]], np.float32)


def _copies() -> tuple[int, int]:
    return FakeDeviceProvider.copies_from_host, FakeDeviceProvider.copies_to_host


def test_fake_tensor_cannot_be_read_by_numpy() -> None:
    with pytest.raises(TypeError):
        np.asarray(FakeTensor(X))


def test_chain_all_on_fake_copies_exactly_input_and_output() -> None:
    ops = ["Add", "Relu", "Mul"]
    sess = ortcore.InferenceSession(chain_model(ops), no_fallback(), providers=["fake", "mini"])
    assert set(r.provider for r in sess.get_partition().nodes) == {"FakeDeviceExecutionProvider"}
    assert _copies() == (0, 0)
    for i in range(1, 4):
        (y,) = sess.run(None, {"x": X})
        assert isinstance(y, np.ndarray)
        np.testing.assert_allclose(y, chain_reference(ops, X))
        # x is read by Add and Mul on the device but copied once; y once back.
        assert _copies() == (i, i)
    copies = sess.get_partition().copies
    assert sorted((c.op_type, c.name) for c in copies) == [
        ("MemcpyFromHost", "x"),
        ("MemcpyToHost", "y"),
    ]
    assert {c.provider for c in copies} == {"FakeDeviceExecutionProvider"}
    assert {c.kind for c in copies} == {"copy"}


def test_mixed_devices_copy_at_each_crossing() -> None:
    ops = ["Add", "Relu", "Neg", "Mul"]  # fake, fake, mini, fake
    sess = ortcore.InferenceSession(chain_model(ops), no_fallback(), providers=["fake", "mini"])
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, chain_reference(ops, X))
    # x and Neg's output go to the device, Relu's output and y come back
    assert _copies() == (2, 2)
    copies = sess.get_partition().copies
    assert sorted((c.op_type, c.name) for c in copies) == [
        ("MemcpyFromHost", "t2"),
        ("MemcpyFromHost", "x"),
        ("MemcpyToHost", "t1"),
        ("MemcpyToHost", "y"),
    ]


def test_host_only_session_has_no_copies() -> None:
    sess = ortcore.InferenceSession(chain_model(["Add", "Neg"]), no_fallback(), providers=["mini"])
    sess.run(None, {"x": X})
    assert sess.get_partition().copies == ()
    assert all(info.kind != "copy" for *_, info in sess._plans.planned.plan.steps)


def _weight_chain() -> bytes:
    nodes = [
        helper.make_node("Add", ["x", "w"], ["t0"], name="add"),
        helper.make_node("Relu", ["t0"], ["t1"], name="relu"),
        helper.make_node("Mul", ["t1", "w"], ["y"], name="mul"),
    ]
    return make_model(
        nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], [numpy_helper.from_array(W, "w")]
    )


def test_initializer_copied_to_device_once_at_creation() -> None:
    sess = ortcore.InferenceSession(_weight_chain(), no_fallback(), providers=["fake"])
    assert _copies() == (1, 0)  # w, read twice, copied once when the session was made
    for i in range(1, 4):
        (y,) = sess.run(None, {"x": X})
        np.testing.assert_allclose(y, np.maximum(X + W, 0) * W)
        assert _copies() == (1 + i, i)
    # the constant copy is not a per-run step
    assert [c.name for c in sess.get_partition().copies if c.op_type == "MemcpyFromHost"] == ["x"]


def test_overridable_initializer_is_copied_per_run() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    data = make_model(
        nodes,
        [fvi("x", [2, 3]), fvi("w", [2, 3])],
        [fvi("y", [2, 3])],
        [numpy_helper.from_array(W, "w")],
    )
    sess = ortcore.InferenceSession(data, no_fallback(), providers=["fake"])
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], X + W)
    np.testing.assert_allclose(sess.run(None, {"x": X, "w": X})[0], X + X)


def test_graph_input_that_is_an_output_needs_no_copy() -> None:
    nodes = [helper.make_node("Add", ["x", "x"], ["y"], name="add")]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("x", [2, 3])])
    sess = ortcore.InferenceSession(data, no_fallback(), providers=["fake"])
    y, x = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, X + X)
    np.testing.assert_array_equal(x, X)
    assert _copies() == (1, 1)


def test_host_memory_input_is_not_copied_to_device() -> None:
    """A kernel input declared ``input_memory={1: "host"}`` is read from the host."""
    seen: list[str] = []

    class HostArgProvider(ExecutionProvider):
        name = "HostArgExecutionProvider"
        device = Device("fake", 0)

        def kernel_registry(self) -> KernelRegistry:
            reg = KernelRegistry()

            @reg.kernel("Add", since=7, input_memory={1: "host"}, output_memory={0: "host"})
            def add(info: Any) -> Any:
                def compute(a: Any, b: Any) -> tuple[np.ndarray]:
                    seen.append(f"{type(a).__name__},{type(b).__name__}")
                    return (a._data + b,)

                return compute

            return reg

        def to_host(self, value: Any) -> np.ndarray:
            return value._data

        def from_host(self, array: np.ndarray) -> Any:
            return FakeTensor(array)

    pm = manager_with(HostArgProvider)
    nodes = [helper.make_node("Add", ["x", "x"], ["y"], name="add")]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    sess = ortcore.InferenceSession(data, providers=["HostArgExecutionProvider"], plugin_manager=pm)
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, X + X)
    assert seen == ["FakeTensor,ndarray"]
    assert [(c.op_type, c.name) for c in sess.get_partition().copies] == [("MemcpyFromHost", "x")]
