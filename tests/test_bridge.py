"""ep_sdk.BridgeExecutionProvider: engine answers, re-partition, declines, cache, the example."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import helper, numpy_helper

import ortcore
from ep_sdk import BridgeExecutionProvider, FusedGroup, GraphContext
from ep_sdk.bridge import candidate_names, export_candidate, forget_answers, structure_digest
from ortcore.cache import CompiledCache
from ortcore.plugins import PluginManager

from .conftest import fvi, make_model, plugin_module

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
X = np.array([[-1.5, 0.5, 2.0], [3.0, -0.25, -4.0]], np.float32)


class FakeEngine(BridgeExecutionProvider):
    """A foreign engine that knows a few ops and, like OpenVINO, also refuses
    whatever reads the output of an op it does not know."""

    name = "FakeEngineExecutionProvider"
    aliases = ("fake",)
    engine_name = "FakeEngine"
    known: ClassVar[set[str]] = {"Relu", "Neg", "Abs", "Add", "Mul", "Tanh"}
    version_of_engine = "1.0"
    queries: ClassVar[list[onnx.ModelProto]] = []
    builds = 0
    loads = 0

    def query_model(self, model: onnx.ModelProto) -> Mapping[str, bool | str]:
        type(self).queries.append(model)
        tainted: set[str] = set()
        answers: dict[str, bool | str] = {}
        for node in model.graph.node:
            if node.op_type not in self.known:
                answers[node.name] = f"FakeEngine has no {node.op_type}"
            elif tainted & set(node.input):
                answers[node.name] = "input type unknown"
            else:
                answers[node.name] = True
                continue
            tainted.update(node.output)
        return answers

    def engine_version(self) -> str:
        return type(self).version_of_engine

    def build(self, model: bytes, group: FusedGroup) -> Any:
        FakeEngine.builds += 1
        return onnx.reference.ReferenceEvaluator(onnx.load_from_string(model)), model

    def run(self, engine: Any, inputs: Sequence[Any]) -> Sequence[Any]:
        names = list(engine[0].input_names)
        return engine[0].run(None, dict(zip(names, inputs)))  # type: ignore[no-any-return]

    def serialize(self, engine: Any) -> bytes:
        return bytes(engine[1])

    def deserialize(self, data: bytes, group: FusedGroup) -> Any:
        FakeEngine.loads += 1
        return onnx.reference.ReferenceEvaluator(onnx.load_from_string(data)), data


class PerNode(FakeEngine):
    """Answers node by node only."""

    name = "PerNodeExecutionProvider"
    aliases = ("pernode",)

    def supports_node(self, node: Any, graph: GraphContext) -> bool | str:
        if node.op_type == "Neg":
            return "PerNode keeps away from Neg"
        if node.op_type == "Abs":
            return False
        if node.op_type == "Tanh":
            raise RuntimeError("engine crashed while looking at Tanh")
        return True

    query_model = BridgeExecutionProvider.query_model  # type: ignore[assignment]


class Unreadable(FakeEngine):
    name = "UnreadableExecutionProvider"
    aliases = ("unreadable",)

    def query_model(self, model: onnx.ModelProto) -> Mapping[str, bool | str]:
        raise ValueError("cannot parse this model")


class AtLeastThree(FakeEngine):
    name = "AtLeastThreeExecutionProvider"
    aliases = ("atleast3",)
    min_group_size = 3


@pytest.fixture(autouse=True)
def _reset() -> None:
    forget_answers()
    FakeEngine.queries.clear()
    FakeEngine.builds = FakeEngine.loads = 0
    FakeEngine.version_of_engine = "1.0"


def _manager(*classes: type) -> PluginManager:
    pm = PluginManager(autoload=False)
    pm.register_plugin(plugin_module("tests.bridge", *classes), name="tests.bridge")
    cpu = pytest.importorskip("ortcore_cpu.plugin")
    pm.register_plugin(cpu, name="ortcore_cpu")
    return pm


def chain(ops: Sequence[str]) -> bytes:
    """x -> op0 -> op1 -> ... -> y (Add and Mul read a constant c)."""
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        ins = [prev, "c"] if op in ("Add", "Mul") else [prev]
        nodes.append(helper.make_node(op, ins, [out], name=f"{op.lower()}{i}"))
        prev = out
    c = numpy_helper.from_array(np.array([0.5, -2.0, 1.5], np.float32), "c")
    return make_model(nodes, [fvi("x", ["n", 3])], [fvi("y", ["n", 3])], [c])


def numpy_chain(ops: Sequence[str], x: np.ndarray) -> np.ndarray:
    c = np.array([0.5, -2.0, 1.5], np.float32)
    for op in ops:
        x = {
            "Add": lambda v: v + c,
            "Mul": lambda v: v * c,
            "Relu": lambda v: np.maximum(v, 0),
            "Neg": np.negative,
            "Abs": np.abs,
            "Sin": np.sin,
            "Tanh": np.tanh,
        }[op](x)
    return x


def _session(model: bytes, cls: type, cache: Path | None = None, **options: str) -> Any:
    so = ortcore.SessionOptions()
    if cache is not None:
        so.add_session_config_entry("ortcore.cache_dir", str(cache))
    return ortcore.InferenceSession(
        model, so, providers=[(cls.aliases[0], options), "cpu"], plugin_manager=_manager(cls)
    )


def _where(sess: Any) -> dict[str, tuple[str, str]]:
    """node -> (provider, group or the bridge's reason for declining it)."""
    return {
        r.node: (r.provider, r.group or next(iter(r.declined.values()), ""))
        for r in sess.get_partition().nodes
    }


def test_refused_nodes_are_split_off_and_the_rest_asked_again() -> None:
    ops = ["Mul", "Relu", "Sin", "Neg", "Add", "Abs"]
    sess = _session(chain(ops), FakeEngine)
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], numpy_chain(ops, X), rtol=1e-6)
    where = _where(sess)
    assert where["sin2"] == ("CPUExecutionProvider", "FakeEngine has no Sin")
    first, second = where["mul0"][1], where["neg3"][1]
    assert where["relu1"][1] == first and first != second
    assert where["add4"][1] == second == where["abs5"][1]
    # one question about the whole chain, then one about each half
    assert len(FakeEngine.queries) == 3
    assert FakeEngine.builds == 2


def test_the_engine_is_asked_about_a_model_with_the_constants() -> None:
    _session(chain(["Mul", "Relu"]), FakeEngine)
    (model,) = FakeEngine.queries
    assert [t.name for t in model.graph.initializer] == ["c"]
    assert [i.name for i in model.graph.input] == ["x"]


def test_per_node_answers_and_their_reasons(caplog: pytest.LogCaptureFixture) -> None:
    ops = ["Relu", "Neg", "Abs", "Tanh", "Relu"]
    sess = _session(chain(ops), PerNode)
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], numpy_chain(ops, X), rtol=1e-6)
    where = _where(sess)
    assert where["neg1"] == ("CPUExecutionProvider", "PerNode keeps away from Neg")
    assert where["abs2"] == ("CPUExecutionProvider", "FakeEngine does not support Abs")
    assert where["tanh3"][0] == "CPUExecutionProvider"
    assert "supports_node raised RuntimeError('engine crashed" in where["tanh3"][1]
    assert "PerNodeExecutionProvider: supports_node raised RuntimeError: engine crashed" in (
        caplog.text
    )
    assert "Traceback" not in caplog.text  # at debug level only
    assert where["relu0"][0] == where["relu4"][0] == "PerNodeExecutionProvider"
    assert not FakeEngine.queries


def test_an_engine_that_cannot_read_a_group_declines_it_never_fails() -> None:
    sess = _session(chain(["Relu", "Neg"]), Unreadable)
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], numpy_chain(["Relu", "Neg"], X))
    for provider, reason in _where(sess).values():
        assert provider == "CPUExecutionProvider"
        assert reason == "FakeEngine failed to read the group: cannot parse this model"


def test_min_group_size_declines_small_groups() -> None:
    ops = ["Relu", "Sin", "Neg", "Abs", "Tanh"]
    sess = _session(chain(ops), FakeEngine, min_group_size="3")
    where = _where(sess)
    assert where["relu0"] == (
        "CPUExecutionProvider",
        "FakeEngine: a group of 1 node(s), fewer than min_group_size=3",
    )
    assert where["neg2"][0] == where["tanh4"][0] == "FakeEngineExecutionProvider"
    by_class = _where(_session(chain(ops), AtLeastThree))
    assert by_class["relu0"][1].endswith("fewer than min_group_size=3")
    assert by_class["neg2"][0] == "AtLeastThreeExecutionProvider"
    assert _where(_session(chain(ops), AtLeastThree, min_group_size="4"))["neg2"][0] == (
        "CPUExecutionProvider"
    )
    for bad in ("0", "two"):
        with pytest.raises(ortcore.InvalidArgument, match="min_group_size must be a whole"):
            _session(chain(ops), FakeEngine, min_group_size=bad)


def test_built_engines_go_through_the_cache_keyed_by_the_engine(tmp_path: Path) -> None:
    model = chain(["Mul", "Relu", "Add"])
    for _ in range(2):
        sess = _session(model, FakeEngine, tmp_path)
        np.testing.assert_allclose(
            sess.run(None, {"x": X})[0], numpy_chain(["Mul", "Relu", "Add"], X)
        )
    assert (FakeEngine.builds, FakeEngine.loads) == (1, 1)
    FakeEngine.version_of_engine = "2.0"
    _session(model, FakeEngine, tmp_path)
    assert (FakeEngine.builds, FakeEngine.loads) == (2, 1)
    parts = sorted(
        (e["provider_parts"]["engine_version"], e["provider_parts"]["engine_target"])
        for e in CompiledCache(tmp_path).entries()
    )
    assert parts == [("1.0", "cpu:0"), ("2.0", "cpu:0")]


def test_query_answers_are_kept_in_the_process_and_the_cache_folder(tmp_path: Path) -> None:
    """A session made again asks the engine nothing: the answers are kept in
    the process and, with a cache folder, on disk for the next process."""
    model = chain(["Mul", "Relu", "Sin", "Add"])
    first = _where(_session(model, FakeEngine, tmp_path))
    asked = len(FakeEngine.queries)
    assert asked >= 1
    assert _where(_session(model, FakeEngine, tmp_path)) == first
    assert len(FakeEngine.queries) == asked  # kept in the process
    forget_answers()  # as in a new process
    assert _where(_session(model, FakeEngine, tmp_path)) == first
    assert len(FakeEngine.queries) == asked  # read from the cache folder
    assert list((tmp_path / FakeEngine.name).glob("query-*.json"))
    forget_answers()
    _session(model, FakeEngine, tmp_path / "elsewhere")
    assert len(FakeEngine.queries) == 2 * asked  # a cold folder asks again


def test_kept_answers_are_neither_entries_nor_foreign_files_and_purge_removes_them(
    tmp_path: Path,
) -> None:
    from ortcore.cache import CompiledCache

    _session(chain(["Mul", "Relu", "Sin", "Add"]), FakeEngine, tmp_path)
    folder = tmp_path / FakeEngine.name
    kept = list(folder.glob("query-*.json"))
    assert kept
    foreign = folder / "notes.txt"
    foreign.write_text("mine")
    listing = CompiledCache(tmp_path).scan()
    assert [n.path for n in listing.skipped] == [str(foreign)]  # only the foreign file
    assert all(not str(e["path"]).startswith(str(folder / "query-")) for e in listing.entries)
    report = CompiledCache(tmp_path).purge(FakeEngine.name)
    assert not any(f.exists() for f in kept) and foreign.exists()
    assert {str(f) for f in kept} <= set(report.removed)


def test_query_answers_depend_on_structure_and_engine_not_weights(tmp_path: Path) -> None:
    model = chain(["Mul", "Relu", "Add"])
    _session(model, FakeEngine, tmp_path)
    asked = len(FakeEngine.queries)
    other_weights = onnx.load_from_string(model)
    other_weights.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.array([9.0, 8.0, 7.0], np.float32), "c")
    )
    _session(other_weights.SerializeToString(), FakeEngine, tmp_path)
    assert len(FakeEngine.queries) == asked
    _session(chain(["Mul", "Relu", "Mul"]), FakeEngine, tmp_path)
    assert len(FakeEngine.queries) == 2 * asked  # another structure
    FakeEngine.version_of_engine = "2.0"
    _session(model, FakeEngine, tmp_path)
    assert len(FakeEngine.queries) == 3 * asked  # another engine version
    _session(model, FakeEngine, tmp_path, min_group_size="2")
    assert len(FakeEngine.queries) == 4 * asked  # other options


def test_a_corrupt_kept_answer_is_asked_again(tmp_path: Path) -> None:
    model = chain(["Mul", "Relu", "Add"])
    _session(model, FakeEngine, tmp_path)
    asked = len(FakeEngine.queries)
    for file in (tmp_path / FakeEngine.name).glob("query-*.json"):
        file.write_text('{"key": "x", "answers": [1, 2]}', encoding="utf-8")
    forget_answers()
    sess = _session(model, FakeEngine, tmp_path)
    assert len(FakeEngine.queries) == 2 * asked
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], numpy_chain(["Mul", "Relu", "Add"], X))


def test_export_names_every_node_once() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"], name="dup"),
        helper.make_node("Abs", ["b"], ["y"], name="dup"),
    ]
    proto = onnx.load_from_string(make_model(nodes, [fvi("x", [3])], [fvi("y", [3])]))
    graph = ir.from_proto(proto).graph
    exported, by_name = export_candidate(graph, list(graph), {"": 17})
    names = [n.name for n in exported.graph.node]
    assert len(set(names)) == 3 and all(names)
    assert [by_name[n].op_type for n in names] == ["Relu", "Neg", "Abs"]
    onnx.checker.check_model(exported)


def test_string_tensor_attributes_are_part_of_the_structure() -> None:
    """A node with a string tensor attribute (LabelEncoder's keys) is asked
    about, never failing ``get_capability``; other strings, another question."""

    def encoder(keys: list[bytes]) -> tuple[ir.Graph, list[ir.Node]]:
        node = helper.make_node(
            "LabelEncoder",
            ["x"],
            ["y"],
            domain="ai.onnx.ml",
            keys_tensor=helper.make_tensor("k", onnx.TensorProto.STRING, [2], keys),
            values_tensor=helper.make_tensor("v", onnx.TensorProto.INT64, [2], [1, 2]),
        )
        s = onnx.TensorProto.STRING
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", s, [2])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [2])],
        )
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 4)])
        ir_graph = ir.from_proto(proto).graph
        return ir_graph, list(ir_graph)

    digests = []
    for keys in ([b"a", b"bc"], [b"ab", b"c"]):
        graph, nodes = encoder(keys)
        ordered, by_name = candidate_names(graph, nodes)
        digests.append(structure_digest(graph, ordered, by_name, {"ai.onnx.ml": 4}))
    assert digests[0] != digests[1]


@pytest.fixture
def examples() -> Iterator[None]:
    """docs/examples importable, as when running the scripts from that folder."""
    from ortcore.plugins import default_manager

    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))
    default_manager().unregister_plugin("bridge_provider_example")
    for module in ("bridge_provider", "bridge_run", "custom_op"):
        sys.modules.pop(module, None)


def test_the_bridge_example_runs(cpu: str, examples: None) -> None:
    pytest.importorskip("onnxruntime")
    counts = importlib.import_module("bridge_run").main()
    assert counts == {"OrtBridgeExecutionProvider": 4, cpu: 1}
    lines = (EXAMPLES / "bridge_provider.py").read_text().splitlines()
    assert len(lines) < 80  # a stranger's bridge, imports and plugin hook included


def test_a_node_whose_subgraphs_read_outer_values_is_declined() -> None:
    def branch(op: str) -> onnx.GraphProto:
        node = helper.make_node(op, ["x"], [f"{op}_out"])  # x: from the enclosing graph
        return helper.make_graph([node], op, [], [fvi(f"{op}_out", ["n", 3])])

    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("ReduceMax", ["r"], ["m"], name="max", keepdims=0),
        helper.make_node("Cast", ["m"], ["cond"], name="cast", to=onnx.TensorProto.BOOL),
        helper.make_node(
            "If", ["cond"], ["y"], name="if", then_branch=branch("Neg"), else_branch=branch("Abs")
        ),
    ]
    model = make_model(nodes, [fvi("x", ["n", 3])], [fvi("y", ["n", 3])])
    sess = _session(model, PerNode)
    assert _where(sess)["if"] == (
        "CPUExecutionProvider",
        "FakeEngine: its subgraphs read values of the enclosing graph, which a bridged "
        "group does not export yet",
    )
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], -X)
