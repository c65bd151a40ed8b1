"""Model-local functions whose inlining would blow up: refused before anything
is copied, with an error naming the function and the limit.

The bombs load in a child process under a memory limit, so a regression (the
inliner allowed to build 2**40 nodes) fails a test instead of killing pytest.
The counts of :func:`ortcore.inlining.measure_expansion` are checked against
what onnx's inliner really builds, on small versions of every bomb.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.inliner
import onnx.reference
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.errors import InvalidArgument, InvalidGraph
from ortcore.inlining import (
    DEFAULT_MAX_INLINED_BYTES,
    DEFAULT_MAX_INLINED_NODES,
    MAX_CALL_DEPTH,
    MAX_INLINED_BYTES_CONFIG,
    MAX_INLINED_NODES_CONFIG,
    MAX_INLINED_NODES_ENV,
    bind_defaults,
    check_expansion,
    measure_expansion,
)

DOM = "local"
OPSETS = [helper.make_opsetid("", 18), helper.make_opsetid(DOM, 1)]
X = np.array([1.5, -2.0], np.float32)


def _vi(name: str, elem: int = TensorProto.FLOAT, shape: Sequence[int] | None = (2,)) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _fn(
    name: str,
    inputs: list[str],
    nodes: list[onnx.NodeProto],
    attributes: Sequence[str] = (),
    defaults: Sequence[onnx.AttributeProto] = (),
) -> onnx.FunctionProto:
    f = helper.make_function(DOM, name, inputs, ["y"], nodes, OPSETS, attributes=list(attributes))
    f.attribute_proto.extend(defaults)
    return f


def _call(fn: str, inputs: list[str], out: str, name: str = "", **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(fn, inputs, [out], domain=DOM, name=name or None, **attrs)


def _ref(name: str, refers_to: str, kind: int) -> onnx.AttributeProto:
    a = onnx.AttributeProto(name=name, ref_attr_name=refers_to, type=kind)
    return a


def _model(
    nodes: list[onnx.NodeProto],
    functions: list[onnx.FunctionProto],
    inputs: Sequence[onnx.ValueInfoProto] = (),
    outputs: Sequence[onnx.ValueInfoProto] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "main", list(inputs) or [_vi("x")], list(outputs) or [_vi("y")]
    )
    return helper.make_model(graph, opset_imports=OPSETS, functions=functions, ir_version=10)


def _fan_out(depth: int, fan: int, prefix: str = "f") -> list[onnx.FunctionProto]:
    """f{i} calls f{i+1} ``fan`` times in a row; f{depth} adds 1: f0(x) = x + fan**depth."""
    leaf = _fn(
        f"{prefix}{depth}",
        ["x"],
        [
            helper.make_node("Constant", [], ["one"], value_float=1.0),
            helper.make_node("Add", ["x", "one"], ["y"]),
        ],
    )
    functions = [leaf]
    for i in range(depth - 1, -1, -1):
        nodes, prev = [], "x"
        for k in range(fan):
            out = "y" if k == fan - 1 else f"t{k}"
            nodes.append(_call(f"{prefix}{i + 1}", [prev], out))
            prev = out
        functions.append(_fn(f"{prefix}{i}", ["x"], nodes))
    return functions  # callees first, as onnx.reference wants them


# -- where the call to f0 sits ----------------------------------------------------------


def _in_main(functions: list[onnx.FunctionProto]) -> onnx.ModelProto:
    return _model([_call("f0", ["x"], "y", "call_f0")], functions)


def _in_if(functions: list[onnx.FunctionProto]) -> onnx.ModelProto:
    then = helper.make_graph([_call("f0", ["x"], "t", "call_f0")], "then", [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e")])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
    return _model([node], functions, [_vi("c", TensorProto.BOOL, ()), _vi("x")])


def _in_loop(functions: list[onnx.FunctionProto]) -> onnx.ModelProto:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            _call("f0", ["x"], "out", "call_f0"),
        ],
        "body",
        [_vi("i", TensorProto.INT64, ()), _vi("cond", TensorProto.BOOL, ())],
        [_vi("cond_out", TensorProto.BOOL, ()), _vi("out")],
    )
    trips = numpy_helper.from_array(np.array(1, np.int64), "trips")
    nodes = [
        helper.make_node("Loop", ["trips", ""], ["scan"], name="loop", body=body),
        helper.make_node("Squeeze", ["scan", "axis0"], ["y"]),
    ]
    model = _model(nodes, functions)
    model.graph.initializer.extend(
        [trips, numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    )
    return model


def _in_function_subgraph(functions: list[onnx.FunctionProto]) -> onnx.ModelProto:
    """main calls g(c, x), whose If's then-branch calls f0."""
    then = helper.make_graph([_call("f0", ["x"], "t")], "then", [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e")])
    g = _fn(
        "g", ["c", "x"], [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    )
    return _model(
        [_call("g", ["c", "x"], "y", "call_g")],
        [*functions, g],
        [_vi("c", TensorProto.BOOL, ()), _vi("x")],
    )


PLACES: dict[str, Callable[[list[onnx.FunctionProto]], onnx.ModelProto]] = {
    "main": _in_main,
    "if": _in_if,
    "loop": _in_loop,
    "function_subgraph": _in_function_subgraph,
}


# -- bombs that grow through attributes ------------------------------------------------


def _graph_attribute_bomb(depth: int) -> onnx.ModelProto:
    """A chain of single calls; each passes on a graph attribute whose If uses
    the one it got twice (then and else), so it doubles at each level."""

    def uses_twice(out: str) -> onnx.NodeProto:
        node = helper.make_node("If", ["c"], [out])
        g = onnx.AttributeProto.GRAPH
        node.attribute.extend([_ref("then_branch", "g", g), _ref("else_branch", "g", g)])
        return node

    functions = [_fn(f"f{depth}", ["c", "x"], [uses_twice("y")], attributes=["g"])]
    for i in range(depth - 1, -1, -1):
        passed = helper.make_graph([uses_twice("o")], f"pass{i}", [], [_vi("o")])
        call = _call(f"f{i + 1}", ["c", "x"], "y", g=passed)
        functions.append(_fn(f"f{i}", ["c", "x"], [call], attributes=["g"]))
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "leaf", [], [_vi("o")])
    return _model(
        [_call("f0", ["c", "x"], "y", "call_f0", g=leaf)],
        functions,
        [_vi("c", TensorProto.BOOL, ()), _vi("x")],
    )


def _payload_bomb(depth: int, floats: int, *, passed: bool) -> onnx.ModelProto:
    """f{i} calls f{i+1} twice; the leaf makes a Constant of its tensor
    attribute ``w``: from the call in the main graph (``passed``, handed down
    by reference) or from the leaf's default. ``2**depth`` copies."""
    payload = numpy_helper.from_array(np.ones(floats, np.float32))
    const = helper.make_node("Constant", [], ["w"])
    const.attribute.append(_ref("value", "w", onnx.AttributeProto.TENSOR))
    body = [
        const,
        helper.make_node("ReduceSum", ["w"], ["s"]),
        helper.make_node("Add", ["x", "s"], ["y"]),
    ]
    default = [] if passed else [helper.make_attribute("w", payload)]
    functions = [
        _fn(f"f{depth}", ["x"], body, attributes=["w"] if passed else [], defaults=default)
    ]
    for i in range(depth - 1, -1, -1):
        nodes = []
        for src, out in [("x", "t"), ("t", "y")]:
            node = _call(f"f{i + 1}", [src], out)
            if passed:
                node.attribute.append(_ref("w", "w", onnx.AttributeProto.TENSOR))
            nodes.append(node)
        functions.append(_fn(f"f{i}", ["x"], nodes, attributes=["w"] if passed else []))
    top = _call("f0", ["x"], "y", "call_f0", **({"w": payload} if passed else {}))
    return _model([top], functions)


def _created_nodes(original: onnx.ModelProto, inlined: onnx.ModelProto) -> int:
    """Nodes of ``inlined`` that inlining made (the main graph's own non-call nodes removed)."""
    names = {f.name for f in original.functions}

    def count(graph: onnx.GraphProto, skip_calls: bool) -> int:
        total, stack = 0, [graph]
        while stack:
            for node in stack.pop().node:
                if skip_calls and node.domain == DOM and node.op_type in names:
                    continue
                total += 1
                for a in node.attribute:
                    stack.extend([a.g] if a.HasField("g") else [])
                    stack.extend(a.graphs)
        return total

    return count(inlined.graph, False) - count(original.graph, True)


# -- the counts are what the inliner builds ----------------------------------------------

SMALL = {
    **{f"fan2_depth6_{p}": (lambda p=p: PLACES[p](_fan_out(6, 2))) for p in PLACES},
    "fan3_depth4": lambda: _in_main(_fan_out(4, 3)),
    "graph_attribute": lambda: _graph_attribute_bomb(5),
    "passed_payload": lambda: _payload_bomb(3, 100, passed=True),
    "default_payload": lambda: _payload_bomb(3, 100, passed=False),
}


@pytest.mark.parametrize("case", sorted(SMALL))
def test_measured_expansion_is_what_the_inliner_builds(case: str) -> None:
    model = SMALL[case]()
    onnx.checker.check_model(model)
    found = measure_expansion(model)
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    bind_defaults(bound)  # as ortcore inlines (onnx's inliner drops defaults)
    inlined = onnx.inliner.inline_local_functions(bound)
    assert not inlined.functions
    assert found.nodes == _created_nodes(model, inlined)
    copied = sum(
        a.ByteSize()
        for n in inlined.graph.node
        for a in n.attribute
        if a.type == onnx.AttributeProto.TENSOR
    )
    # An attribute copied under its new name differs by a few bytes.
    assert abs(found.bytes - copied) <= 16 * max(1, found.nodes), (found, copied)
    assert found.depth >= 1


def test_fan_out_counts_grow_as_powers() -> None:
    for depth, fan in [(10, 2), (7, 3), (40, 2)]:
        found = measure_expansion(_in_main(_fan_out(depth, fan)))
        assert found.nodes == 2 * fan**depth  # each leaf: a Constant and an Add
        assert found.depth == depth + 1


def test_deep_counts_saturate_rather_than_grow_without_end() -> None:
    found = measure_expansion(_in_main(_fan_out(300, 2)))
    assert 2**62 <= found.nodes < 2**64


# -- bombs: refused in milliseconds, in a child process -----------------------------------


def _limit_crossing(depth: int, fan: int, limit: int) -> int:
    """Index of the deepest f{i} whose one call creates more than ``limit`` nodes."""
    return max(i for i in range(depth + 1) if 2 * fan ** (depth - i) > limit)


BOMBS: dict[str, Callable[[], onnx.ModelProto]] = {
    **{f"fan2_depth40_{p}": (lambda p=p: PLACES[p](_fan_out(40, 2))) for p in PLACES},
    **{f"fan3_depth30_{p}": (lambda p=p: PLACES[p](_fan_out(30, 3))) for p in PLACES},
    "graph_attribute_depth40": lambda: _graph_attribute_bomb(40),
    "passed_payload_1mb_x4096": lambda: _payload_bomb(12, 1 << 18, passed=True),
    "default_payload_1mb_x4096": lambda: _payload_bomb(12, 1 << 18, passed=False),
}

_CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, time
    limit = 4 << 30  # a bomb that gets through dies here, not in the machine
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import ortcore
    for path in sys.argv[1:]:
        print(json.dumps({"start": path}), flush=True)
        t0 = time.perf_counter()
        try:
            ortcore.InferenceSession(path, providers=["CPUExecutionProvider"])
            out = {"error": None, "message": ""}
        except Exception as exc:
            out = {"error": type(exc).__name__, "message": str(exc),
                   "invalid_graph": isinstance(exc, ortcore.errors.InvalidGraph)}
        out.update(path=path, seconds=time.perf_counter() - t0)
        print(json.dumps(out), flush=True)
    """
)


def _load_in_child(paths: list[Path]) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
    for var in ("ORTCORE_MAX_INLINED_NODES", "ORTCORE_MAX_INLINED_BYTES"):
        env.pop(var, None)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    results: dict[str, dict[str, Any]] = {}
    started = None
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        if "start" in record:
            started = record["start"]
        else:
            results[Path(record["path"]).stem] = record
            started = None
    if started is not None:
        results[Path(started).stem] = {
            "error": f"died (status {proc.returncode})",
            "message": proc.stderr[-2000:],
        }
    return results


@pytest.fixture(scope="module")
def bomb_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("bombs")
    paths = []
    for name, build in BOMBS.items():
        path = folder / f"{name}.onnx"
        path.write_bytes(build().SerializeToString())
        paths.append(path)
    return _load_in_child(paths)


@pytest.mark.parametrize("case", sorted(BOMBS))
def test_bomb_is_refused_fast_naming_the_function_and_limit(
    case: str, bomb_results: dict[str, dict[str, Any]], cpu: str
) -> None:
    result = bomb_results[case]
    assert result.get("invalid_graph"), result
    message = result["message"]
    assert result["seconds"] < 10, result
    assert "local:f0" in message or "local:g" in message, message
    if "payload" in case:
        assert MAX_INLINED_BYTES_CONFIG in message, message
        assert f"{DEFAULT_MAX_INLINED_BYTES:,}" in message, message
    else:
        assert MAX_INLINED_NODES_CONFIG in message, message
        assert f"{DEFAULT_MAX_INLINED_NODES:,}" in message, message
    if case.startswith(("fan2", "fan3")):
        depth, fan = (40, 2) if case.startswith("fan2") else (30, 3)
        crossing = _limit_crossing(depth, fan, DEFAULT_MAX_INLINED_NODES)
        assert f"local:f{crossing} alone expands" in message, message


# -- recursion and depth ---------------------------------------------------------------


def _self_recursive() -> onnx.ModelProto:
    f = _fn("f", ["x"], [_call("f", ["x"], "y")])
    return _model([_call("f", ["x"], "y")], [f])


def _mutual_through_a_subgraph() -> onnx.ModelProto:
    then = helper.make_graph([_call("b", ["x"], "t")], "then", [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e")])
    a = _fn("a", ["x"], [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)])
    a.input.insert(0, "c")
    b = _fn(
        "b",
        ["x"],
        [
            helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
            _call("a", ["c", "x"], "y"),
        ],
    )
    return _model([_call("b", ["x"], "y")], [a, b])


def _shadowing_recursive() -> onnx.ModelProto:
    """A function in the default domain named Relu whose body uses Relu: itself."""
    f = helper.make_function(
        "", "Relu", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], OPSETS
    )
    return _model([helper.make_node("Relu", ["x"], ["y"])], [f])


def _linear_chain(n: int) -> onnx.ModelProto:
    functions = [_fn(f"f{n}", ["x"], [helper.make_node("Relu", ["x"], ["y"])])]
    functions += [
        _fn(f"f{i}", ["x"], [_call(f"f{i + 1}", ["x"], "y")]) for i in range(n - 1, -1, -1)
    ]
    return _model([_call("f0", ["x"], "y", "call_f0")], functions)


RECURSIVE = {
    "self": (_self_recursive, "local:f"),
    "mutual_through_subgraph": (_mutual_through_a_subgraph, "local:a"),
    "shadowing_a_standard_op": (_shadowing_recursive, "Relu"),
}


@pytest.mark.parametrize("case", sorted(RECURSIVE))
def test_recursive_functions_are_refused_by_name(case: str) -> None:
    build, name = RECURSIVE[case]
    with pytest.raises(InvalidGraph, match="calls itself") as info:
        check_expansion(build())
    assert name in str(info.value)


def test_deep_chain_is_refused_without_recursion() -> None:
    """Linear in size but 5000 calls deep: counted iteratively, refused by depth."""
    model = _linear_chain(5000)
    found = measure_expansion(model)
    assert (found.nodes, found.depth) == (1, 5001)
    with pytest.raises(InvalidGraph, match=f"5,001 levels deep.*limit of {MAX_CALL_DEPTH}") as info:
        check_expansion(model)
    assert "'call_f0'" in str(info.value) and "local:f5000" in str(info.value)


def test_chain_at_the_depth_limit_loads_and_runs(cpu: str) -> None:
    model = _linear_chain(MAX_CALL_DEPTH - 1)
    assert measure_expansion(model).depth == MAX_CALL_DEPTH
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=[cpu])
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], np.maximum(X, 0))


def test_recursive_and_deep_models_fail_cleanly_in_a_session(tmp_path: Path) -> None:
    cases = {
        **{k: build for k, (build, _) in RECURSIVE.items()},
        "chain_5000": lambda: _linear_chain(5000),
    }
    paths = []
    for name, build in cases.items():
        paths.append(tmp_path / f"{name}.onnx")
        paths[-1].write_bytes(build().SerializeToString())
    results = _load_in_child(paths)
    for name in cases:
        assert results[name].get("invalid_graph"), (name, results[name])
        assert results[name]["seconds"] < 20, (name, results[name])


# -- the limit is a setting --------------------------------------------------------------


def _moderate() -> onnx.ModelProto:
    """2**11 leaf calls: 4096 nodes once inlined; f0(x) = x + 2048."""
    return _in_main(_fan_out(11, 2))


def _options(**entries: str) -> ortcore.SessionOptions:
    so = ortcore.SessionOptions()
    for key, value in entries.items():
        so.add_session_config_entry(key, value)
    return so


def test_config_entry_lowers_and_raises_the_node_limit(cpu: str) -> None:
    data = _moderate().SerializeToString()
    with pytest.raises(
        InvalidGraph,
        match=f"grow it by 4,072 nodes .its functions hold 24, their expansion 4,096., "
        f"more than the limit of 1,000.*{MAX_INLINED_NODES_CONFIG}",
    ):
        ortcore.InferenceSession(
            data, _options(**{MAX_INLINED_NODES_CONFIG: "1000"}), providers=[cpu]
        )
    sess = ortcore.InferenceSession(
        data, _options(**{MAX_INLINED_NODES_CONFIG: "4096"}), providers=[cpu]
    )
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], X + 2048)


def test_environment_variable_sets_the_limit_and_the_entry_wins(
    cpu: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _moderate().SerializeToString()
    monkeypatch.setenv(MAX_INLINED_NODES_ENV, "1e3")
    with pytest.raises(InvalidGraph, match=MAX_INLINED_NODES_ENV):
        ortcore.InferenceSession(data, providers=[cpu])
    sess = ortcore.InferenceSession(
        data, _options(**{MAX_INLINED_NODES_CONFIG: "1e4"}), providers=[cpu]
    )
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], X + 2048)


def test_byte_limit_is_a_setting_too(cpu: str) -> None:
    data = _payload_bomb(4, 1000, passed=True).SerializeToString()  # 16 copies of 4 kB
    with pytest.raises(
        InvalidGraph, match=f"more than the limit of 10,000.*{MAX_INLINED_BYTES_CONFIG}"
    ):
        ortcore.InferenceSession(
            data, _options(**{MAX_INLINED_BYTES_CONFIG: "10000"}), providers=[cpu]
        )
    sess = ortcore.InferenceSession(data, providers=[cpu])
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], X + 16 * 1000)


@pytest.mark.parametrize("value", ["lots", "0", "-5", "nan"])
@pytest.mark.parametrize("entry", [MAX_INLINED_NODES_CONFIG, MAX_INLINED_BYTES_CONFIG])
def test_bad_limit_values_are_invalid_arguments(entry: str, value: str, cpu: str) -> None:
    with pytest.raises(InvalidArgument, match=entry):
        ortcore.InferenceSession(
            _moderate().SerializeToString(), _options(**{entry: value}), providers=[cpu]
        )


# -- real models with functions still inline and run ------------------------------------------


def _ordinary(default: bool) -> onnx.ModelProto:
    """Functions with an attribute (given, or left to its ``default``), a
    nested call and a call inside an If: Block(x) = 0.5 tanh(3x) + x."""
    const = helper.make_node("Constant", [], ["a"])
    const.attribute.append(_ref("value_float", "alpha", onnx.AttributeProto.FLOAT))
    scale = _fn(
        "Scale",
        ["x"],
        [const, helper.make_node("Mul", ["x", "a"], ["y"])],
        attributes=[] if default else ["alpha"],
        defaults=[helper.make_attribute("alpha", 0.5)] if default else [],
    )
    block = _fn(
        "Block",
        ["x"],
        [
            _call("Scale", ["x"], "s", alpha=3.0),
            helper.make_node("Tanh", ["s"], ["t"]),
            _call("Scale", ["t"], "u", **({} if default else {"alpha": 0.5})),
            helper.make_node("Add", ["u", "x"], ["y"]),
        ],
    )
    then = helper.make_graph([_call("Block", ["b"], "t")], "then", [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Neg", ["b"], ["e"])], "else", [], [_vi("e")])
    nodes = [
        _call("Block", ["x"], "b", "block"),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    return _model(nodes, [scale, block], [_vi("c", TensorProto.BOOL, ()), _vi("x")])


def _block(x: np.ndarray) -> np.ndarray:
    return (0.5 * np.tanh(3 * x) + x).astype(np.float32)


@pytest.mark.parametrize("flag", [True, False])
def test_ordinary_functions_inline_and_match_the_reference(flag: bool, cpu: str) -> None:
    model = _ordinary(default=False)
    assert measure_expansion(model).nodes == 2 * 6  # two Blocks of six nodes
    feeds = {"c": np.array(flag), "x": np.array([0.25, -1.75], np.float32)}
    expected = onnx.reference.ReferenceEvaluator(model).run(None, feeds)[0]
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=[cpu])
    np.testing.assert_allclose(sess.run(None, feeds)[0], expected, rtol=1e-6)
    x = feeds["x"]
    np.testing.assert_allclose(expected, _block(_block(x)) if flag else -_block(x), rtol=1e-6)


@pytest.mark.parametrize("flag", [True, False])
def test_attribute_defaults_are_used_where_a_call_leaves_them_out(flag: bool, cpu: str) -> None:
    """onnx's inliner drops them (and onnx.reference fails on them); onnxruntime uses them."""
    model = _ordinary(default=True)
    feeds = {"c": np.array(flag), "x": np.array([0.25, -1.75], np.float32)}
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=[cpu])
    x = feeds["x"]
    np.testing.assert_allclose(
        sess.run(None, feeds)[0], _block(_block(x)) if flag else -_block(x), rtol=1e-6
    )


def test_overloads_and_domains_are_told_apart() -> None:
    """Two overloads of one name, and ``ai.onnx`` as the default domain, as onnx's inliner."""
    small = _fn("f", ["x"], [helper.make_node("Relu", ["x"], ["y"])])
    small.overload = "small"
    big = _fn(
        "f",
        ["x"],
        [helper.make_node("Relu", ["x"], [f"t{i}" if i < 9 else "y"]) for i in range(10)],
    )
    big.overload = "big"
    calls = []
    for i, overload in enumerate(["small", "small", "big"]):
        node = _call("f", ["x"], f"y{i}")
        node.overload = overload
        calls.append(node)
    calls.append(helper.make_node("Sum", ["y0", "y1", "y2"], ["y"]))
    model = _model(calls, [small, big])
    inlined = onnx.inliner.inline_local_functions(model)
    assert measure_expansion(model).nodes == 12 == _created_nodes(model, inlined)
    g = helper.make_function(
        "ai.onnx",
        "Twice",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        OPSETS,
    )
    model = _model([helper.make_node("Twice", ["x"], ["y"])], [g])
    assert measure_expansion(model).nodes == 2


def _wrapped(calls: int) -> onnx.ModelProto:
    """A function of 3,000 Relu nodes and a 2 MB Constant, called ``calls`` times in a row."""
    weight = numpy_helper.from_array(np.full([2, 250_000], 0.5, np.float32))
    nodes = [helper.make_node("Constant", [], ["w"], value=weight)]
    nodes.append(helper.make_node("ReduceMax", ["w"], ["m"], keepdims=0))
    nodes.append(helper.make_node("Mul", ["x", "m"], ["t0"]))
    nodes += [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(2999)]
    nodes.append(helper.make_node("Identity", ["t2999"], ["y"]))
    body = _fn("body", ["x"], nodes)
    main = [
        _call("body", ["x" if i == 0 else f"y{i}"], "y" if i == calls - 1 else f"y{i + 1}")
        for i in range(calls)
    ]
    return _model(main, [body])


def test_a_function_called_once_grows_nothing(cpu: str) -> None:
    """The limits bound growth: a model wrapped whole in a function loads under
    limits below its own size; called twice, the second copy counts."""
    so = _options(**{MAX_INLINED_NODES_CONFIG: "1000", MAX_INLINED_BYTES_CONFIG: "1e6"})
    once = _wrapped(1)
    found = measure_expansion(once)
    assert found.nodes == found.held_nodes == 3003 and found.added_nodes == 0
    assert found.bytes == found.held_bytes > 2_000_000 and found.added_bytes == 0
    sess = ortcore.InferenceSession(once.SerializeToString(), so, providers=[cpu])
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], np.maximum(X * 0.5, 0))
    with pytest.raises(InvalidGraph, match="grow it by 3,003 nodes"):
        ortcore.InferenceSession(_wrapped(2).SerializeToString(), so, providers=[cpu])
