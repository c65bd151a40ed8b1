"""ExecutionMode.ORT_PARALLEL: branches overlap, results equal sequential mode's."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest
from onnx import helper

import ortcore
from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo
from ortcore.parallel import Schedule

from .conftest import fvi, make_model, manager_with

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


class SleepyProvider(ExecutionProvider):
    """Neg that sleeps ``delay`` seconds (releasing the GIL); Add; Relu that may fail."""

    name = "SleepyExecutionProvider"
    aliases = ("sleepy",)
    delay: ClassVar[float] = 0.0
    fail: ClassVar[str] = ""

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()
        cls = type(self)

        def neg(info: NodeInfo) -> Any:
            def compute(x: np.ndarray) -> tuple[np.ndarray]:
                time.sleep(cls.delay)
                return (-x,)

            return compute

        def relu(info: NodeInfo) -> Any:
            def compute(x: np.ndarray) -> tuple[np.ndarray]:
                if info.name == cls.fail:
                    raise ValueError("relu broke")
                return (np.maximum(x, 0),)

            return compute

        reg.kernel("Neg", since=1)(neg)
        reg.kernel("Relu", since=1)(relu)
        reg.kernel("Add", since=1)(lambda info: lambda a, b: (a + b,))
        return reg


@pytest.fixture(autouse=True)
def _reset() -> None:
    SleepyProvider.delay = 0.0
    SleepyProvider.fail = ""


def _branches(n: int) -> bytes:
    """``n`` branches Neg -> Relu of x, summed pairwise into y."""
    nodes = []
    for b in range(n):
        nodes.append(helper.make_node("Neg", ["x"], [f"n{b}"], name=f"neg{b}"))
        nodes.append(helper.make_node("Relu", [f"n{b}"], [f"r{b}"], name=f"relu{b}"))
    acc = "r0"
    for b in range(1, n):
        out = "y" if b == n - 1 else f"s{b}"
        nodes.append(helper.make_node("Add", [acc, f"r{b}"], [out], name=f"add{b}"))
        acc = out
    return make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3]), fvi("r0", [2, 3])])


def _session(data: bytes, mode: Any, threads: int = 4, **kw: Any) -> ortcore.InferenceSession:
    so = ortcore.SessionOptions()
    so.execution_mode = mode
    so.inter_op_num_threads = threads
    # The branches are identical on purpose; keep CSE from merging them.
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    for k, v in kw.items():
        setattr(so, k, v)
    return ortcore.InferenceSession(
        data, so, providers=["sleepy"], plugin_manager=manager_with(SleepyProvider)
    )


def test_schedule_counts_dependencies() -> None:
    sess = _session(_branches(3), ortcore.ExecutionMode.ORT_PARALLEL)
    plan = sess._plans.planned.plan
    sched = Schedule.of(plan)
    assert Schedule.of(plan) is sched
    names = [info.name for *_, info in plan.steps]
    assert sorted(names[i] for i in sched.starts) == ["neg0", "neg1", "neg2"]
    assert sched.waits[names.index("add2")] == 2


def test_parallel_equals_sequential() -> None:
    data = _branches(4)
    seq = _session(data, ortcore.ExecutionMode.ORT_SEQUENTIAL)
    par = _session(data, ortcore.ExecutionMode.ORT_PARALLEL)
    for _ in range(20):
        for a, b in zip(seq.run(None, {"x": X}), par.run(None, {"x": X})):
            np.testing.assert_array_equal(a, b)
    (r0,) = par.run(["r0"], {"x": X})
    np.testing.assert_array_equal(r0, np.maximum(-X, 0))


def test_independent_branches_overlap() -> None:
    data = _branches(4)
    SleepyProvider.delay = 0.05
    seq = _session(data, ortcore.ExecutionMode.ORT_SEQUENTIAL)
    par = _session(data, ortcore.ExecutionMode.ORT_PARALLEL, threads=4)
    t = time.perf_counter()
    seq.run(None, {"x": X})
    t_seq = time.perf_counter() - t
    t = time.perf_counter()
    par.run(None, {"x": X})
    t_par = time.perf_counter() - t
    assert t_seq >= 0.2
    assert t_par < 0.15, (t_seq, t_par)


def test_many_threads_share_a_parallel_session() -> None:
    par = _session(_branches(3), ortcore.ExecutionMode.ORT_PARALLEL, threads=2)
    expected = par.run(None, {"x": X})

    def work(k: int) -> bool:
        x = X * k
        (y, _) = par.run(None, {"x": x})
        return bool(np.array_equal(y, 3 * np.maximum(-x, 0)))

    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(work, range(24)))
    np.testing.assert_array_equal(par.run(None, {"x": X})[0], expected[0])


def test_a_failing_step_names_the_node_and_the_session_stays_usable() -> None:
    par = _session(_branches(3), ortcore.ExecutionMode.ORT_PARALLEL)
    SleepyProvider.fail = "relu1"
    with pytest.raises(ortcore.RuntimeException, match="relu1") as info:
        par.run(None, {"x": X})
    assert isinstance(info.value.__cause__, ValueError)
    SleepyProvider.fail = ""
    (y, _) = par.run(None, {"x": X})
    np.testing.assert_array_equal(y, 3 * np.maximum(-X, 0))


def test_terminate_stops_a_parallel_run() -> None:
    par = _session(_branches(2), ortcore.ExecutionMode.ORT_PARALLEL)
    ro = ortcore.RunOptions()
    ro.terminate = True
    with pytest.raises(ortcore.RunTerminated):
        par.run(None, {"x": X}, ro)
    ro.terminate = False
    assert par.run(None, {"x": X}, ro)[0].shape == (2, 3)


def test_profiling_in_parallel_mode(tmp_path: Path) -> None:
    par = _session(
        _branches(3),
        ortcore.ExecutionMode.ORT_PARALLEL,
        enable_profiling=True,
        profile_file_prefix=str(tmp_path / "p"),
    )
    par.run(None, {"x": X})
    events = ortcore.profiling.load_trace(par.end_profiling())
    nodes = [e for e in events if e["cat"] == "Node"]
    assert sorted(e["args"]["node_name"] for e in nodes) == sorted(
        ["neg0", "neg1", "neg2", "relu0", "relu1", "relu2", "add1", "add2"]
    )
    assert sum(e["name"] == "model_run" for e in events) == 1


def test_light_inception_matches_sequential(cpu: str) -> None:
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    model = light / "light_inception_v1.onnx"
    if not model.exists():
        pytest.skip("light_inception_v1 is not in this onnx")
    seq_so = ortcore.SessionOptions()
    par_so = ortcore.SessionOptions()
    par_so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    par_so.inter_op_num_threads = 2
    seq = ortcore.InferenceSession(str(model), seq_so, providers=[cpu])
    par = ortcore.InferenceSession(str(model), par_so, providers=[cpu])
    (arg,) = seq.get_inputs()
    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    x = (np.arange(int(np.prod(shape))).reshape(shape) / np.prod(shape)).astype(np.float32)
    np.testing.assert_array_equal(seq.run(None, {arg.name: x})[0], par.run(None, {arg.name: x})[0])
