"""Per-channel and per-axis parameters are checked against their dimensions
(:mod:`ortcore.param_table`): at load where shapes are known, at run time
where they are symbolic, on every provider, before the optimizer could hide
a mismatch by folding the node away.

Most cases are generated from the table (tests/param_cases.py): every entry's
valid examples run (and match onnx.reference), every check is broken by
generated models that must be refused, naming the node and the input. They
run in a child process: a regression that lets a mismatch reach a native
kernel fails these tests instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo
from ep_sdk.fused_ops import DOMAIN as FUSED_DOMAIN
from ep_sdk.fused_ops import register_fused_schemas
from ortcore import param_table
from ortcore.errors import InvalidArgument, InvalidGraph, RunInvalidArgument, RuntimeException
from ortcore.param_table import RULES, rules_for

from . import param_cases
from . import providers as test_providers
from .conftest import fvi, make_model, manager_with

CASES = list(param_cases.cases())

KNOWN_REFUSED = {
    ("", "GroupNormalization", 18): "onnx's checker refuses GroupNormalization-18 as deprecated",
}
"""Entries whose valid examples ortcore refuses for another reason (onnxruntime runs them)."""


def _child_results() -> dict[str, dict[str, Any]]:
    """Every generated case's outcome, computed in a child process."""
    path = str(Path(param_cases.__file__))
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('param_cases', {path!r})\n"
        "mod = importlib.util.module_from_spec(spec); sys.modules['param_cases'] = mod\n"
        "spec.loader.exec_module(mod); mod.main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ.copy(),
    )
    results: dict[str, dict[str, Any]] = {}
    last = None
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        if record.get("start"):
            last = record["id"]
            continue
        results[record["id"]] = record
        last = None
    if last is not None:  # the child died inside this case
        results[last] = {
            "id": last,
            "stage": "crashed",
            "msg": f"exit {proc.returncode}: {proc.stderr[-3000:]}",
        }
    return results


@pytest.fixture(scope="module")
def results(cpu: str) -> dict[str, dict[str, Any]]:
    return _child_results()


@pytest.fixture(scope="module")
def cpu() -> str:  # module scope: the child runs once
    if "CPUExecutionProvider" not in ortcore.get_available_providers():
        pytest.skip("ortcore-cpu is not installed")
    return "CPUExecutionProvider"


# -- the table itself ---------------------------------------------------------


@pytest.mark.parametrize("entry", RULES, ids=lambda e: f"{e.domain or 'ai.onnx'}.{e.op}-{e.since}")
def test_entry_matches_its_schema(entry: Any) -> None:
    """The op exists at each opset of the entry, and the entry's inputs are
    the schema's, in order (a rule never names an input the op lacks)."""
    if entry.domain == "com.microsoft":
        from ortcore_cpu.kernels import registry

        assert (entry.domain, entry.op) in set(registry.ops()), "the CPU provider runs it"
        return
    if entry.domain == FUSED_DOMAIN:
        register_fused_schemas()
    newest = {"": onnx.defs.onnx_opset_version(), "ai.onnx.ml": 5}.get(entry.domain, entry.since)
    last = entry.until or newest
    for opset in sorted({entry.since, last}):
        schema = onnx.defs.get_schema(entry.op, opset, entry.domain)
        assert schema.since_version <= opset
        names = [p.name for p in schema.inputs]
        assert list(entry.inputs) == names[: len(entry.inputs)], (opset, names)
    for check in entry.checks:
        if check.attribute:
            assert check.attribute in onnx.defs.get_schema(entry.op, last, entry.domain).attributes
        else:
            assert check.subject in entry.inputs


def test_ruled_ops_names_every_ruled_op() -> None:
    """The package's quick gate, kept as a literal so that importing it loads
    no table, names exactly the ops the table covers: a node of an op left
    out would never be checked."""
    assert frozenset(e.op for e in RULES) == param_table.RULED_OPS


def test_a_model_without_ruled_ops_loads_no_rules() -> None:
    """Session creation on a small model loads neither the table nor the rule
    language (issue 56's cold start); a ruled op loads them."""
    code = (
        "import sys, numpy as np, onnx, onnx.helper as h, ortcore\n"
        "g = h.make_graph([h.make_node('Relu', ['x'], ['y'])], 'g',\n"
        "    [h.make_tensor_value_info('x', 1, [2])], [h.make_tensor_value_info('y', 1, [2])])\n"
        "m = h.make_model(g, opset_imports=[h.make_opsetid('', 17)])\n"
        "s = ortcore.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])\n"
        "s.run(None, {'x': np.ones(2, np.float32)})\n"
        "print('ortcore.param_rules' in sys.modules, 'ortcore.param_table._table' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
    ruled = code.replace("'Relu', ['x']", "'Clip', ['x']")
    done = subprocess.run([sys.executable, "-c", ruled], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_entries_do_not_overlap() -> None:
    """One entry per op and opset: :func:`rules_for` never has to choose."""
    for entry in RULES:
        for other in RULES:
            if other is entry or (other.domain, other.op) != (entry.domain, entry.op):
                continue
            assert not entry.covers(other.since), (entry.op, entry.since, other.since)


def test_every_check_is_broken_by_a_generated_model() -> None:
    """The generator reaches every check (a new rule is tested once its entry
    has an example that lets a shape or attribute break it)."""
    broken = {(id(c.entry), c.entry.checks.index(c.check)) for c in CASES if c.check is not None}
    missing = [
        f"{e.domain or 'ai.onnx'}.{e.op}-{e.since} check {i} ({c.subject})"
        for e in RULES
        for i, c in enumerate(e.checks)
        if (id(e), i) not in broken
    ]
    assert not missing


# -- the generated cases --------------------------------------------------------


def _subject_named(case: param_cases.Case, msg: str) -> bool:
    return param_cases.NODE in msg and (case.check.attribute or case.subject) in msg  # type: ignore[union-attr]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_generated_case(case: param_cases.Case, results: dict[str, dict[str, Any]]) -> None:
    r = results.get(case.id)
    assert r is not None, "the child never reached this case"
    assert r["stage"] not in ("crashed", "error"), r["msg"]
    known = KNOWN_REFUSED.get((case.entry.domain, case.entry.op, case.entry.since))
    if known is not None:
        assert r["stage"] == "load" and "InvalidGraph" in r["classes"]
        pytest.skip(known)
    if case.expect == "run":
        assert r["stage"] == "ok", r.get("msg")
        assert r["matches"] is not False, "outputs differ from onnx.reference's"
    elif case.expect == "load":
        assert r["stage"] == "load", "not refused at load"
        assert "InvalidGraph" in r["classes"], r["msg"]
        assert _subject_named(case, r["msg"]), r["msg"]
    else:
        # Refused before any kernel computes: by the check wrapped around the
        # kernel; or at load where something else already knows (a kernel's
        # builder checking its window attributes, onnx's inference).
        if r["stage"] == "load":
            assert "InvalidGraph" in r["classes"] and param_cases.NODE in r["msg"], r["msg"]
        else:
            assert r["stage"] == "run", "it ran"
            assert "RunInvalidArgument" in r["classes"], r["msg"]
            assert _subject_named(case, r["msg"]), r["msg"]


def test_symbolic_cases_reach_the_run_time_check(results: dict[str, dict[str, Any]]) -> None:
    """The symbolic cases exercise the check around the kernel: every one
    whose subject is an input is refused at run time by it (a few with a
    window attribute are refused at load by the kernel's builder)."""
    runtime = [c for c in CASES if c.expect == "runtime"]
    at_load = [c for c in runtime if results.get(c.id, {}).get("stage") == "load"]
    inputs_at_load = [c.id for c in at_load if c.check is not None and not c.check.attribute]
    assert len(at_load) <= 0.25 * len(runtime), [c.id for c in at_load]
    assert len(inputs_at_load) <= 0.02 * len(runtime), inputs_at_load


# -- the case, and the paths around it -------------------------------------

_C = 4


def _bn_model(channels: Any, stats: int = 2, conv: bool = False) -> bytes:
    """BatchNormalization with ``stats`` values per statistic on an input of
    ``channels`` channels (an int, a dim name, or None: no shape); with
    ``conv``, after a Conv of 4 output channels (which folding would absorb)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 1.5, stats).astype(np.float32), name)
        for name in ("s", "b", "m", "v")
    ]
    nodes = []
    x_shape = None if channels is None else [1, channels, 3, 3]
    bn_in = "x"
    if conv:  # x has ``channels`` channels, the Conv makes 4
        inits.append(
            numpy_helper.from_array(rng.uniform(-1, 1, (_C, 3, 1, 1)).astype(np.float32), "w")
        )
        nodes.append(helper.make_node("Conv", ["x", "w"], ["c"], name="conv"))
        bn_in = "c"
    nodes.append(
        helper.make_node("BatchNormalization", [bn_in, "s", "b", "m", "v"], ["y"], name="bn")
    )
    return make_model(nodes, [fvi("x", x_shape)], [fvi("y", None)], inits, opset=15)


@pytest.mark.parametrize(
    ("channels", "conv"),
    [(_C, False), (3, True), ("C", True)],
    ids=["alone", "after_conv", "after_conv_dim_param"],
)
def test_batchnorm_short_statistics_refused_at_load(cpu: str, channels: Any, conv: bool) -> None:
    """Channels known at load (after a Conv, from its weights even where X's
    are symbolic): refused before the optimizer could fold the node."""
    with pytest.raises(InvalidGraph) as err:
        ortcore.InferenceSession(_bn_model(channels, conv=conv), providers=[cpu])
    msg = str(err.value)
    assert "BatchNormalization node 'bn'" in msg
    assert "input scale ('s') has 2 elements, X has 4 channels (dim 1)" in msg


@pytest.mark.parametrize(
    ("channels", "conv"), [("C", False), (None, False), (None, True)],
    ids=["dim_param", "no_shape", "after_conv_no_shape"],
)  # fmt: skip
def test_batchnorm_short_statistics_refused_at_run(cpu: str, channels: Any, conv: bool) -> None:
    """Channels unknown at load: the run refuses (after a Conv too, where
    folding would put the 2 values into a 4-channel Conv's weights)."""
    sess = ortcore.InferenceSession(_bn_model(channels, conv=conv), providers=[cpu])
    x = np.ones((1, 3 if conv else _C, 3, 3), np.float32)
    with pytest.raises(RunInvalidArgument) as err:
        sess.run(None, {"x": x})
    assert isinstance(err.value, InvalidArgument) and isinstance(err.value, RuntimeException)
    msg = str(err.value)
    assert msg.startswith(
        "Non-zero status code returned while running BatchNormalization node. Name:'bn'"
    )
    assert "input scale ('s') has 2 elements, X has 4 channels (dim 1)" in msg


@pytest.mark.parametrize("conv", [False, True], ids=["alone", "after_conv"])
def test_batchnorm_statistics_that_fit_run_and_fold(cpu: str, conv: bool) -> None:
    """The same models with 4 values per statistic run, and match the
    reference (the Conv + BatchNormalization pair folded)."""
    from onnx.reference import ReferenceEvaluator

    model = _bn_model(None, stats=_C, conv=conv)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3 if conv else _C, 3, 3)).astype(np.float32)
    sess = ortcore.InferenceSession(model, providers=[cpu])
    (got,) = sess.run(None, {"x": x})
    (want,) = ReferenceEvaluator(onnx.load_from_string(model)).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if conv:
        assert "BatchNormalization" not in {r.op_type for r in sess.get_partition().nodes}


def _plan_fns(sess: ortcore.InferenceSession) -> dict[str, Any]:
    plan = sess._plans.planned.plan  # type: ignore[attr-defined]
    return {step.info.name: step.fn for step in plan.steps}


def test_only_undecided_nodes_are_checked_at_run_time(cpu: str) -> None:
    """A node whose fit is decided at load runs its kernel bare; one with
    symbolic channels runs the check first."""
    static = ortcore.InferenceSession(_bn_model(_C, stats=_C), providers=[cpu])
    symbolic = ortcore.InferenceSession(_bn_model("C", stats=_C), providers=[cpu])
    assert getattr(_plan_fns(static)["bn"], "pending_checks", None) is None
    assert getattr(_plan_fns(symbolic)["bn"], "pending_checks", None) is not None


def test_overridable_statistic_fed_short_is_refused(cpu: str) -> None:
    """An initializer a feed may replace (listed as a graph input) is checked
    against what the run feeds."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 1.5, _C).astype(np.float32), n) for n in "sbmv"
    ]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")
    model = make_model(
        [node], [fvi("x", [1, _C, 2]), fvi("s", ["n"])], [fvi("y", None)], inits, opset=15
    )
    sess = ortcore.InferenceSession(model, providers=[cpu])
    x = np.ones((1, _C, 2), np.float32)
    sess.run(None, {"x": x})
    with pytest.raises(RunInvalidArgument, match="input scale \\('s'\\) has 2 elements"):
        sess.run(None, {"x": x, "s": np.ones(2, np.float32)})


def test_node_in_a_subgraph_is_checked_at_load(cpu: str) -> None:
    bn = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inner")
    then = helper.make_graph(
        [bn],
        "then",
        [],
        [fvi("y", None)],
        [numpy_helper.from_array(np.ones(2, np.float32), n) for n in ("s", "b")],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y2"])], "else", [], [fvi("y2", None)]
    )
    node = helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other, name="if")
    model = make_model(
        [node], [fvi("c", [], TensorProto.BOOL), fvi("x", [1, 3, 4])], [fvi("out", None)], opset=17
    )
    with pytest.raises(InvalidGraph, match="InstanceNormalization node 'inner': input scale"):
        ortcore.InferenceSession(model, providers=[cpu])


def test_kernel_at_run_time_names_the_node_not_the_kernel(cpu: str) -> None:
    """The check wraps the kernel; the kernel's own broadcasting never runs."""
    sess = ortcore.InferenceSession(_bn_model(None), providers=[cpu])
    with pytest.raises(RunInvalidArgument) as err:
        sess.run(None, {"x": np.ones((1, _C, 3, 3), np.float32)})
    assert "ValueError" not in str(err.value)


# -- other providers ---------------------------------------------------------------


def _broadcasting_bn(info: NodeInfo) -> Any:
    """A BatchNormalization kernel that broadcasts whatever it gets (the bug)."""

    def compute(x: Any, s: Any, b: Any, m: Any, v: Any) -> tuple[Any]:
        shape = (-1,) + (1,) * (x.ndim - 2)
        reps = -(-x.shape[1] // s.size)
        s, b, m, v = (np.tile(a, reps)[: x.shape[1]].reshape(shape) for a in (s, b, m, v))
        return ((x - m) / np.sqrt(v + 1e-5) * s + b,)

    return compute


class LaxProvider(ExecutionProvider):
    """A host provider whose one kernel broadcasts short statistics."""

    name = "LaxExecutionProvider"
    aliases = ("lax",)

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()
        reg.kernel("BatchNormalization", since=15)(_broadcasting_bn)
        return reg


def test_another_providers_kernel_is_checked_too() -> None:
    sess = ortcore.InferenceSession(
        _bn_model("C"), providers=["LaxExecutionProvider"], plugin_manager=manager_with(LaxProvider)
    )
    assert sess.get_providers() == ["LaxExecutionProvider"]
    with pytest.raises(RunInvalidArgument, match="provider LaxExecutionProvider"):
        sess.run(None, {"x": np.ones((1, _C, 3, 3), np.float32)})


def test_a_compiled_group_is_checked_on_its_inputs(cpu: str) -> None:
    """A provider that compiles the node into a group: its inputs are checked
    before the compiled function runs."""
    test_providers.ClaimingProvider.claims_for = lambda g: test_providers.group_claims(
        g, {"BatchNormalization"}
    )
    sess = ortcore.InferenceSession(_bn_model("C"), providers=["ClaimingExecutionProvider", cpu])
    assert test_providers.ClaimingProvider.compiled, "the group was compiled"
    with pytest.raises(RunInvalidArgument, match="BatchNormalization node 'bn': input scale"):
        sess.run(None, {"x": np.ones((1, _C, 3, 3), np.float32)})


def test_rules_for_picks_the_opset() -> None:
    assert rules_for("", "GroupNormalization", 18).since == 18  # type: ignore[union-attr]
    assert rules_for("", "GroupNormalization", 21).since == 21  # type: ignore[union-attr]
    assert rules_for("ai.onnx", "BatchNormalization", 15).since == 14  # type: ignore[union-attr]
    assert rules_for("", "Add", 17) is None


def test_attributes_of_the_wrong_type_leave_a_rule_undecided() -> None:
    """A rule computing with an attribute the node holds in another type (the
    checker refuses that at load for ops it knows) is left to the kernel,
    not a crash of the check."""
    import onnx_ir as ir

    from ortcore.param_checks import check_model

    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", group="two")
    inits = [
        numpy_helper.from_array(np.ones(s, np.float32), n)
        for n, s in (("w", (4, 2, 1, 1)), ("b", (3,)))
    ]
    graph = helper.make_graph([node], "g", [fvi("x", [1, 4, 2, 2])], [fvi("y", None)], inits)
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(InvalidGraph, match="input B \\('b', the bias\\) has 3 elements"):
        check_model(model)  # the bias rule does not read group; the others are undecided
