"""Fused groups carry their constants; the compiled-artifact cache keys by them.

A provider that bakes weights into what it compiles must never get another
model's artifact back: the cache key covers every constant's bytes, the
provider's own key parts and ortcore's version; a cache entry that cannot be
loaded costs a compile, never the session.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
import ortcore.cache.keys
from ep_sdk import Capability, Claim, ExecutionProvider, FusedGroup
from ep_sdk.graph import group_model
from ortcore.cache import CompiledCache, content_digest

from .conftest import fvi, make_model, manager_with

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def affine_model(w: list[float], b: list[float], *, b_is_input: bool = False) -> bytes:
    """y = x * w + b, with w and b initializers (b also a graph input if asked)."""
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["t"], name="mul"),
        helper.make_node("Add", ["t", "b"], ["y"], name="add"),
    ]
    inits = [
        numpy_helper.from_array(np.array(w, np.float32), "w"),
        numpy_helper.from_array(np.array(b, np.float32), "b"),
    ]
    inputs = [fvi("x", [2, 3])] + ([fvi("b", [3])] if b_is_input else [])
    return make_model(nodes, inputs, [fvi("y", [2, 3])], inits)


class BakingProvider(ExecutionProvider):
    """Takes the whole graph as one group and bakes every constant it reads
    into what it compiles; caches the baked constants."""

    name = "BakingExecutionProvider"
    aliases = ("baking",)
    version = "1.0"
    builds = 0
    loads = 0
    groups: ClassVar[list[FusedGroup]] = []
    engine_version = "e1"
    fail_load = False
    fail_serialize = False

    def get_capability(self, graph: Any) -> Capability:
        return Capability(claims=[Claim.group(list(graph.nodes))])

    def compile(self, group: FusedGroup) -> Any:
        BakingProvider.builds += 1
        BakingProvider.groups.append(group)
        if getattr(self, "compile_receives_constants", True) or not hasattr(group, "constants"):
            # constants among the inputs (as before FusedGroup.constants existed);
            # b stays an input there, fed on every run
            values = [v for v in group.inputs if v.const_value is not None and v.name != "b"]
        else:
            values = list(group.constants)
        return self._program({v.name: v.const_value.numpy() for v in values})

    def serialize_compiled(self, group: FusedGroup, compiled: Any) -> bytes:
        if type(self).fail_serialize:
            raise RuntimeError("engine cannot serialize")
        buf = io.BytesIO()
        np.savez(buf, **compiled.baked)
        return buf.getvalue()

    def load_compiled(self, group: FusedGroup, data: bytes) -> Any:
        BakingProvider.loads += 1
        if type(self).fail_load:
            raise RuntimeError("engine refuses this artifact")
        with np.load(io.BytesIO(data)) as z:
            return self._program({k: z[k] for k in z.files})

    def compile_cache_key_parts(self, group: FusedGroup) -> dict[str, str]:
        return {"engine_version": type(self).engine_version}

    @staticmethod
    def _program(baked: dict[str, np.ndarray]) -> Any:
        def run(x: np.ndarray, *rest: np.ndarray) -> list[np.ndarray]:
            b = baked["b"] if "b" in baked else rest[-1]  # fed when it is an input
            return [x * baked["w"] + b]

        run.baked = baked  # type: ignore[attr-defined]
        return run


class ConstantsAsInputs(BakingProvider):
    compile_receives_constants = True


class WithPayload(BakingProvider):
    """Hands what it found in get_capability to compile."""

    def get_capability(self, graph: Any) -> Capability:
        nodes = list(graph.nodes)
        return Capability(claims=[Claim.group(nodes, payload={"analysed": len(nodes)})])


@pytest.fixture(autouse=True)
def _reset() -> None:
    BakingProvider.builds = BakingProvider.loads = 0
    BakingProvider.groups.clear()
    BakingProvider.engine_version = "e1"
    BakingProvider.fail_load = BakingProvider.fail_serialize = False


def _session(model: bytes, cache: Path | None, cls: type = BakingProvider) -> Any:
    so = ortcore.SessionOptions()
    if cache is not None:
        so.add_session_config_entry("ortcore.cache_dir", str(cache))
    return ortcore.InferenceSession(
        model, so, providers=[cls.aliases[0]], plugin_manager=manager_with(cls)
    )


def _y(sess: Any, **feeds: np.ndarray) -> np.ndarray:
    return np.asarray(sess.run(None, {"x": X, **feeds})[0])


def test_same_structure_other_weights_get_their_own_answers(tmp_path: Path) -> None:
    one = affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    two = affine_model([-1.0, 0.5, 2.0], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(_y(_session(one, tmp_path)), X * [1, 2, 3])
    np.testing.assert_array_equal(_y(_session(two, tmp_path)), X * [-1, 0.5, 2] + 1)
    assert (BakingProvider.builds, BakingProvider.loads) == (2, 0)
    assert len(CompiledCache(tmp_path).entries()) == 2
    np.testing.assert_array_equal(_y(_session(one, tmp_path)), X * [1, 2, 3])
    assert (BakingProvider.builds, BakingProvider.loads) == (2, 1)


def test_group_model_carries_the_constants_and_the_function_gets_the_rest() -> None:
    _y(_session(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), None))
    (group,) = BakingProvider.groups
    assert [v.name for v in group.inputs] == ["x"]
    assert [v.name for v in group.constants] == ["w", "b"]
    model = group.model
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["x"]
    assert {t.name for t in model.graph.initializer} == {"w", "b"}
    (y,) = onnx.reference.ReferenceEvaluator(model).run(None, {"x": X})  # test oracle
    np.testing.assert_array_equal(y, X * [1, 2, 3] + [4, 5, 6])
    assert group.payload is None


def test_a_claims_payload_reaches_compile() -> None:
    _y(_session(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), None, WithPayload))
    (group,) = BakingProvider.groups
    assert group.payload == {"analysed": 2}


def test_a_provider_may_ask_for_constants_as_inputs() -> None:
    sess = _session(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), None, ConstantsAsInputs)
    np.testing.assert_array_equal(_y(sess), X * [1, 2, 3] + [4, 5, 6])
    (group,) = BakingProvider.groups
    assert [v.name for v in group.inputs] == ["x", "w", "b"]
    assert [v.name for v in group.constants] == ["w", "b"]
    assert not group.model.graph.initializer
    assert [i.name for i in group.model.graph.input] == ["x", "w", "b"]


def test_an_overridable_initializer_stays_an_input(tmp_path: Path) -> None:
    sess = _session(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], b_is_input=True), tmp_path)
    (group,) = BakingProvider.groups
    assert [v.name for v in group.inputs] == ["x", "b"]
    assert [v.name for v in group.constants] == ["w"]
    np.testing.assert_array_equal(_y(sess), X * [1, 2, 3] + [4, 5, 6])
    b = np.array([-1.0, -1.0, -1.0], np.float32)
    np.testing.assert_array_equal(_y(sess, b=b), X * [1, 2, 3] - 1)


def test_an_entry_that_fails_to_load_is_compiled_again_and_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    _session(model, tmp_path)
    BakingProvider.fail_load = True
    with caplog.at_level(logging.WARNING, logger="ortcore.cache"):
        sess = _session(model, tmp_path)
    np.testing.assert_array_equal(_y(sess), X * [1, 2, 3])
    assert (BakingProvider.builds, BakingProvider.loads) == (2, 1)
    assert "could not load its cached compiled group" in caplog.text
    assert "engine refuses this artifact" in caplog.text
    BakingProvider.fail_load = False
    _session(model, tmp_path)
    assert (BakingProvider.builds, BakingProvider.loads) == (2, 2)
    assert len(CompiledCache(tmp_path).entries()) == 1


def test_a_failure_to_serialize_is_logged_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    BakingProvider.fail_serialize = True
    with caplog.at_level(logging.WARNING, logger="ortcore.cache"):
        sess = _session(affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]), tmp_path)
    np.testing.assert_array_equal(_y(sess), X * [1, 2, 3])
    assert "was not cached" in caplog.text and "engine cannot serialize" in caplog.text
    assert CompiledCache(tmp_path).entries() == []


def test_the_key_covers_engine_parts_and_ortcore_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    _session(model, tmp_path)
    BakingProvider.engine_version = "e2"
    _session(model, tmp_path)
    monkeypatch.setattr(ortcore._version, "__version__", "99.0")
    _session(model, tmp_path)
    assert (BakingProvider.builds, BakingProvider.loads) == (3, 0)
    entries = CompiledCache(tmp_path).entries()
    assert sorted(e["provider_parts"]["engine_version"] for e in entries) == ["e1", "e2", "e2"]
    assert sorted(e["ortcore"] for e in entries)[-1] == "99.0"
    _session(model, tmp_path)
    assert BakingProvider.loads == 1


def _external_constant(path: Path, data: np.ndarray) -> ir.Value:
    path.write_bytes(data.tobytes())
    tensor = ir.ExternalTensor(
        path.name, 0, data.nbytes, ir.DataType.FLOAT, shape=ir.Shape(data.shape),
        name="w", base_dir=path.parent,
    )  # fmt: skip
    return ir.Value(name="w", const_value=tensor)


def test_constants_are_hashed_from_their_values_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    in_memory = ir.Value(name="w", const_value=ir.Tensor(data))
    external = _external_constant(tmp_path / "w.bin", data)
    x = ir.Value(name="x", shape=ir.Shape([3, 4]), type=ir.TensorType(ir.DataType.FLOAT))
    node = ir.Node("", "Mul", [x, in_memory], name="mul")
    node.outputs[0].name = "y"

    def group(w: ir.Value) -> FusedGroup:
        model = group_model("g", [node], [x], node.outputs, {"": 17}, [in_memory])
        return FusedGroup("g", (node,), (x,), tuple(node.outputs), model, {"": 17}, (w,))

    # memory-mapped data is read through numpy slices, never as one bytes object
    monkeypatch.setattr(ir.ExternalTensor, "tobytes", lambda self: pytest.fail("tobytes"))
    assert content_digest(group(external)) == content_digest(group(in_memory))
    other = _external_constant(tmp_path / "w2.bin", data + 1)
    assert content_digest(group(other)) != content_digest(group(in_memory))


def test_the_fusing_example_bakes_the_constants_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("fused_provider", None)
    import fused_provider

    c = numpy_helper.from_array(np.array([2.0, -1.0, 0.5], np.float32), "c")
    nodes = [
        helper.make_node("Mul", ["x", "c"], ["a"], name="mul"),
        helper.make_node("Add", ["a", "x"], ["b"], name="add"),
        helper.make_node("Relu", ["b"], ["y"], name="relu"),
    ]
    model = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3], TensorProto.FLOAT)], [c])
    sess = ortcore.InferenceSession(
        model,
        providers=["fusing"],
        plugin_manager=manager_with(fused_provider.FusingExecutionProvider),
    )
    np.testing.assert_allclose(_y(sess), np.maximum(X * [2, -1, 0.5] + X, 0))
    assert sess.get_partition().counts() == {"FusingExecutionProvider": 3}
    sys.modules.pop("fused_provider", None)


class Mapped(BakingProvider):
    """Asks for its cached entries as a memory map; records what it got."""

    load_compiled_mapped = True
    got: ClassVar[list[Any]] = []

    def load_compiled(self, group: FusedGroup, data: bytes) -> Any:
        Mapped.got.append(data)
        return super().load_compiled(group, data)


def test_a_cache_hit_never_exports_the_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ortcore.planner

    exports: list[str] = []

    def counting(name: str, *args: Any) -> Any:
        exports.append(name)
        return group_model(name, *args)

    monkeypatch.setattr(ortcore.planner, "group_model", counting)
    model = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    _session(model, tmp_path)
    assert len(exports) == 0  # BakingProvider compiles from group.constants, not the model
    np.testing.assert_array_equal(_y(_session(model, tmp_path)), X * [1, 2, 3] + [4, 5, 6])
    assert (BakingProvider.builds, BakingProvider.loads) == (1, 1)
    group = BakingProvider.groups[0]
    assert group.exported_lazily
    assert [i.name for i in group.model.graph.input] == ["x"]  # exported when read
    assert exports == [group.name]
    group.model  # noqa: B018 (once)
    assert len(exports) == 1


def test_the_group_key_follows_structure_attributes_and_weights() -> None:
    def key_of(model: bytes) -> str:
        BakingProvider.groups.clear()
        _session(model, None)
        (group,) = BakingProvider.groups
        return content_digest(group)

    base = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert key_of(base) == key_of(base)
    assert key_of(base) != key_of(affine_model([1.0, 2.0, 3.5], [4.0, 5.0, 6.0]))
    renamed = onnx.load_from_string(base)
    renamed.graph.node[1].name = "plus"
    assert key_of(base) != key_of(renamed.SerializeToString())
    swapped = onnx.load_from_string(base)
    swapped.graph.node[1].op_type = "Sub"
    assert key_of(base) != key_of(swapped.SerializeToString())
    overridable = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], b_is_input=True)
    assert key_of(base) != key_of(overridable)


def test_the_constants_hash_does_not_depend_on_the_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ortcore.cache

    monkeypatch.setattr(ortcore.cache.keys, "_HASH_SLICE", 4)  # three slices per constant
    _session(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), None)
    (group,) = BakingProvider.groups
    digests = set()
    for threads in (1, 2, 8):
        monkeypatch.setattr(ortcore.cache.keys, "_hash_threads", lambda t=threads: t)
        digests.add(content_digest(group))
    assert len(digests) == 1
    monkeypatch.setattr(ortcore.cache.keys, "_HASH_SLICE", 8)  # other slices: another digest
    assert content_digest(group) not in digests


def test_a_provider_may_load_its_entries_memory_mapped(tmp_path: Path) -> None:
    Mapped.got.clear()
    model = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    _session(model, tmp_path, Mapped)
    (entry,) = (tmp_path / Mapped.name).glob("*.bin")
    stored = entry.read_bytes()
    sess = _session(model, tmp_path, Mapped)
    np.testing.assert_array_equal(_y(sess), X * [1, 2, 3] + [4, 5, 6])
    (view,) = Mapped.got
    assert isinstance(view, memoryview) and not view.readonly and bytes(view) == stored
    view[:4] = b"XXXX"  # a private map: the entry on disk is untouched
    assert entry.read_bytes() == stored
    _session(model, tmp_path)  # a provider that did not ask gets bytes
    assert BakingProvider.loads == 2


def test_a_short_or_replaced_entry_is_a_miss(tmp_path: Path) -> None:
    model = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    _session(model, tmp_path, Mapped)
    (entry,) = (tmp_path / Mapped.name).glob("*.bin")
    entry.write_bytes(entry.read_bytes()[:-1])
    _session(model, tmp_path, Mapped)
    assert (BakingProvider.builds, BakingProvider.loads) == (2, 0)
    entry.unlink()
    entry.mkdir()  # not a regular file: neither mapped nor read
    _session(model, tmp_path, Mapped)
    assert (BakingProvider.builds, BakingProvider.loads) == (3, 0)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("cls", [BakingProvider, Mapped], ids=["bytes", "mapped"])
def test_a_fifo_in_place_of_an_entry_is_a_miss_not_a_hang(tmp_path: Path, cls: type) -> None:
    model = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    _session(model, tmp_path, cls)
    (entry,) = (tmp_path / cls.name).glob("*.bin")
    entry.unlink()
    os.mkfifo(entry)  # nobody writes it: reading it would block for ever
    np.testing.assert_array_equal(_y(_session(model, tmp_path, cls)), X * [1, 2, 3] + [4, 5, 6])
    assert (BakingProvider.builds, BakingProvider.loads) == (2, 0)
