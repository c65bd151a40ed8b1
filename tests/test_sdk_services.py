"""What the host lends a provider through the SDK (SDK 1.1): the
compiled-artifact store, another provider's device, custom-op types.

Every provider and operator used here is in ``sdk_only_plugin.py``, which
imports ``ep_sdk`` and nothing of ortcore.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import ep_sdk
import ortcore
from ortcore.cache import CompiledCache, content_digest
from ortcore.host import CacheArtifactStore, SessionHost, session_config
from ortcore.plugins import PluginManager

from . import sdk_only_plugin as plug
from .conftest import fvi, make_model, plugin_module

X = np.array([[1.0, -2.0, 3.0]], np.float32)


@pytest.fixture(autouse=True)
def _reset() -> None:
    plug.KeepingProvider.builds = plug.KeepingProvider.loads = 0
    plug.FakeDeviceProvider.reason = None
    plug.FakeDeviceProvider.made.clear()


def _manager(*classes: type) -> PluginManager:
    pm = PluginManager(autoload=False)
    pm.register_plugin(plugin_module("tests.sdk_only", *classes), name="tests.sdk_only")
    return pm


def test_the_plugin_imports_nothing_of_ortcore() -> None:
    tree = ast.parse(Path(plug.__file__).read_text(encoding="utf-8"))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert "ep_sdk" in names
    assert not [n for n in names if n.split(".")[0] in ("ortcore", "conformance")]


def test_ortcore_re_exports_the_sdks_custom_op_types() -> None:
    assert ortcore.custom_op is ep_sdk.custom_op
    for name in ("CustomOp", "Param", "TensorType"):
        assert getattr(ortcore, name) is getattr(ep_sdk, name)
    assert isinstance(plug.halve, ortcore.CustomOp)


# -- the compiled-artifact store -------------------------------------------------------


def scale_model(w: list[float]) -> bytes:
    nodes = [helper.make_node("Mul", ["x", "w"], ["y"], name="mul")]
    inits = [numpy_helper.from_array(np.array(w, np.float32), "w")]
    return make_model(nodes, [fvi("x", [1, 3])], [fvi("y", [1, 3])], inits)


def _keeping(model: bytes, cache: Path | None = None, **options: str) -> Any:
    so = ortcore.SessionOptions()
    if cache is not None:
        so.add_session_config_entry("ortcore.cache_dir", str(cache))
    return ortcore.InferenceSession(
        model,
        so,
        providers=[("keeping", options)],
        plugin_manager=_manager(plug.KeepingProvider),
    )


def test_artifacts_are_found_again_by_a_new_session(tmp_path: Path) -> None:
    model = scale_model([1.0, 2.0, 3.0])
    y = _keeping(model, tmp_path).run(None, {"x": X})[0]
    assert (plug.KeepingProvider.builds, plug.KeepingProvider.loads) == (1, 0)
    again = _keeping(model, tmp_path).run(None, {"x": X})[0]
    assert (plug.KeepingProvider.builds, plug.KeepingProvider.loads) == (1, 1)
    np.testing.assert_array_equal(again, y)
    np.testing.assert_array_equal(y, X * np.float32([1, 2, 3]))
    (entry,) = CompiledCache(tmp_path).scan("KeepingExecutionProvider").entries
    assert entry["kind"] == "program" and entry["provider"] == "KeepingExecutionProvider"
    assert entry["ortcore"] == ortcore.__version__


def test_no_store_without_a_cache(tmp_path: Path) -> None:
    _keeping(scale_model([1.0, 2.0, 3.0])).run(None, {"x": X})
    _keeping(scale_model([1.0, 2.0, 3.0])).run(None, {"x": X})
    assert plug.KeepingProvider.builds == 2 and plug.KeepingProvider.loads == 0


def test_keys_differ_when_a_constant_or_an_option_changes(tmp_path: Path) -> None:
    _keeping(scale_model([1.0, 2.0, 3.0]), tmp_path).run(None, {"x": X})
    other = _keeping(scale_model([1.0, 2.0, 4.0]), tmp_path).run(None, {"x": X})[0]
    np.testing.assert_array_equal(other, X * np.float32([1, 2, 4]))  # never the first's
    _keeping(scale_model([1.0, 2.0, 3.0]), tmp_path, flavour="spicy").run(None, {"x": X})
    assert (plug.KeepingProvider.builds, plug.KeepingProvider.loads) == (3, 0)
    keys = {e["key"] for e in CompiledCache(tmp_path).scan().entries}
    assert len(keys) == 3


def test_a_store_in_a_folder_the_provider_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = scale_model([1.0, 2.0, 3.0])
    _keeping(model, store_path=str(tmp_path / "mine")).run(None, {"x": X})
    assert len(CompiledCache(tmp_path / "mine").scan().entries) == 1
    monkeypatch.setenv("ORTCORE_CACHE_DIR", str(tmp_path / "default"))
    _keeping(model, store_path="default").run(None, {"x": X})
    _keeping(model, store_path="default").run(None, {"x": X})
    assert len(CompiledCache(tmp_path / "default").scan().entries) == 1
    assert (plug.KeepingProvider.builds, plug.KeepingProvider.loads) == (2, 1)


def test_store_keys_are_the_caches_keys(tmp_path: Path) -> None:
    """An entry saved through the store is keyed as the core keys its own
    (SHA-256 of the content digest, then the parts as sorted JSON), and as the
    TensorRT provider keyed its engines before the store existed."""
    _keeping(scale_model([1.0, 2.0, 3.0]), tmp_path).run(None, {"x": X})
    groups: list[Any] = []

    class Grab(plug.KeepingProvider):
        def compile(self, group: ep_sdk.FusedGroup) -> Any:
            groups.append(group)
            return super().compile(group)

    Grab.name = "KeepingExecutionProvider"
    pm = PluginManager(autoload=False)
    pm.register_plugin(plugin_module("grab", Grab), name="grab")
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(tmp_path))
    sess = ortcore.InferenceSession(
        scale_model([1.0, 2.0, 3.0]), so, providers=["keeping"], plugin_manager=pm
    )
    (group,) = groups
    provider = sess._providers[0]  # type: ignore[attr-defined]
    store = provider.store
    assert isinstance(store, ep_sdk.ArtifactStore)
    parts = {**CompiledCache.key_parts(provider, group), "kind": "program"}
    assert store.key_parts(provider, group) == CompiledCache.key_parts(provider, group)
    digest = content_digest(group)
    assert store.content_digest(group) == digest
    h = hashlib.sha256(digest.encode())
    h.update(json.dumps(parts, sort_keys=True).encode())
    (entry,) = CompiledCache(tmp_path).scan().entries
    assert entry["key"] == h.hexdigest() == ep_sdk.artifact_key(parts, digest)
    assert ep_sdk.artifact_key(parts, digest) == CompiledCache(tmp_path).key(provider, group, parts)
    # without content (an artifact of no one group): the parts alone
    alone = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    assert ep_sdk.artifact_key(parts) == alone
    assert store.load(provider, group, parts) is None  # another key than the entry's
    assert store.save(provider, group, parts, b"abc")
    assert bytes(store.load(provider, group, parts) or b"") == b"abc"
    assert bytes(store.load(provider, group, parts, content=digest) or b"") != b"abc"


def test_a_host_made_config_holds_the_store_and_the_host(tmp_path: Path) -> None:
    config = session_config(
        PluginManager(autoload=False),
        intra_op_num_threads=2,
        config_entries={},
        cache_dir=tmp_path,
    )
    assert isinstance(config.artifact_store, CacheArtifactStore)
    assert config.artifact_store.location == str(tmp_path) == config.cache_dir
    assert isinstance(config.host, ep_sdk.Host) and config.host.config is config  # type: ignore[attr-defined]
    off = session_config(
        PluginManager(autoload=False), intra_op_num_threads=0, config_entries={}, cache_dir=None
    )
    assert off.artifact_store is None and off.cache_dir == "" and off.host is not None


# -- another provider's device ---------------------------------------------------------


def test_a_device_peer_is_the_provider_of_that_device_type() -> None:
    host = SessionHost(_manager(plug.FakeDeviceProvider, plug.KeepingProvider))
    peer = host.device_peer(ep_sdk.Device("fakedev", 2))
    assert isinstance(peer, plug.FakeDeviceProvider) and isinstance(peer, ep_sdk.DevicePeer)
    assert peer.device == ep_sdk.Device("fakedev", 2) and peer.options["device_id"] == "2"
    t = peer.from_host(X)
    assert isinstance(t, ep_sdk.ContiguousTensor)
    np.testing.assert_array_equal(peer.to_host(t), X)


def test_the_peer_named_after_the_device_else_the_highest_priority() -> None:
    host = SessionHost(_manager(plug.FakeDeviceProvider, plug.FasterFakeDevice))
    # alias "fakedev": chosen over the one of higher priority
    assert type(host.device_peer(ep_sdk.Device("fakedev", 0))) is plug.FakeDeviceProvider

    class Slow(plug.FakeDeviceProvider):
        name, aliases, priority = "SlowFakeExecutionProvider", ("slowfake",), 1

    host = SessionHost(_manager(Slow, plug.FasterFakeDevice))
    assert type(host.device_peer(ep_sdk.Device("fakedev", 0))) is plug.FasterFakeDevice
    plug.FakeDeviceProvider.reason = "no fakedev here"  # the others inherit it
    with pytest.raises(ep_sdk.NoDevicePeer, match="no fakedev here") as info:
        SessionHost(_manager(plug.FakeDeviceProvider)).device_peer(ep_sdk.Device("fakedev", 0))
    assert info.value.installed and info.value.device == ep_sdk.Device("fakedev", 0)


def test_no_peer_when_none_is_installed() -> None:
    host = SessionHost(_manager(plug.KeepingProvider))
    with pytest.raises(ep_sdk.NoDevicePeer, match="'fakedev' devices") as info:
        host.device_peer(ep_sdk.Device("fakedev", 0))
    assert not info.value.installed


def neg_relu() -> bytes:
    nodes = [
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Relu", ["n"], ["y"], name="relu"),
    ]
    return make_model(nodes, [fvi("x", [1, 3])], [fvi("y", [1, 3])])


@pytest.mark.parametrize("share", ["auto", "1", "0"])
def test_a_provider_runs_on_a_lent_device(share: str) -> None:
    pm = _manager(plug.BorrowingProvider, plug.FakeDeviceProvider)
    pm.register_plugin(pytest.importorskip("ortcore_cpu.plugin"), name="ortcore_cpu")
    sess = ortcore.InferenceSession(
        neg_relu(), providers=[("borrowing", {"share": share}), "cpu"], plugin_manager=pm
    )
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_array_equal(y, np.maximum(-X, 0))
    part = sess.get_partition()
    assert {r.node: r.provider for r in part.nodes}["neg"] == "BorrowingExecutionProvider"
    lent = share != "0"
    assert len(plug.FakeDeviceProvider.made) == int(lent)
    # the values cross to the lent device and back: copies of x and n
    assert sorted(c.name for c in part.copies) == (["n", "x"] if lent else [])
    if lent:
        (peer,) = plug.FakeDeviceProvider.made
        assert peer.config.host is not None  # made with the session's config
        sess.close()
        assert peer.closed


def test_share_1_without_a_peer_names_why() -> None:
    pm = _manager(plug.BorrowingProvider)
    pm.register_plugin(pytest.importorskip("ortcore_cpu.plugin"), name="ortcore_cpu")
    with pytest.raises(ortcore.InvalidArgument, match=r"share=1, but .*'fakedev'.*False"):
        ortcore.InferenceSession(
            neg_relu(), providers=[("borrowing", {"share": "1"}), "cpu"], plugin_manager=pm
        )


# -- custom operators from ep_sdk alone -----------------------------------------------


def _ops_manager() -> PluginManager:
    pm = PluginManager(autoload=False)
    pm.register_plugin(pytest.importorskip("ortcore_cpu.plugin"), name="ortcore_cpu")
    pm.register_plugin(plug, name="sdk_only_plugin")
    return pm


def _op_model(op: str) -> bytes:
    node = helper.make_node(op, ["x"], ["y"], domain="sdk.only", name="n")
    graph = helper.make_graph([node], "g", [fvi("x", [1, 3])], [fvi("y", [1, 3])])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("sdk.only", 1)],
        ir_version=8,
    )
    return bytes(model.SerializeToString())


def test_a_plugins_custom_op_built_from_the_sdk_runs() -> None:
    sess = ortcore.InferenceSession(
        _op_model("Halve"), providers=["cpu"], plugin_manager=_ops_manager()
    )
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], X * np.float32(0.5))
    onnx.checker.check_model(onnx.load_from_string(_op_model("Halve")))  # schema registered


def test_the_host_still_checks_what_an_sdk_kernel_returns() -> None:
    sess = ortcore.InferenceSession(
        _op_model("Wrong"), providers=["cpu"], plugin_manager=_ops_manager()
    )
    with pytest.raises(ortcore.RuntimeException, match=r"sdk\.only::Wrong.*float64|float64"):
        sess.run(None, {"x": X})
