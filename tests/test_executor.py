"""The executor: release of intermediates, threads, termination, kernel failures,
and control flow through the subgraph API."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo
from ortcore import executor

from .conftest import (
    chain_model,
    chain_reference,
    fvi,
    make_model,
    manager_with,
    no_fallback,
    plugin_module,
)
from .providers import MiniProvider
from .test_model import if_model

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


@pytest.fixture(autouse=True, params=["compiled", "python"])
def step_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both step loops: the compiled one
    (``ortcore/_steps.pyx``) and the Python one it must behave like."""
    if request.param == "python":
        monkeypatch.setattr(executor, "run_steps", executor._run_steps_py)
    return str(request.param)


def test_the_compiled_loop_is_built() -> None:
    """The wheel carries the compiled loop (setup.py builds it wherever a C
    compiler works, as on every machine these tests run on)."""
    assert executor.COMPILED_LOOP
    assert executor.run_steps.__module__ == "ortcore._steps" or executor.run_steps is (
        executor._run_steps_py
    )


@pytest.mark.parametrize(
    "shape", ["tuple", "list", "named", "two"], ids=["tuple", "list", "tuple-subclass", "two-out"]
)
def test_kernel_results_as_tuple_list_or_tuple_subclass(shape: str) -> None:
    """A kernel may return a tuple, a list or a tuple subclass; with two
    outputs both reach their consumers."""

    class Pair(tuple):
        pass

    def neg(info: NodeInfo) -> Any:
        def compute(x: np.ndarray) -> Any:
            y = np.negative(x)
            return {"tuple": (y,), "list": [y], "named": Pair((y,)), "two": (y, x)}[shape]

        return compute

    if shape == "two":

        def split(info: NodeInfo) -> Any:
            return lambda x: [np.negative(x[:1]), x[1:] + 1]

        pm = _provider_with("Split", split)
        nodes = [helper.make_node("Split", ["x"], ["a", "b"], name="s", axis=0)]
        data = make_model(nodes, [fvi("x", [2, 3])], [fvi("a", [1, 3]), fvi("b", [1, 3])])
        a, b = _session(data, pm).run(None, {"x": X})
        np.testing.assert_array_equal(a, -X[:1])
        np.testing.assert_array_equal(b, X[1:] + 1)
        return
    sess = _session(chain_model(["Neg"] * 3), _provider_with("Neg", neg))
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_array_equal(y, -X)


def _provider_with(op: str, builder: Any, **kw: Any) -> Any:
    """A plugin manager whose only provider ``TestExecutionProvider`` has one kernel."""

    class OneKernel(ExecutionProvider):
        name = "TestExecutionProvider"
        aliases = ("one",)

        def kernel_registry(self) -> KernelRegistry:
            reg = KernelRegistry()
            reg.kernel(op, since=1, **kw)(builder)
            return reg

    return manager_with(OneKernel)


def _session(data: bytes, pm: Any) -> ortcore.InferenceSession:
    return ortcore.InferenceSession(data, providers=["one"], plugin_manager=pm)


# -- releasing intermediates ------------------------------------------------------------


def test_intermediates_released_after_last_use() -> None:
    made: list[weakref.ref] = []
    alive_at_call: list[list[bool]] = []

    def neg(info: NodeInfo) -> Any:
        def compute(x: np.ndarray) -> tuple[np.ndarray]:
            alive_at_call.append([r() is not None for r in made])
            out = np.negative(x)
            made.append(weakref.ref(out))
            return (out,)

        return compute

    pm = _provider_with("Neg", neg)
    sess = _session(chain_model(["Neg"] * 5), pm)
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_array_equal(y, -X)
    # When step k runs, only the output of step k-1 (its input) is still held.
    assert alive_at_call == [
        [],
        [True],
        [False, True],
        [False, False, True],
        [False, False, False, True],
    ]
    assert made[-1]() is y


def test_plan_release_lists() -> None:
    sess = ortcore.InferenceSession(
        chain_model(["Neg", "Relu", "Neg"]), no_fallback(), providers=["mini"]
    )
    plan = sess._plans.planned.plan
    assert len(plan) == 3
    steps = plan.steps
    (x_slot,) = plan.input_slots
    (y_slot,) = plan.output_slots
    t0 = steps[0].outputs[0]
    t1 = steps[1].outputs[0]
    assert steps[0].release == (x_slot,)  # x is not read after the first step
    assert steps[1].release == (t0,)
    assert steps[2].release == (t1,)
    assert all(y_slot not in s.release for s in steps)
    assert [s.info.op_type for s in steps] == ["Neg", "Relu", "Neg"]


def test_unread_output_is_released_at_once() -> None:
    # Split's second output is produced but never read: dropped by the step that made it.
    def two_out(info: NodeInfo) -> Any:
        return lambda x: (x + 1, x * 0)

    pm = _provider_with("Split", two_out)
    nodes = [helper.make_node("Split", ["x"], ["y", "unused"], name="split", axis=0)]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", None)], opset=11)
    sess = ortcore.InferenceSession(
        data,
        ortcore.SessionOptions(),
        providers=["one"],
        plugin_manager=pm,
    )
    step = sess._plans.planned.plan.steps[0]
    assert step.outputs[1] in step.release
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], X + 1)


# -- threads --------------------------------------------------------------------------


def test_run_from_eight_threads() -> None:
    ops = ["Add", "Relu", "Mul", "Neg", "Sub"]
    sess = ortcore.InferenceSession(chain_model(ops), no_fallback(), providers=["fake", "mini"])
    barrier = threading.Barrier(8)

    def work(seed: int) -> bool:
        rng = np.random.default_rng(seed)
        barrier.wait()
        for _ in range(50):
            x = rng.standard_normal((2, 3)).astype(np.float32)
            (y,) = sess.run(None, {"x": x})
            if not np.allclose(y, chain_reference(ops, x)):
                return False
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


# -- termination ---------------------------------------------------------------------


def test_terminate_set_before_run() -> None:
    calls: list[int] = []

    def neg(info: NodeInfo) -> Any:
        return lambda x: (calls.append(1), (-x,))[1]

    pm = _provider_with("Neg", neg)
    sess = _session(chain_model(["Neg", "Neg"]), pm)
    ro = ortcore.RunOptions()
    ro.terminate = True
    with pytest.raises(ortcore.RunTerminated, match="terminate"):
        sess.run(None, {"x": X}, ro)
    assert calls == []
    ro.terminate = False
    np.testing.assert_array_equal(sess.run(None, {"x": X}, ro)[0], X)


def test_terminate_set_during_run_stops_between_nodes() -> None:
    calls: list[int] = []

    def neg(info: NodeInfo) -> Any:
        def compute(ctx: Any, x: np.ndarray) -> tuple[np.ndarray]:
            calls.append(1)
            ctx.run_options.terminate = True  # as another thread would
            return (-x,)

        return compute

    pm = _provider_with("Neg", neg, context=True)
    sess = _session(chain_model(["Neg", "Neg", "Neg"]), pm)
    with pytest.raises(ortcore.RunTerminated):
        sess.run(None, {"x": X}, ortcore.RunOptions())
    assert calls == [1]


# -- kernel failures -----------------------------------------------------------------


def test_kernel_exception_is_runtime_exception_naming_node() -> None:
    def bad(info: NodeInfo) -> Any:
        def compute(x: np.ndarray) -> Any:
            raise ValueError("the kernel is broken")

        return compute

    pm = _provider_with("Neg", bad)
    sess = _session(chain_model(["Neg"]), pm)
    with pytest.raises(ortcore.RuntimeException) as info:
        sess.run(None, {"x": X})
    msg = str(info.value)
    assert "Neg" in msg and "n0_Neg" in msg and "the kernel is broken" in msg
    assert "TestExecutionProvider" in msg
    assert isinstance(info.value.__cause__, ValueError)
    assert isinstance(info.value, RuntimeError)


def test_kernel_wrong_number_of_outputs() -> None:
    pm = _provider_with("Neg", lambda info: lambda x: (-x, x))
    sess = _session(chain_model(["Neg"]), pm)
    with pytest.raises(ortcore.RuntimeException, match=r"length 2 for 1 output") as info:
        sess.run(None, {"x": X})
    assert "n0_Neg" in str(info.value)


@pytest.mark.parametrize("mode", ["sequential", "profiled", "parallel"])
@pytest.mark.parametrize(
    ("result", "said"),
    [(None, "kernel returned None for 1 output"), (7, "returned a builtins.int, not a tuple")],
)
def test_kernel_returning_none_names_the_kernel(
    mode: str, result: Any, said: str, tmp_path: Any
) -> None:
    pm = _provider_with("Neg", lambda info: lambda x: result)
    so = ortcore.SessionOptions()
    if mode == "profiled":
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / "trace")
    elif mode == "parallel":
        so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    sess = ortcore.InferenceSession(chain_model(["Neg"]), so, providers=["one"], plugin_manager=pm)
    with pytest.raises(ortcore.RuntimeException) as info:
        sess.run(None, {"x": X})
    msg = str(info.value)
    assert said in msg and "one value per output" in msg
    assert "Neg node. Name:'n0_Neg' (provider TestExecutionProvider)" in msg
    assert "has no len" not in msg
    assert isinstance(info.value.__cause__, TypeError)
    sess.close()


def test_kernel_returning_bare_array_is_an_error() -> None:
    pm = _provider_with("Neg", lambda info: lambda x: np.negative(x))
    nodes = [helper.make_node("Neg", ["x"], ["y"], name="neg")]
    data = make_model(nodes, [fvi("x", [1, 3])], [fvi("y", [1, 3])])
    sess = _session(data, pm)
    with pytest.raises(ortcore.RuntimeException, match="tuple or list"):
        sess.run(None, {"x": X[:1]})


def test_memory_error_in_kernel_is_allocation_error() -> None:
    def hungry(info: NodeInfo) -> Any:
        def compute(x: np.ndarray) -> Any:
            raise MemoryError("Unable to allocate 4.00 TiB")

        return compute

    pm = _provider_with("Neg", hungry)
    sess = _session(chain_model(["Neg"]), pm)
    with pytest.raises(ortcore.AllocationError) as info:
        sess.run(None, {"x": X})
    assert isinstance(info.value, MemoryError)
    assert "n0_Neg" in str(info.value) and "4.00 TiB" in str(info.value)


def test_kernel_builder_failure_is_invalid_graph_at_creation() -> None:
    def refuses(info: NodeInfo) -> Any:
        raise ValueError("unsupported attribute combination")

    pm = _provider_with("Neg", refuses)
    with pytest.raises(ortcore.InvalidGraph, match="unsupported attribute combination") as info:
        _session(chain_model(["Neg"]), pm)
    assert "Neg" in str(info.value) and "n0_Neg" in str(info.value)


def test_absurd_allocation_on_cpu_is_allocation_error(cpu: str) -> None:
    # In a child process, so that a machine that overcommits memory cannot take
    # the test run down with it.
    script = textwrap.dedent(
        """
        import numpy as np
        from onnx import TensorProto, helper
        import ortcore

        def model(op):
            if op == "ConstantOfShape":
                nodes = [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")]
                ins = [helper.make_tensor_value_info("s", TensorProto.INT64, [1])]
            else:
                nodes = [helper.make_node("Expand", ["x", "s"], ["y"], name="exp")]
                ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
                       helper.make_tensor_value_info("s", TensorProto.INT64, [1])]
            g = helper.make_graph(nodes, "g", ins,
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
            return m.SerializeToString()

        for op in ("ConstantOfShape", "Expand"):
            sess = ortcore.InferenceSession(model(op), providers=["CPUExecutionProvider"])
            feeds = {"s": np.array([2**40], np.int64)}
            if op == "Expand":
                feeds["x"] = np.ones(1, np.float32)
            try:
                sess.run(None, feeds)
            except ortcore.AllocationError as exc:
                assert isinstance(exc, MemoryError)
                print(op, "AllocationError", str(exc)[:200])
            else:
                print(op, "no error")
            feeds["s"] = np.array([3], np.int64)
            (y,) = sess.run(None, feeds)
            assert y.shape == (3,), y.shape
        print("SURVIVED")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ConstantOfShape AllocationError" in proc.stdout
    assert "Expand AllocationError" in proc.stdout
    assert "SURVIVED" in proc.stdout


# -- control flow through the subgraph API ---------------------------------------------


@pytest.mark.parametrize("providers", [["mini"], ["fake", "mini"]])
@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_read_outer_scope(cond: bool, providers: list[str]) -> None:
    sess = ortcore.InferenceSession(if_model(), no_fallback(), providers=providers)
    (y,) = sess.run(None, {"cond": np.array(cond), "x": X})
    want = (X + X) + X if cond else (-X) - X
    np.testing.assert_allclose(y, want)


def test_if_branches_reading_the_same_outer_value() -> None:
    sess = ortcore.InferenceSession(
        if_model(then_reads="a", else_reads="a"), no_fallback(), providers=["mini"]
    )
    np.testing.assert_allclose(sess.run(None, {"cond": np.array(True), "x": X})[0], 3 * X)
    np.testing.assert_allclose(sess.run(None, {"cond": np.array(False), "x": X})[0], X)


def test_if_node_receives_implicit_inputs() -> None:
    seen: list[tuple[str, ...]] = []

    base = MiniProvider().kernel_registry()
    if_def = base.lookup("If", "", 17)

    def spy(info: NodeInfo) -> Any:
        seen.append(info.implicit_inputs)
        outer = {n: set(g.outer_names) for n, g in info.attrs.items() if n.endswith("_branch")}
        seen.append((str(sorted(outer["then_branch"])), str(sorted(outer["else_branch"]))))
        return if_def.builder(info)  # type: ignore[union-attr]

    pm = _provider_with("If", spy, context=True)

    class Rest(MiniProvider):
        name = "RestExecutionProvider"
        aliases = ("rest",)

    pm.register_plugin(plugin_module("rest", Rest), name="rest")
    sess = ortcore.InferenceSession(if_model(), providers=["one", "rest"], plugin_manager=pm)
    assert sorted(seen[0]) == ["a", "b", "x"]
    assert seen[1] == (str(["a", "x"]), str(["b", "x"]))
    np.testing.assert_allclose(sess.run(None, {"cond": np.array(True), "x": X})[0], 3 * X)


def _nested_if_model() -> bytes:
    """cond ? (cond ? a + x : -x) : b - x, the inner If two scopes below a and x."""
    inner_then = helper.make_graph(
        [helper.make_node("Add", ["a", "x"], ["it"], name="inner_add")],
        "inner_then",
        [],
        [fvi("it", [2, 3])],
    )
    inner_else = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["ie"], name="inner_neg")],
        "inner_else",
        [],
        [fvi("ie", [2, 3])],
    )
    outer_then = helper.make_graph(
        [
            helper.make_node(
                "If",
                ["cond"],
                ["ot"],
                name="inner_if",
                then_branch=inner_then,
                else_branch=inner_else,
            )
        ],
        "outer_then",
        [],
        [fvi("ot", [2, 3])],
    )
    outer_else = helper.make_graph(
        [helper.make_node("Sub", ["b", "x"], ["oe"], name="outer_sub")],
        "outer_else",
        [],
        [fvi("oe", [2, 3])],
    )
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="make_a"),
        helper.make_node("Neg", ["x"], ["b"], name="make_b"),
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            name="outer_if",
            then_branch=outer_then,
            else_branch=outer_else,
        ),
    ]
    return make_model(
        nodes, [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )


@pytest.mark.parametrize("cond", [True, False])
def test_nested_if_reads_values_two_scopes_up(cond: bool) -> None:
    sess = ortcore.InferenceSession(_nested_if_model(), no_fallback(), providers=["mini"])
    (y,) = sess.run(None, {"cond": np.array(cond), "x": X})
    np.testing.assert_allclose(y, 3 * X if cond else -2 * X)


def test_if_from_many_threads() -> None:
    sess = ortcore.InferenceSession(if_model(), no_fallback(), providers=["fake", "mini"])

    def work(i: int) -> bool:
        x = np.full((2, 3), float(i), np.float32)
        cond = bool(i % 2)
        for _ in range(20):
            (y,) = sess.run(None, {"cond": np.array(cond), "x": x})
            if not np.allclose(y, 3 * x if cond else -2 * x):
                return False
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


def test_partition_lists_subgraph_nodes() -> None:
    sess = ortcore.InferenceSession(if_model(), no_fallback(), providers=["mini"])
    rec = {r.node: r for r in sess.get_partition().nodes}
    assert "then_add" in rec and "else_sub" in rec
    assert rec["then_add"].provider == "MiniExecutionProvider"
    assert "the_if" in rec["then_add"].graph


def test_if_branches_with_outer_and_own_initializers() -> None:
    w = numpy_helper.from_array(np.full((2, 3), 2.0, np.float32), "w")
    then_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["to"], name="then_neg")],
        "then_g",
        [],
        [fvi("to", [2, 3])],
    )
    inner_w = numpy_helper.from_array(np.full((2, 3), 5.0, np.float32), "v")
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["w", "v"], ["eo"], name="else_mul")],
        "else_g",
        [],
        [fvi("eo", [2, 3])],
        [inner_w],
    )
    nodes = [
        helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)
    ]
    data = make_model(
        nodes, [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])], [w]
    )
    for providers in (["mini"], ["fake", "mini"]):
        sess = ortcore.InferenceSession(data, no_fallback(), providers=providers)
        np.testing.assert_array_equal(sess.run(None, {"cond": np.array(True), "x": X})[0], -X)
        np.testing.assert_array_equal(
            sess.run(None, {"cond": np.array(False), "x": X})[0], np.full((2, 3), 10.0)
        )
