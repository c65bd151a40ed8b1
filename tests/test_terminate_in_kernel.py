"""``ep_sdk.check_terminate``: a kernel that runs long on its own honours
``RunOptions.terminate``, in every execution mode and inside subgraphs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from onnx import TensorProto, helper

import ep_sdk
import ortcore
from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo

from .conftest import fvi, make_model, manager_with
from .providers import _mini_registry

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


class SpinProvider(ExecutionProvider):
    """Mini's ops, and ``Abs`` that loops until the run is told to stop
    (``SpinProvider.spin``) and records the run it saw."""

    name = "SpinExecutionProvider"
    aliases = ("spin",)
    spin = False
    started = threading.Event()
    seen: ClassVar[list[Any]] = []

    def kernel_registry(self) -> KernelRegistry:
        reg = _mini_registry()

        def abs_(info: NodeInfo) -> Any:
            def compute(x: np.ndarray) -> tuple[np.ndarray]:
                SpinProvider.seen.append(ep_sdk.current_run())
                SpinProvider.started.set()
                deadline = time.monotonic() + 30
                while SpinProvider.spin and time.monotonic() < deadline:
                    ep_sdk.check_terminate()
                    time.sleep(0.001)
                return (np.abs(x),)

            return compute

        reg.kernel("Abs", since=6)(abs_)
        return reg


@pytest.fixture
def spin() -> Any:
    SpinProvider.spin = True
    SpinProvider.started = threading.Event()
    SpinProvider.seen = []
    yield manager_with(SpinProvider)
    SpinProvider.spin = False


def _abs_model() -> bytes:
    node = helper.make_node("Abs", ["x"], ["y"], name="spinner")
    return make_model([node], [fvi("x", [2, 3])], [fvi("y", [2, 3])])


def _if_abs_model() -> bytes:
    """If(cond) then Abs(x) else Relu(x): the spinning kernel runs inside a subgraph."""
    then_g = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["t"], name="inner_spinner")], "then_g", [],
        [fvi("t", [2, 3])],
    )  # fmt: skip
    else_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["e"], name="inner_relu")], "else_g", [],
        [fvi("e", [2, 3])],
    )  # fmt: skip
    node = helper.make_node("If", ["cond"], ["y"], name="the_if", then_branch=then_g,
                            else_branch=else_g)  # fmt: skip
    return make_model(
        [node], [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )


def _stop_after(sess: ortcore.InferenceSession, feeds: dict[str, Any]) -> float:
    """Run ``sess`` on a thread, set ``terminate`` once the kernel spins for
    0.2 s; return how long the run took to stop after that."""
    ro = ortcore.RunOptions()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            sess.run(None, feeds, ro)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    assert SpinProvider.started.wait(10)
    time.sleep(0.2)
    t0 = time.monotonic()
    ro.terminate = True
    t.join(10)
    took = time.monotonic() - t0
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ortcore.RunTerminated), errors
    assert str(errors[0]) == "Exiting due to terminate flag being set to true."
    return took


@pytest.mark.parametrize("mode", ["sequential", "parallel", "profiling"])
def test_a_spinning_kernel_stops_on_terminate(spin: Any, mode: str, tmp_path: Path) -> None:
    so = ortcore.SessionOptions()
    if mode == "parallel":
        so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    if mode == "profiling":
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / "profile")
    sess = ortcore.InferenceSession(_abs_model(), so, providers=["spin"], plugin_manager=spin)
    assert _stop_after(sess, {"x": X}) < 2.0
    # the next run, terminate not set, works
    SpinProvider.spin = False
    (y,) = sess.run(None, {"x": X}, ortcore.RunOptions())
    np.testing.assert_array_equal(y, np.abs(X))
    if mode == "profiling":
        sess.end_profiling()


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_a_kernel_inside_a_subgraph_sees_the_outer_run(spin: Any, mode: str) -> None:
    so = ortcore.SessionOptions()
    if mode == "parallel":
        so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    sess = ortcore.InferenceSession(_if_abs_model(), so, providers=["spin"], plugin_manager=spin)
    assert _stop_after(sess, {"cond": np.array(True), "x": X}) < 2.0
    SpinProvider.spin = False
    SpinProvider.seen = []
    ro = ortcore.RunOptions()
    (y,) = sess.run(None, {"cond": np.array(True), "x": X}, ro)
    np.testing.assert_array_equal(y, np.abs(X))
    (ctx,) = SpinProvider.seen
    assert ctx is not None and ctx.run_options is ro


def test_the_current_run_is_unbound_after_a_run(spin: Any) -> None:
    SpinProvider.spin = False
    sess = ortcore.InferenceSession(_abs_model(), providers=["spin"], plugin_manager=spin)
    sess.run(None, {"x": X})
    assert ep_sdk.current_run() is None
    ep_sdk.check_terminate()  # outside a run: nothing to check, no error


def test_two_concurrent_runs_see_their_own_options(spin: Any) -> None:
    """Terminating one run leaves another run of the same session alone."""
    sess = ortcore.InferenceSession(_abs_model(), providers=["spin"], plugin_manager=spin)
    stopped, kept = ortcore.RunOptions(), ortcore.RunOptions()
    results: dict[str, Any] = {}

    def work(key: str, ro: ortcore.RunOptions) -> None:
        try:
            results[key] = sess.run(None, {"x": X}, ro)[0]
        except BaseException as exc:
            results[key] = exc

    threads = [threading.Thread(target=work, args=a) for a in (("a", stopped), ("b", kept))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(SpinProvider.seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stopped.terminate = True
    threads[0].join(10)
    assert isinstance(results.get("a"), ortcore.RunTerminated)
    assert threads[1].is_alive()  # still spinning: its terminate flag is not set
    SpinProvider.spin = False
    threads[1].join(10)
    np.testing.assert_array_equal(results["b"], np.abs(X))
