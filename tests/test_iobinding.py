"""OrtValue and IO binding: host and device values, no copies for values bound on
a device, and the same onnxruntime code running on both runtimes."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ortcore
from ortcore.ortvalue import OrtValue

from .conftest import chain_model, chain_reference, no_fallback
from .providers import FakeDeviceProvider, FakeTensor

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
OPS = ["Add", "Relu", "Mul"]


def _copies() -> tuple[int, int]:
    return FakeDeviceProvider.copies_from_host, FakeDeviceProvider.copies_to_host


def _fake_session(ops: list[str] = OPS) -> ortcore.InferenceSession:
    return ortcore.InferenceSession(chain_model(ops), no_fallback(), providers=["fake", "mini"])


def test_ortvalue_on_the_host_shares_memory() -> None:
    ov = OrtValue.ortvalue_from_numpy(X)
    assert ov.device_name() == "cpu" and ov.is_tensor() and ov.has_value()
    assert ov.shape() == [2, 3] and ov.data_type() == "tensor(float)" and ov.element_type() == 1
    assert np.shares_memory(ov.numpy(), X)
    assert ov.data_ptr() == X.ctypes.data
    z = OrtValue.ortvalue_from_shape_and_type([4, 1], np.int64)
    assert z.shape() == [4, 1] and z.data_type() == "tensor(int64)"
    z.update_inplace(np.arange(4).reshape(4, 1))
    np.testing.assert_array_equal(z.numpy().ravel(), [0, 1, 2, 3])


def test_ortvalue_on_a_device_moves_with_its_provider() -> None:
    ov = OrtValue.ortvalue_from_numpy(X, "fake", 0)
    assert isinstance(ov.value, FakeTensor) and _copies() == (1, 0)
    assert ov.device_name() == "fake" and ov.shape() == [2, 3]
    assert ov.data_type() == "tensor(float)"
    np.testing.assert_array_equal(ov.numpy(), X)
    assert _copies() == (1, 1)
    z = OrtValue.ortvalue_from_shape_and_type((2, 2), np.float64, "fake", 0)
    assert z.device_name() == "fake" and z.data_type() == "tensor(double)"
    with pytest.raises(ortcore.InvalidArgument, match="no available provider owns device"):
        OrtValue.ortvalue_from_numpy(X, "nosuchdevice", 0)


def test_bound_on_the_device_nothing_is_copied() -> None:
    sess = _fake_session()
    x_dev = OrtValue.ortvalue_from_numpy(X, "fake", 0)
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", x_dev)
    binding.bind_output("y", "fake", 0)
    before = _copies()
    for _ in range(3):
        sess.run_with_iobinding(binding)
        (y,) = binding.get_outputs()
        assert y.device_name() == "fake" and isinstance(y.value, FakeTensor)
    assert _copies() == before  # no copy in, none out, in any run
    np.testing.assert_allclose(y.numpy(), chain_reference(OPS, X))
    # the output on the device feeds the next run, still without copies
    binding.bind_ortvalue_input("x", y)
    before = _copies()
    sess.run_with_iobinding(binding)
    assert _copies() == before
    np.testing.assert_allclose(
        binding.copy_outputs_to_cpu()[0], chain_reference(OPS, chain_reference(OPS, X))
    )


def test_mixed_bindings_copy_only_where_a_device_is_crossed() -> None:
    sess = _fake_session()
    binding = sess.io_binding()
    binding.bind_cpu_input("x", X)
    binding.bind_output("y", "fake")
    before = _copies()
    sess.run_with_iobinding(binding)
    assert _copies() == (before[0] + 1, before[1])  # x up, y stays on the device
    binding.bind_input("x", OrtValue.ortvalue_from_numpy(X, "fake"))
    binding.bind_output("y")  # back on the host
    before = _copies()
    sess.run_with_iobinding(binding)
    assert _copies() == (before[0], before[1] + 1)
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], chain_reference(OPS, X))
    # host-only bindings use the session's own plan
    host = (ortcore.ortvalue.HOST_DEVICE,)
    assert sess._plans.variant(host, host) is sess._plans.planned.plan


def test_output_on_device_produced_on_host_is_moved_once() -> None:
    sess = _fake_session(["Add", "Neg"])  # Neg runs on mini (host)
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", OrtValue.ortvalue_from_numpy(X, "fake"))
    binding.bind_output("y", "fake")
    before = _copies()
    sess.run_with_iobinding(binding)
    # Add's output comes to the host for Neg, Neg's output goes to the device
    assert _copies() == (before[0] + 1, before[1] + 1)
    np.testing.assert_allclose(binding.get_outputs()[0].numpy(), -(X + X))


def test_preallocated_outputs_are_written_into() -> None:
    sess = ortcore.InferenceSession(chain_model(["Add", "Neg"]), providers=["mini"])
    out = np.zeros_like(X)
    binding = sess.io_binding()
    binding.bind_input("x", "cpu", 0, np.float32, list(X.shape), X.ctypes.data)
    binding.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(out, -(X + X))
    ov = OrtValue.ortvalue_from_shape_and_type(X.shape, np.float32)
    binding.bind_ortvalue_output("y", ov)
    sess.run_with_iobinding(binding)
    assert binding.get_outputs()[0] is ov
    np.testing.assert_array_equal(ov.numpy(), -(X + X))
    binding.clear_binding_outputs()
    with pytest.raises(ortcore.InvalidArgument, match="bind at least one output"):
        sess.run_with_iobinding(binding)
    binding.clear_binding_inputs()
    binding.bind_output("y")
    with pytest.raises(ortcore.InvalidArgument, match="missing"):
        sess.run_with_iobinding(binding)


def test_binding_errors_name_the_problem() -> None:
    sess = _fake_session()
    binding = sess.io_binding()
    with pytest.raises(ortcore.InvalidArgument, match="Invalid input name"):
        binding.bind_cpu_input("nope", X)
    with pytest.raises(ortcore.InvalidArgument, match="Invalid output name"):
        binding.bind_output("nope")
    with pytest.raises(ortcore.InvalidArgument, match="raw pointer"):
        binding.bind_input("x", "fake", 0, np.float32, [2, 3], X.ctypes.data)
    binding.bind_ortvalue_input("x", OrtValue.ortvalue_from_numpy(X.astype(np.float64), "fake"))
    binding.bind_output("y")
    with pytest.raises(ortcore.InvalidArgument, match="Unexpected input data type"):
        sess.run_with_iobinding(binding)
    binding.bind_ortvalue_input("x", OrtValue.ortvalue_from_numpy(X[:1], "fake"))
    with pytest.raises(ortcore.InvalidArgument, match="invalid dimensions"):
        sess.run_with_iobinding(binding)
    mini = ortcore.InferenceSession(chain_model(["Neg"]), providers=["mini"])
    with pytest.raises(ortcore.InvalidArgument, match="no provider of this session"):
        mini.run_with_ort_values(None, {"x": OrtValue.ortvalue_from_numpy(X, "fake")})


def test_run_with_ort_values_reads_device_inputs_in_place() -> None:
    sess = _fake_session()
    x_dev = OrtValue.ortvalue_from_numpy(X, "fake")
    before = _copies()
    (y,) = sess.run_with_ort_values(["y"], {"x": x_dev})
    assert y.device_name() == "cpu"
    assert _copies() == (before[0], before[1] + 1)  # only y comes back
    np.testing.assert_allclose(y.numpy(), chain_reference(OPS, X))


def _onnxruntime_style(ort: ModuleType, model: bytes) -> list[Any]:
    """Code written for onnxruntime, run unchanged with either module as ``ort``."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    ro = ort.RunOptions()
    ro.logid = "iobinding"
    ro.log_severity_level = 3
    ro.only_execute_path_to_fetches = True
    got: list[Any] = []

    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y")
    binding.synchronize_inputs()
    sess.run_with_iobinding(binding, ro)
    binding.synchronize_outputs()
    got.append(binding.copy_outputs_to_cpu()[0])
    outs = binding.get_outputs()
    got.append((outs[0].shape(), outs[0].data_type(), outs[0].device_name(), outs[0].is_tensor()))

    x_ort = ort.OrtValue.ortvalue_from_numpy(x, "cpu", 0)
    y_ort = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32, "cpu", 0)
    binding.clear_binding_inputs()
    binding.clear_binding_outputs()
    binding.bind_ortvalue_input("x", x_ort)
    binding.bind_ortvalue_output("y", y_ort)
    sess.run_with_iobinding(binding)
    got.append(y_ort.numpy().copy())

    out = np.empty((2, 3), np.float32)
    binding.bind_input("x", "cpu", 0, np.float32, [2, 3], x_ort.data_ptr())
    binding.bind_output("y", "cpu", 0, np.float32, [2, 3], out.ctypes.data)
    sess.run_with_iobinding(binding)
    got.append(out.copy())

    (y,) = sess.run_with_ort_values(["y"], {"x": x_ort}, ro)
    got.append((y.numpy(), y.shape(), y.data_type()))
    got.append(sess.run(["y"], {"x": x}, ro)[0])
    return got


def test_the_same_onnxruntime_code_runs_on_both(cpu: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = chain_model(["Add", "Relu", "Mul", "Neg"])
    theirs = _onnxruntime_style(ort, model)
    mine = _onnxruntime_style(ortcore, model)
    assert len(theirs) == len(mine)
    for a, b in zip(theirs, mine):
        if isinstance(a, tuple):
            assert len(a) == len(b)
            for p, q in zip(a, b):
                if isinstance(p, np.ndarray):
                    np.testing.assert_allclose(q, p, rtol=1e-6)
                else:
                    assert p == q
        else:
            np.testing.assert_allclose(b, a, rtol=1e-6)


class _ScriptedSession:
    """Only what ``ortcore.iobinding.BindingSession`` asks of a session."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[tuple[str, Any]]]] = []

    def check_input_name(self, name: str) -> None:
        if name != "x":
            raise ortcore.InvalidArgument(f"Invalid input name: {name}")

    def check_output_name(self, name: str) -> None:
        if name not in ("y", "z"):
            raise ortcore.InvalidArgument(f"Invalid output name:{name}")

    def run_with_binding(
        self, inputs: Any, outputs: Any, run_options: Any = None
    ) -> list[OrtValue]:
        self.calls.append((list(inputs), list(outputs)))
        x = inputs["x"].numpy()
        return [OrtValue(x + 1 if name == "y" else x * 2) for name, _ in outputs]


def test_binding_talks_to_its_session_through_binding_session_only() -> None:
    from ortcore.iobinding import IOBinding, run_binding

    session = _ScriptedSession()
    binding = IOBinding(session)
    binding.bind_cpu_input("x", X)
    z_buffer = OrtValue.ortvalue_from_numpy(np.zeros_like(X))
    binding.bind_ortvalue_output("z", z_buffer)
    binding.bind_output("y")
    with pytest.raises(ortcore.InvalidArgument, match="Invalid input name: w"):
        binding.bind_cpu_input("w", X)
    with pytest.raises(ortcore.InvalidArgument, match="Invalid output name:w"):
        binding.bind_output("w")
    run_binding(session, binding)
    host = ortcore.ortvalue.HOST_DEVICE
    assert session.calls == [(["x"], [("z", host), ("y", host)])]
    z, y = binding.get_outputs()
    assert z is z_buffer  # the preallocated value holds the result
    np.testing.assert_array_equal(z_buffer.numpy(), X * 2)
    np.testing.assert_array_equal(y.numpy(), X + 1)
    binding.clear_binding_outputs()
    with pytest.raises(ortcore.InvalidArgument, match="bind at least one output"):
        run_binding(session, binding)
