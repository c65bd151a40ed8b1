"""Shared fixtures: the test plugin, model builders, the CPU provider check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.plugins import default_manager

from . import providers as test_providers


@pytest.fixture(scope="session", autouse=True)
def test_plugin() -> None:
    """Register the test providers (Mini, FakeDevice, Claiming) once."""
    default_manager().register_plugin(test_providers, name="tests.providers")


@pytest.fixture
def cpu() -> str:
    """Name of the CPU provider; skips if ortcore-cpu is not installed."""
    if "CPUExecutionProvider" not in ortcore.get_available_providers():
        pytest.skip("ortcore-cpu is not installed")
    return "CPUExecutionProvider"


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    ir_version: int = 8,
    **kw: Any,
) -> bytes:
    """Serialize a one-graph model."""
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(initializers))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version, **kw
    )
    return model.SerializeToString()


def fvi(name: str, shape: Sequence[int | str | None] | None, elem: int = TensorProto.FLOAT) -> Any:
    """A tensor value info."""
    return helper.make_tensor_value_info(name, elem, shape)


def chain_model(ops: Sequence[str], shape: Sequence[int | str] = (2, 3)) -> bytes:
    """x -> op0 -> op1 -> ... -> y, binary ops take x as their second input."""
    nodes = []
    prev = "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        ins = [prev, "x"] if op in ("Add", "Mul", "Sub") else [prev]
        nodes.append(helper.make_node(op, ins, [out], name=f"n{i}_{op}"))
        prev = out
    return make_model(nodes, [fvi("x", shape)], [fvi("y", shape)])


def chain_reference(ops: Sequence[str], x: np.ndarray) -> np.ndarray:
    """What :func:`chain_model` computes, in numpy."""
    y = x
    for op in ops:
        y = {
            "Add": lambda v: v + x,
            "Mul": lambda v: v * x,
            "Sub": lambda v: v - x,
            "Relu": lambda v: np.maximum(v, 0),
            "Neg": lambda v: -v,
        }[op](y)
    return y


def plugin_module(name: str, *classes: type) -> Any:
    """A plugin module object whose ``ortcore_providers`` hook returns ``classes``."""
    import types

    import ep_sdk

    mod = types.ModuleType(name)

    @ep_sdk.hookimpl
    def ortcore_providers() -> list[type]:
        return list(classes)

    mod.ortcore_providers = ortcore_providers  # type: ignore[attr-defined]
    return mod


def manager_with(*classes: type) -> Any:
    """A fresh plugin manager (no entry points) offering only ``classes``."""
    from ortcore.plugins import PluginManager

    pm = PluginManager(autoload=False)
    pm.register_plugin(plugin_module("tests.adhoc", *classes), name="tests.adhoc")
    return pm


def no_fallback() -> ortcore.SessionOptions:
    """Session options that forbid the CPU fallback."""
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return so


@pytest.fixture(autouse=True)
def _reset_test_providers() -> Any:
    """Class-level state of the test providers starts clean in every test."""
    test_providers.ClaimingProvider.claims_for = None
    test_providers.ClaimingProvider.compiled = []
    test_providers.FakeDeviceProvider.copies_to_host = 0
    test_providers.FakeDeviceProvider.copies_from_host = 0
    yield
    test_providers.ClaimingProvider.claims_for = None
    test_providers.ClaimingProvider.compiled = []


def level_session(model: bytes, level: Any, provider: str) -> ortcore.InferenceSession:
    """A session of ``model`` at optimization ``level`` on ``provider`` only."""
    so = ortcore.SessionOptions()
    so.graph_optimization_level = level
    return ortcore.InferenceSession(model, so, providers=[provider])


def op_types(sess: ortcore.InferenceSession) -> list[str]:
    """The sorted op types of the session's (optimized) nodes."""
    return sorted(r.op_type for r in sess.get_partition().nodes)


def i64(name: str, values: Sequence[int]) -> TensorProto:
    """An int64 initializer."""
    return numpy_helper.from_array(np.array(values, np.int64), name)


def compare_basic(
    model: bytes, feeds: dict[str, np.ndarray], provider: str
) -> tuple[ortcore.InferenceSession, ortcore.InferenceSession]:
    """Sessions without and with basic optimizations; checks their outputs
    (names, dtypes, values) are equal and returns both."""
    level = ortcore.GraphOptimizationLevel
    plain = level_session(model, level.ORT_DISABLE_ALL, provider)
    basic = level_session(model, level.ORT_ENABLE_BASIC, provider)
    assert [o.name for o in basic.get_outputs()] == [o.name for o in plain.get_outputs()]
    for want, got in zip(plain.run(None, feeds), basic.run(None, feeds), strict=True):
        assert want.dtype == got.dtype
        np.testing.assert_array_equal(got, want)
    return plain, basic
