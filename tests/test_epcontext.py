"""Compiled models in onnxruntime's EPContext form: the compile API, the format,
loading without the weights, compatibility, the ``ep.context_*`` config keys.

A fake compile-path provider compiles each Mul into a group that bakes its
weight; the Add between the two Muls runs on MiniProvider, so a compiled
model holds two EPContext nodes and one ordinary node with its initializer.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import ep_sdk
import ortcore
from ep_sdk import Capability, Claim, ExecutionProvider, FusedGroup, OrtCompiledModelCompatibility
from ep_sdk.compiled_context import Compatibility

from .conftest import manager_with
from .providers import MiniProvider

X = np.arange(6, dtype=np.float32).reshape(2, 3)
W1, B, W2 = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [-1.0, 0.5, 2.0]
EXPECTED = (X * W1 + B) * W2
MAGIC = b"MULBAKER1\n"


class MulBaker(ExecutionProvider):
    """Compiles each Mul by a constant into a group of its own (a baked weight)."""

    name = "MulBakerExecutionProvider"
    aliases = ("mulbaker",)
    version = "2.0"
    engine = "e1"
    builds = 0
    loads = 0
    seen: ClassVar[list[FusedGroup]] = []

    def get_capability(self, graph: Any) -> Capability:
        muls = [n for n in graph.nodes if n.op_type == "Mul"]
        return Capability(claims=[Claim.group([n]) for n in muls])

    def compile(self, group: FusedGroup) -> Any:
        MulBaker.builds += 1
        (const,) = group.constants
        return self._program(const.const_value.numpy())

    def serialize_compiled(self, group: FusedGroup, compiled: Any) -> bytes:
        buf = io.BytesIO()
        np.save(buf, compiled.weight)
        return MAGIC + buf.getvalue()

    def load_compiled(self, group: FusedGroup, data: bytes) -> Any:
        MulBaker.loads += 1
        MulBaker.seen.append(group)
        data = bytes(data)
        if not data.startswith(MAGIC):
            raise ValueError("not a MulBaker binary")
        return self._program(np.load(io.BytesIO(data[len(MAGIC) :])))

    def compile_cache_key_parts(self, group: FusedGroup) -> dict[str, str]:
        return {"engine_version": type(self).engine, "engine_target": "fake-npu"}

    @staticmethod
    def _program(weight: np.ndarray) -> Any:
        def run(x: np.ndarray) -> list[np.ndarray]:
            return [x * weight]

        run.weight = weight  # type: ignore[attr-defined]
        return run


class Judging(MulBaker):
    """States its own compatibility string and judges it itself."""

    name = "MulBakerExecutionProvider"

    def compiled_model_compatibility_info(self, groups: Any) -> str:
        return f"driver=7;groups={len(groups)}"

    def validate_compiled_model_compatibility_info(self, info: str, groups: Any) -> Compatibility:
        if info.startswith("driver=7"):
            return Compatibility(OrtCompiledModelCompatibility.EP_SUPPORTED_OPTIMAL)
        return Compatibility(OrtCompiledModelCompatibility.EP_UNSUPPORTED, f"driver of {info!r}")


@pytest.fixture(autouse=True)
def _reset() -> None:
    MulBaker.builds = MulBaker.loads = 0
    MulBaker.engine = "e1"
    MulBaker.seen.clear()


def _model_proto() -> onnx.ModelProto:
    fvi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Mul", ["x", "w1"], ["t"], name="mul1"),
        helper.make_node("Add", ["t", "b"], ["u"], name="add"),
        helper.make_node("Mul", ["u", "w2"], ["y"], name="mul2"),
    ]
    inits = [
        numpy_helper.from_array(np.array(v, np.float32), n)
        for n, v in (("w1", W1), ("b", B), ("w2", W2))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [fvi("x", onnx.TensorProto.FLOAT, [2, 3])],
        [fvi("y", onnx.TensorProto.FLOAT, [2, 3])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _external_model(folder: Path) -> Path:
    """The model with its weights in ``weights.bin`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save(
        _model_proto(), path, save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    return path


def _manager(cls: type = MulBaker) -> Any:
    return manager_with(cls, MiniProvider)


def _compiler(model: Any, cls: type = MulBaker, **kwargs: Any) -> ortcore.ModelCompiler:
    return ortcore.ModelCompiler(
        ortcore.SessionOptions(),
        model if isinstance(model, bytes) else str(model),
        providers=["mulbaker", "mini"],
        plugin_manager=_manager(cls),
        **kwargs,
    )


def _session(model: Any, so: ortcore.SessionOptions | None = None, cls: type = MulBaker) -> Any:
    return ortcore.InferenceSession(
        model if isinstance(model, bytes) else str(model),
        so,
        providers=["mulbaker", "mini"],
        plugin_manager=_manager(cls),
    )


def _y(sess: Any) -> np.ndarray:
    return np.asarray(sess.run(None, {"x": X})[0])


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes; strings decoded, but the binary (``ep_cache_context``)."""
    out = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {
        k: v.decode() if isinstance(v, bytes) and k != "ep_cache_context" else v
        for k, v in out.items()
    }


def _moved(files: list[Path], to: Path) -> Path:
    """Copy ``files`` (the compiled model first) into ``to``; the copy of the model."""
    to.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, to / f.name)
    return to / files[0].name


# -- the format ---------------------------------------------------------------------


def test_a_compiled_model_has_onnxruntimes_epcontext_nodes(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "src")
    _compiler(path).compile_to_file()
    out = tmp_path / "src" / "model_ctx.onnx"  # onnxruntime's default name
    proto = onnx.load(out)
    ops = [(n.domain, n.op_type, n.name) for n in proto.graph.node]
    assert [op[:2] for op in ops] == [
        ("com.microsoft", "EPContext"),
        ("", "Add"),
        ("com.microsoft", "EPContext"),
    ]
    one, _, two = proto.graph.node
    attrs = _attrs(one)
    assert attrs["source"] == MulBaker.name and attrs["embed_mode"] == 0
    assert attrs["main_context"] == 1 and attrs["partition_name"] == one.name
    assert attrs["ep_sdk_version"] == ep_sdk.__version__
    assert attrs["hardware_architecture"] == "fake-npu"
    assert attrs["onnx_model_filename"] == "model.onnx"
    assert json.loads(attrs["notes"])["ortcore"]["nodes"][0][:2] == ["mul1", "Mul"]
    assert (list(one.input), list(one.output), list(two.input)) == (["x"], ["t"], ["u"])
    # each binary in a file beside the model, named as onnxruntime names them
    names = [_attrs(n)["ep_cache_context"].decode() for n in (one, two)]
    assert names == [f"model_ctx_{MulBaker.name}_1.bin", f"model_ctx_{MulBaker.name}_2.bin"]
    assert all((tmp_path / "src" / n).read_bytes().startswith(MAGIC) for n in names)
    # the kept node's initializer is in the model; the compiled groups' weights are not
    assert [t.name for t in proto.graph.initializer] == ["b"]
    assert not proto.graph.initializer[0].external_data
    assert {o.domain: o.version for o in proto.opset_import}["com.microsoft"] == 1
    meta = {p.key: p.value for p in proto.metadata_props}
    info = json.loads(meta[f"ep_compatibility_info.{MulBaker.name}"])
    assert info["engine"] == {"engine_version": "e1", "engine_target": "fake-npu"}
    assert info["version"] == "2.0" and info["ep_sdk"] == ep_sdk.__version__
    # onnxruntime reads the same compatibility string, and sees the nodes as EPContext
    # nodes of a provider it lacks
    ort = pytest.importorskip("onnxruntime")
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    assert (
        C.get_compatibility_info_from_model(str(out), MulBaker.name)
        == meta[f"ep_compatibility_info.{MulBaker.name}"]
    )
    assert (
        ortcore.get_compatibility_info_from_model(out, MulBaker.name)
        == meta[f"ep_compatibility_info.{MulBaker.name}"]
    )
    assert ortcore.get_compatibility_info_from_model_bytes(out.read_bytes(), "Other") is None
    with pytest.raises(Exception, match=f"EPContext node generated by '{MulBaker.name}'"):
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("embed", [False, True])
def test_a_compiled_model_runs_elsewhere_without_the_weights(tmp_path: Path, embed: bool) -> None:
    path = _external_model(tmp_path / "src")
    original = _y(_session(path))
    np.testing.assert_allclose(original, EXPECTED)
    builds = MulBaker.builds
    out = tmp_path / "src" / "compiled.onnx"
    _compiler(path, embed_compiled_data_into_model=embed).compile_to_file(out)
    files = sorted((tmp_path / "src").glob("compiled*"), key=lambda p: p.suffix != ".onnx")
    assert len(files) == (1 if embed else 3)
    moved = _moved(files, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere" / "weights.bin").exists()
    sess = _session(moved)
    np.testing.assert_array_equal(_y(sess), original)
    assert MulBaker.builds == builds + 2 and MulBaker.loads == 2  # compiled once, loaded twice
    # the group load_compiled receives: the EPContext node, the inputs and outputs
    group = MulBaker.seen[0]
    assert [n.op_type for n in group.nodes] == ["EPContext"] and group.payload is None
    assert [v.name for v in group.inputs] == ["x"] and not group.constants
    nodes = [(r.node, r.op_type, r.provider) for r in sess.get_partition().nodes]
    assert nodes == [
        ("mul1", "Mul", MulBaker.name),
        ("add", "Add", MiniProvider.name),
        ("mul2", "Mul", MulBaker.name),
    ]
    sess.set_providers(["mulbaker", "mini"])  # new providers load the binaries again
    np.testing.assert_array_equal(_y(sess), original)
    assert MulBaker.loads == 4


def test_bytes_compile_and_load(tmp_path: Path) -> None:
    model = _model_proto().SerializeToString()
    chunks: list[bytes] = []
    _compiler(model, embed_compiled_data_into_model=True).compile_to_stream(chunks.append)
    data = b"".join(chunks)
    np.testing.assert_allclose(_y(_session(data)), EXPECTED)
    # binaries in files: they need a folder, and a model from bytes needs to be told it
    with pytest.raises(ortcore.InvalidArgument, match="set_ep_context_binary_information"):
        _compiler(model).compile_to_bytes()
    compiler = _compiler(model)
    compiler.set_ep_context_binary_information(tmp_path, "net")
    data = compiler.compile_to_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"net_{MulBaker.name}_1.bin",
        f"net_{MulBaker.name}_2.bin",
    ]
    with pytest.raises(ortcore.InvalidArgument, match=r"ep\.context_file_path"):
        _session(data)
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ep.context_file_path", str(tmp_path / "net_ctx.onnx"))
    np.testing.assert_allclose(_y(_session(data, so)), EXPECTED)
    with pytest.raises(ortcore.InvalidArgument, match="needs an output path"):
        _compiler(model).compile_to_file()


def test_external_initializers_of_kept_nodes(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "src")
    out = tmp_path / "src" / "c.onnx"
    _compiler(
        path,
        embed_compiled_data_into_model=True,
        external_initializers_file_path="c.data",
        external_initializers_size_threshold=0,
    ).compile_to_file(out)
    (b,) = onnx.load(out, load_external_data=False).graph.initializer
    assert {e.key: e.value for e in b.external_data}["location"] == "c.data"
    moved = _moved([out, tmp_path / "src" / "c.data"], tmp_path / "elsewhere")
    np.testing.assert_allclose(_y(_session(moved)), EXPECTED)


# -- refused --------------------------------------------------------------------------


def _compiled(tmp_path: Path, **kwargs: Any) -> Path:
    path = _external_model(tmp_path / "src")
    out = tmp_path / "src" / "c.onnx"
    _compiler(path, **kwargs).compile_to_file(out)
    return out


def _edit(path: Path, fn: Any) -> None:
    proto = onnx.load(path)
    fn(proto)
    onnx.save(proto, path)


def _set_attr(node: onnx.NodeProto, name: str, value: Any) -> None:
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*keep, helper.make_attribute(name, value)])


def test_a_missing_provider_is_named(tmp_path: Path) -> None:
    out = _compiled(tmp_path)
    with pytest.raises(ortcore.NotImplementedOp, match=f"{MulBaker.name}.*not among"):
        ortcore.InferenceSession(str(out), providers=["mini"], plugin_manager=_manager())


def test_a_missing_or_corrupt_binary_is_named(tmp_path: Path) -> None:
    out = _compiled(tmp_path)
    first = tmp_path / "src" / f"c_{MulBaker.name}_1.bin"
    first.write_bytes(b"garbage")
    with pytest.raises(ortcore.Fail, match=f"EPContext node .* of {MulBaker.name}.*corrupt"):
        _session(out)
    first.unlink()
    with pytest.raises(ortcore.NoSuchFile, match=f"c_{MulBaker.name}_1.bin"):
        _session(out)
    out = _compiled(tmp_path / "e", embed_compiled_data_into_model=True)
    _edit(out, lambda p: _set_attr(p.graph.node[0], "ep_cache_context", b"\xff\xfe not it"))
    with pytest.raises(ortcore.Fail, match="not a MulBaker binary"):
        _session(out)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin"])
def test_a_binary_outside_the_models_folder_is_refused(tmp_path: Path, location: str) -> None:
    out = _compiled(tmp_path)
    (tmp_path / "outside.bin").write_bytes(
        (tmp_path / "src" / f"c_{MulBaker.name}_1.bin").read_bytes()
    )
    _edit(out, lambda p: _set_attr(p.graph.node[0], "ep_cache_context", location))
    with pytest.raises(ortcore.InvalidArgument, match=r"escapes|relative"):
        _session(out)


def test_a_binary_through_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    out = _compiled(tmp_path)
    first = tmp_path / "src" / f"c_{MulBaker.name}_1.bin"
    (tmp_path / "outside.bin").write_bytes(first.read_bytes())
    first.unlink()
    first.symlink_to(tmp_path / "outside.bin")
    with pytest.raises(ortcore.InvalidArgument, match="escapes"):
        _session(out)


# -- compatibility --------------------------------------------------------------------


def _info_edit(path: Path, **changes: Any) -> None:
    def edit(proto: onnx.ModelProto) -> None:
        for prop in proto.metadata_props:
            if prop.key == f"ep_compatibility_info.{MulBaker.name}":
                info = json.loads(prop.value)
                for key, value in changes.items():
                    if key in info["engine"]:
                        info["engine"][key] = value
                    else:
                        info[key] = value
                prop.value = json.dumps(info)

    _edit(path, edit)


def test_a_stale_context_is_refused_naming_what_differs(tmp_path: Path) -> None:
    out = _compiled(tmp_path)
    MulBaker.engine = "e2"  # the engine was upgraded since
    with pytest.raises(
        ortcore.Fail,
        match=f"not supported by execution provider {MulBaker.name}.*engine_version.*'e1'.*'e2'",
    ):
        _session(out)
    assert MulBaker.loads == 0  # refused before any binary is loaded
    MulBaker.engine = "e1"
    _info_edit(out, ep_sdk="2.0.0")
    with pytest.raises(ortcore.Fail, match="ep_sdk major version"):
        _session(out)


def test_another_provider_version_loads_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = _compiled(tmp_path)
    _info_edit(out, version="1.9")
    with caplog.at_level(logging.WARNING, logger="ortcore.epcontext"):
        np.testing.assert_allclose(_y(_session(out)), EXPECTED)
    assert "suboptimal" in caplog.text and "'1.9'" in caplog.text
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.fail_on_suboptimal_compiled_model", "1")
    with pytest.raises(ortcore.Fail, match="provider version"):
        _session(out, so)


def test_a_provider_judges_its_own_compatibility_string(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "src")
    out = tmp_path / "src" / "c.onnx"
    _compiler(path, Judging).compile_to_file(out)
    assert ortcore.get_compatibility_info_from_model(out, MulBaker.name) == "driver=7;groups=2"
    np.testing.assert_allclose(_y(_session(out, cls=Judging)), EXPECTED)
    _edit(out, lambda p: [setattr(m, "value", "driver=6") for m in p.metadata_props])
    with pytest.raises(ortcore.Fail, match="driver of 'driver=6'"):
        _session(out, cls=Judging)
    # the default judgement refuses a string it did not write
    with pytest.raises(ortcore.Fail, match="not one this provider states"):
        _session(out)


# -- flags and config keys ------------------------------------------------------------


def test_compile_flags(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "src")
    out = tmp_path / "src" / "c.onnx"
    flags = ortcore.OrtCompileApiFlags
    assert (int(flags.ERROR_IF_NO_NODES_COMPILED), int(flags.ERROR_IF_OUTPUT_FILE_EXISTS)) == (1, 2)
    _compiler(path).compile_to_file(out)
    _compiler(path).compile_to_file(out)  # overwritten without the flag
    with pytest.raises(ortcore.Fail, match="exists already"):
        _compiler(path, flags=flags.ERROR_IF_OUTPUT_FILE_EXISTS).compile_to_file(out)
    mini_only = ortcore.ModelCompiler(
        ortcore.SessionOptions(),
        str(path),
        flags=flags.ERROR_IF_NO_NODES_COMPILED,
        providers=["mini"],
        plugin_manager=_manager(),
    )
    with pytest.raises(ortcore.Fail, match="Unable to compile any nodes"):
        mini_only.compile_to_bytes()
    # without the flag, a model nothing compiled is written as it is
    plain = ortcore.ModelCompiler(
        ortcore.SessionOptions(), str(path), providers=["mini"], plugin_manager=_manager()
    )
    proto = onnx.load_from_string(plain.compile_to_bytes())
    assert [n.op_type for n in proto.graph.node] == ["Mul", "Add", "Mul"]
    assert len(proto.graph.initializer) == 3
    with pytest.raises(ortcore.InvalidArgument, match="does not exist"):
        _compiler(tmp_path / "nope.onnx").compile_to_bytes()
    with pytest.raises(ortcore.InvalidArgument, match="empty"):
        _compiler(b"")


def test_context_config_keys_on_an_ordinary_session(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "src")
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "1")
    so.add_session_config_entry("ep.context_node_name_prefix", "part1_")
    np.testing.assert_allclose(_y(_session(path, so)), EXPECTED)
    out = tmp_path / "src" / "model_ctx.onnx"
    proto = onnx.load(out)
    assert not list((tmp_path / "src").glob("model_ctx*.bin"))  # embedded
    names = [n.name for n in proto.graph.node if n.op_type == "EPContext"]
    assert len(names) == 2 and all(n.startswith("part1_") for n in names)
    with pytest.raises(ortcore.Fail, match="exists already"):
        _session(path, so)
    moved = _moved([out], tmp_path / "elsewhere")
    np.testing.assert_allclose(_y(_session(moved)), EXPECTED)
    # a session with nothing compiled writes nothing (as onnxruntime)
    out.unlink()
    ortcore.InferenceSession(str(path), so, providers=["mini"], plugin_manager=_manager())
    assert not out.exists()


def test_an_old_saved_session_record_is_stale(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(cache))
    so.add_session_config_entry("ortcore.save_session", "1")
    model = _model_proto()
    del model.graph.node[1:]  # x * w1: every node compiled
    model.graph.output[0].name = "t"
    data = model.SerializeToString()
    _session(data, so)
    (meta,) = (cache / "ortcore.session").glob("*.meta")
    (ctx,) = (cache / "ortcore.session").glob("*.onnx")
    proto = onnx.load(ctx)
    assert [
        (n.op_type, _attrs(n)["ep_cache_context"].decode()[: len(MulBaker.name) + 1])
        for n in proto.graph.node
    ] == [("EPContext", f"{MulBaker.name}/")]
    warm = _session(data, so)
    assert warm._saved is not None and MulBaker.builds == 1
    record = json.loads(meta.read_text())
    del record["format"]  # as the records before the EPContext format
    meta.write_text(json.dumps(record))
    cold = _session(data, so)
    assert cold._saved is None and MulBaker.builds == 1  # rebuilt, from the cache entry


def test_model_compatibility_for_ep_devices(tmp_path: Path) -> None:
    """onnxruntime's get_model_compatibility_for_ep_devices: the stored string
    judged for a provider's devices, as a session would judge it."""
    from ortcore.ep_devices import get_ep_devices

    out = _compiled(tmp_path)
    info = ortcore.get_compatibility_info_from_model(str(out), MulBaker.name)
    assert info is not None
    devices = [d for d in get_ep_devices(_manager()) if d.ep_name == MulBaker.name]
    assert devices
    judge = ortcore.get_model_compatibility_for_ep_devices
    assert judge(devices, info) == OrtCompiledModelCompatibility.EP_SUPPORTED_OPTIMAL
    _info_edit(out, version="1.9")
    older = ortcore.get_compatibility_info_from_model(str(out), MulBaker.name)
    assert older is not None
    assert judge(devices, older) == OrtCompiledModelCompatibility.EP_SUPPORTED_PREFER_RECOMPILATION
    MulBaker.engine = "e2"
    assert judge(devices, info) == OrtCompiledModelCompatibility.EP_UNSUPPORTED
    assert judge(devices, "") == OrtCompiledModelCompatibility.EP_NOT_APPLICABLE

    # a provider that compiles nothing, and the refusals, as onnxruntime answers them
    mini = [d for d in get_ep_devices(_manager()) if d.ep_name == MiniProvider.name]
    assert judge(mini, info) == OrtCompiledModelCompatibility.EP_NOT_APPLICABLE
    with pytest.raises(RuntimeError, match="Invalid argument provided to GetModelCompat"):
        judge([], info)
    with pytest.raises(RuntimeError, match="several execution providers"):
        judge([*devices, *mini], info)
    onnxruntime = pytest.importorskip("onnxruntime")
    capi = onnxruntime.capi.onnxruntime_pybind11_state
    ort_cpu = onnxruntime.get_ep_devices()
    assert capi.get_model_compatibility_for_ep_devices(ort_cpu, info).name == "EP_NOT_APPLICABLE"
    with pytest.raises(RuntimeError, match="Invalid argument provided to GetModelCompat"):
        capi.get_model_compatibility_for_ep_devices([], info)
