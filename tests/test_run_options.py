"""RunOptions: logging fields, terminate from another thread, only_execute_path_to_fetches."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, ClassVar

import numpy as np
import pytest
from onnx import helper

import ortcore
from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo

from .conftest import fvi, make_model, manager_with

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


class CountingProvider(ExecutionProvider):
    """Neg and Relu that count their calls per node; Neg sleeps ``delay`` seconds."""

    name = "CountingExecutionProvider"
    aliases = ("counting",)
    calls: ClassVar[dict[str, int]] = {}
    delay = 0.0
    started = threading.Event()

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()
        cls = type(self)

        def counted(fn: Any) -> Any:
            def build(info: NodeInfo) -> Any:
                def compute(x: np.ndarray) -> tuple[np.ndarray]:
                    cls.calls[info.name] = cls.calls.get(info.name, 0) + 1
                    cls.started.set()
                    if cls.delay:
                        time.sleep(cls.delay)
                    return (fn(x),)

                return compute

            return build

        reg.kernel("Neg", since=1)(counted(np.negative))
        reg.kernel("Relu", since=1)(counted(lambda x: np.maximum(x, 0)))
        return reg


@pytest.fixture
def counting() -> Any:
    CountingProvider.calls = {}
    CountingProvider.delay = 0.0
    CountingProvider.started = threading.Event()
    return manager_with(CountingProvider)


def _session(data: bytes, pm: Any) -> ortcore.InferenceSession:
    return ortcore.InferenceSession(data, providers=["counting"], plugin_manager=pm)


def _two_branches() -> bytes:
    """x -> neg_a -> relu_a -> a ;  x -> neg_b -> b"""
    nodes = [
        helper.make_node("Neg", ["x"], ["ta"], name="neg_a"),
        helper.make_node("Relu", ["ta"], ["a"], name="relu_a"),
        helper.make_node("Neg", ["x"], ["b"], name="neg_b"),
    ]
    return make_model(nodes, [fvi("x", [2, 3])], [fvi("a", [2, 3]), fvi("b", [2, 3])])


def test_run_options_fields_have_onnxruntime_defaults() -> None:
    ro = ortcore.RunOptions()
    assert (ro.log_severity_level, ro.log_verbosity_level, ro.logid) == (2, 0, "")
    assert ro.terminate is False and ro.only_execute_path_to_fetches is False
    ro.log_severity_level = 0
    ro.log_verbosity_level = 1
    ro.logid = "request-42"
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    with pytest.raises(ortcore.InvalidArgument):
        ro.get_run_config_entry("nope")


def test_by_default_every_node_runs(counting: Any) -> None:
    sess = _session(_two_branches(), counting)
    (b,) = sess.run(["b"], {"x": X})
    np.testing.assert_array_equal(b, -X)
    assert CountingProvider.calls == {"neg_a": 1, "relu_a": 1, "neg_b": 1}


def test_only_execute_path_to_fetches_skips_other_branches(counting: Any) -> None:
    sess = _session(_two_branches(), counting)
    ro = ortcore.RunOptions()
    ro.only_execute_path_to_fetches = True
    (b,) = sess.run(["b"], {"x": X}, ro)
    np.testing.assert_array_equal(b, -X)
    assert CountingProvider.calls == {"neg_b": 1}
    (a,) = sess.run(["a"], {"x": X}, ro)
    np.testing.assert_array_equal(a, np.maximum(-X, 0))
    assert CountingProvider.calls == {"neg_b": 1, "neg_a": 1, "relu_a": 1}
    b2, a2 = sess.run(["b", "a"], {"x": X}, ro)
    np.testing.assert_array_equal(b2, -X)
    np.testing.assert_array_equal(a2, a)
    assert CountingProvider.calls == {"neg_b": 2, "neg_a": 2, "relu_a": 2}


def test_terminate_from_another_thread_stops_a_running_run(counting: Any) -> None:
    nodes = [
        helper.make_node("Neg", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"], name=f"n{i}")
        for i in range(20)
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("t19", [2, 3])])
    sess = _session(data, counting)
    CountingProvider.delay = 0.02
    ro = ortcore.RunOptions()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            sess.run(None, {"x": X}, ro)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    assert CountingProvider.started.wait(5)
    ro.terminate = True
    t.join(10)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ortcore.RunTerminated)
    assert "terminate" in str(errors[0])
    assert 1 <= sum(CountingProvider.calls.values()) < 20
    # the session stays usable
    CountingProvider.delay = 0.0
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_array_equal(y, X)  # twenty negations


class HookedProvider(CountingProvider):
    """CountingProvider that records its run hooks."""

    name = "HookedExecutionProvider"
    aliases = ("hooked",)
    events: ClassVar[list[tuple[str, Any]]] = []

    def on_run_start(self, run_options: Any) -> None:
        type(self).events.append(("start", run_options))

    def on_run_end(self, run_options: Any) -> None:
        type(self).events.append(("end", run_options))


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_provider_run_hooks_frame_every_run_even_a_failed_one(mode: str) -> None:
    HookedProvider.events = []
    CountingProvider.delay = 0.0
    so = ortcore.SessionOptions()
    if mode == "parallel":
        so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    sess = ortcore.InferenceSession(
        _two_branches(), so, providers=["hooked"], plugin_manager=manager_with(HookedProvider)
    )
    assert HookedProvider.events == []  # creating the session runs nothing
    ro = ortcore.RunOptions()
    _, b = sess.run(None, {"x": X}, ro)
    np.testing.assert_array_equal(b, -X)
    assert HookedProvider.events == [("start", ro), ("end", ro)]
    ro.terminate = True
    with pytest.raises(ortcore.RunTerminated):
        sess.run(None, {"x": X}, ro)
    assert [e for e, _ in HookedProvider.events] == ["start", "end", "start", "end"]
    sess.run(None, {"x": X})
    assert HookedProvider.events[-2:] == [("start", None), ("end", None)]


def test_providers_without_hooks_run_the_bare_executor(counting: Any) -> None:
    sess = _session(_two_branches(), counting)
    assert sess._runner.execute is sess._runner.base_execute


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_run_options_log_the_run_at_their_severity(
    counting: Any, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    so = ortcore.SessionOptions()
    if mode == "parallel":
        so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    sess = ortcore.InferenceSession(
        _two_branches(), so, providers=["counting"], plugin_manager=counting
    )
    caplog.set_level(logging.DEBUG, logger="ortcore.run")
    sess.run(None, {"x": X})  # default severity 2: nothing
    assert caplog.records == []
    ro = ortcore.RunOptions()
    ro.logid = "req-7"
    ro.log_severity_level = 1
    sess.run(None, {"x": X}, ro)
    assert [(r.levelno, r.getMessage()[:23]) for r in caplog.records] == [
        (logging.INFO, "[req-7] run started: 3 "),
        (logging.INFO, "[req-7] run finished in"),
    ]
    caplog.clear()
    ro.log_severity_level = 0
    ro.log_verbosity_level = 1
    a, _ = sess.run(None, {"x": X}, ro)
    np.testing.assert_array_equal(a, np.maximum(-X, 0))
    nodes = sorted(r.getMessage() for r in caplog.records if " node " in r.getMessage())
    assert [m.split(":")[0] for m in nodes] == [
        "[req-7] node neg_a (Neg on CountingExecutionProvider)",
        "[req-7] node neg_b (Neg on CountingExecutionProvider)",
        "[req-7] node relu_a (Relu on CountingExecutionProvider)",
    ]
    assert all(r.levelno == logging.DEBUG for r in caplog.records)
    caplog.clear()
    ro.terminate = True
    with pytest.raises(ortcore.RunTerminated):
        sess.run(None, {"x": X}, ro)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("[req-7] run failed after")
