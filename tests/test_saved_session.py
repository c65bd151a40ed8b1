"""Saved sessions: a warm session starts from its context model, never from a wrong one.

A session whose every node is in a cached compiled group saves a context
model (``ortcore.save_session`` = ``"1"``), an EPContext model; the
next session of the same model and options loads it and the artifacts
instead of loading, optimizing and partitioning the model. Anything that
changes the answer (weights, external data, options, the provider or its
engine) is a miss, and anything stale or broken falls back to the model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest

import ortcore
from ep_sdk import Capability, Claim
from ortcore.cache import SESSION_FOLDER, SOURCES, CompiledCache
from ortcore.cache.keys import hash_arrays, hash_file
from ortcore.cli import main

from .conftest import manager_with
from .providers import MiniProvider
from .test_compile_cache import BakingProvider, X, affine_model


class Asked(BakingProvider):
    """BakingProvider that counts get_capability calls."""

    asked: ClassVar[int] = 0

    def get_capability(self, graph: Any) -> Capability:
        Asked.asked += 1
        return super().get_capability(graph)


class MulOnly(Asked):
    """Claims the Mul only: the Add runs on the CPU provider."""

    def get_capability(self, graph: Any) -> Capability:
        Asked.asked += 1
        mul = [n for n in graph.nodes if n.op_type == "Mul"]
        return Capability(claims=[Claim.group(mul)])

    @staticmethod
    def _program(baked: dict[str, np.ndarray]) -> Any:
        def run(x: np.ndarray) -> list[np.ndarray]:
            return [x * baked["w"]]

        run.baked = baked  # type: ignore[attr-defined]
        return run


@pytest.fixture(autouse=True)
def _reset() -> None:
    Asked.asked = BakingProvider.builds = BakingProvider.loads = 0
    BakingProvider.groups.clear()
    BakingProvider.engine_version = "e1"
    BakingProvider.fail_load = BakingProvider.fail_serialize = False


def _options(cache: Path, **entries: str) -> ortcore.SessionOptions:
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(cache))
    so.add_session_config_entry("ortcore.save_session", "1")
    for key, value in entries.items():
        so.add_session_config_entry(key, value)
    return so


def _session(
    model: bytes | Path,
    cache: Path,
    cls: type = Asked,
    so: ortcore.SessionOptions | None = None,
    providers: list[Any] | None = None,
) -> Any:
    return ortcore.InferenceSession(
        model if isinstance(model, bytes) else str(model),
        so or _options(cache),
        providers=providers or [cls.aliases[0]],
        plugin_manager=manager_with(cls),
    )


def _y(sess: Any) -> np.ndarray:
    return np.asarray(sess.run(None, {"x": X})[0])


def _saved(cache: Path) -> list[Path]:
    return sorted((cache / SESSION_FOLDER).glob("*.onnx"))


def _external_model(tmp_path: Path) -> Path:
    """The affine model in ``tmp_path/model/``, its weights in ``weights.bin`` beside it."""
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "affine.onnx"
    proto = onnx.load_from_string(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]))
    onnx.save(proto, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def _with_metadata(model: bytes) -> bytes:
    proto = onnx.load_from_string(model)
    onnx.helper.set_model_props(proto, {"author": "me", "purpose": "test"})
    proto.producer_name = "tests"
    proto.doc_string = "an affine model"
    proto.graph.name = "affine"
    return proto.SerializeToString()


def test_a_second_session_starts_from_the_saved_one(tmp_path: Path) -> None:
    model = _with_metadata(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]))
    cold = _session(model, tmp_path)
    assert (Asked.asked, BakingProvider.builds, BakingProvider.loads) == (1, 1, 0)
    assert len(_saved(tmp_path)) == 1
    warm = _session(model, tmp_path)
    # not partitioned again: the provider loads its artifact and is asked nothing
    assert (Asked.asked, BakingProvider.builds, BakingProvider.loads) == (1, 1, 1)
    assert warm._saved is not None and cold._saved is None
    np.testing.assert_array_equal(_y(warm), X * [1, 2, 3] + [4, 5, 6])
    for a, b in zip(warm.get_inputs() + warm.get_outputs(), cold.get_inputs() + cold.get_outputs()):
        assert (a.name, a.type, a.shape) == (b.name, b.type, b.shape)
    assert vars(warm.get_modelmeta()) == vars(cold.get_modelmeta())
    assert warm.get_modelmeta().custom_metadata_map == {"author": "me", "purpose": "test"}
    warm_part, cold_part = warm.get_partition().to_dict(), cold.get_partition().to_dict()
    # the same partition; only where the compiled group came from differs
    assert warm_part.pop("compiled") == {"BakingExecutionProvider_fused_1": SOURCES["saved"]}
    assert cold_part.pop("compiled") == {"BakingExecutionProvider_fused_1": SOURCES["miss"]}
    assert warm_part == cold_part
    assert [r.node for r in warm.get_partition().nodes] == ["mul", "add"]


def test_other_weights_options_or_engine_never_reuse_a_saved_session(tmp_path: Path) -> None:
    one = affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    two = affine_model([-1.0, 0.5, 2.0], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(_y(_session(one, tmp_path)), X * [1, 2, 3])
    np.testing.assert_array_equal(_y(_session(two, tmp_path)), X * [-1, 0.5, 2] + 1)
    assert len(_saved(tmp_path)) == 2 and Asked.asked == 2
    level = _options(tmp_path)
    level.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_ENABLE_BASIC
    np.testing.assert_array_equal(_y(_session(one, tmp_path, so=level)), X * [1, 2, 3])
    assert Asked.asked == 3  # another key: the model was partitioned
    # Same session key, but the engine changed: the artifact's key parts differ,
    # so the saved session is stale and the model is built again.
    BakingProvider.engine_version = "e2"
    np.testing.assert_array_equal(_y(_session(one, tmp_path)), X * [1, 2, 3])
    assert Asked.asked == 4 and BakingProvider.builds == 3  # level: same group, same artifact
    # ... and saved again for this engine
    np.testing.assert_array_equal(_y(_session(one, tmp_path)), X * [1, 2, 3])
    assert Asked.asked == 4


def test_a_missing_artifact_or_a_broken_record_falls_back_to_the_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    _session(model, tmp_path)
    for entry in (tmp_path / Asked.name).iterdir():
        entry.unlink()
    with caplog.at_level(logging.INFO, logger="ortcore.cache"):
        np.testing.assert_array_equal(_y(_session(model, tmp_path)), X * [1, 2, 3])
    assert "not used" in caplog.text and "is gone" in caplog.text
    assert (Asked.asked, BakingProvider.builds) == (2, 2)
    # The artifact is back and the session saved again: the next one is warm.
    _session(model, tmp_path)
    assert (Asked.asked, BakingProvider.loads) == (2, 1)
    # A context model with other bytes than its record says is not loaded.
    (saved,) = _saved(tmp_path)
    data = bytearray(saved.read_bytes())
    data[-1] ^= 0xFF
    saved.write_bytes(bytes(data))
    np.testing.assert_array_equal(_y(_session(model, tmp_path)), X * [1, 2, 3])
    assert Asked.asked == 3
    # A record whose context model does not parse is refused with a warning.
    (meta,) = (tmp_path / SESSION_FOLDER).glob("*.meta")
    saved.write_bytes(b"not onnx")
    record = json.loads(meta.read_text())
    import hashlib

    record.update(size=8, sha256=hashlib.sha256(b"not onnx").hexdigest())
    meta.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="ortcore.cache"):
        np.testing.assert_array_equal(_y(_session(model, tmp_path)), X * [1, 2, 3])
    assert Asked.asked == 4


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("which", [".meta", ".onnx"])
def test_a_fifo_in_place_of_a_saved_file_is_a_miss_not_a_hang(tmp_path: Path, which: str) -> None:
    model = affine_model([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    _session(model, tmp_path)
    (path,) = (tmp_path / SESSION_FOLDER).glob(f"*{which}")
    path.unlink()
    os.mkfifo(path)  # opened blocking, reading it would wait for a writer forever
    np.testing.assert_array_equal(_y(_session(model, tmp_path)), X * [1, 2, 3])
    assert Asked.asked == 2  # built from the model


def test_changed_external_data_is_a_miss(tmp_path: Path) -> None:
    path = _external_model(tmp_path)
    folder = path.parent
    cache = tmp_path / "cache"
    np.testing.assert_array_equal(_y(_session(path, cache)), X * [1, 2, 3] + [4, 5, 6])
    _session(path, cache)
    assert Asked.asked == 1  # warm
    weights = folder / "weights.bin"
    w = np.frombuffer(weights.read_bytes(), np.float32).copy()
    weights.write_bytes((w * 2).tobytes())  # same .onnx bytes, other weights
    np.testing.assert_array_equal(_y(_session(path, cache)), X * [2, 4, 6] + [8, 10, 12])
    assert Asked.asked == 2
    (meta,) = (cache / SESSION_FOLDER).glob("*.meta")
    assert json.loads(meta.read_text())["externals"] == ["weights.bin"]


def test_sessions_that_are_never_saved(tmp_path: Path) -> None:
    model = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    # a node outside every group (the Add on the CPU provider)
    sess = ortcore.InferenceSession(
        model,
        _options(tmp_path),
        providers=["baking", "mini"],
        plugin_manager=manager_with(MulOnly, MiniProvider),
    )
    np.testing.assert_array_equal(_y(sess), X * [1, 2, 3] + [4, 5, 6])
    assert not _saved(tmp_path)
    # no ortcore.save_session: the compiled-artifact cache only
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(tmp_path))
    _session(model, tmp_path, so=so)
    assert not _saved(tmp_path) and CompiledCache(tmp_path).entries()
    # replaced initializers are not in the key: never saved
    so = _options(tmp_path)
    so.add_initializer("w", np.array([0.0, 0.0, 1.0], np.float32))
    np.testing.assert_array_equal(_y(_session(model, tmp_path, so=so)), X * [0, 0, 1] + [4, 5, 6])
    assert not _saved(tmp_path)
    # onnxruntime's ep.context_enable writes a compiled model, not a saved session
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(tmp_path / "model_ctx.onnx"))
    _session(model, tmp_path, so=so)
    assert not _saved(tmp_path) and (tmp_path / "model_ctx.onnx").is_file()


def test_set_providers_on_a_saved_session_builds_from_the_model(tmp_path: Path) -> None:
    model = affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    _session(model, tmp_path)
    warm = _session(model, tmp_path)
    assert warm._saved is not None
    warm.set_providers(["baking"])
    assert warm._saved is None
    np.testing.assert_array_equal(_y(warm), X * [1, 2, 3] + [4, 5, 6])
    assert [r.node for r in warm.get_partition().nodes] == ["mul", "add"]


def test_purge_removes_saved_sessions_and_list_shows_compiled_groups_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _session(affine_model([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), tmp_path)
    assert len(CompiledCache(tmp_path).entries()) == 1 and len(_saved(tmp_path)) == 1
    assert not CompiledCache(tmp_path).scan().skipped
    report = CompiledCache(tmp_path).purge(Asked.name)  # one provider: sessions stay
    assert (report.entries, report.sessions) == (1, 0) and len(_saved(tmp_path)) == 1
    (tmp_path / SESSION_FOLDER / "notes.txt").write_text("mine")
    assert main(["cache", "purge", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "also removed 1 saved session(s)" in out and "notes.txt: not a saved session" in out
    assert not _saved(tmp_path) and (tmp_path / SESSION_FOLDER / "notes.txt").exists()


def test_a_settled_files_digest_is_remembered_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortcore.saved_session import record as saved

    weights, cache = tmp_path / "weights.bin", tmp_path / "cache"
    weights.write_bytes(b"a" * 100)
    first = saved._digest_file(weights, cache)
    assert first and not (cache / SESSION_FOLDER).exists()  # written just now: not remembered
    monkeypatch.setattr(saved, "_SETTLED_NS", -1)
    assert saved._digest_file(weights, cache) == first
    (memo,) = (cache / SESSION_FOLDER / "digests").glob("*.json")
    # While the file's stat is the same, the remembered digest is used as is.
    record = json.loads(memo.read_text())
    memo.write_text(json.dumps(dict(record, sha256="remembered")))
    assert saved._digest_file(weights, cache) == "remembered"
    # Same size and the modification time put back: the change time tells.
    st = weights.stat()
    time.sleep(0.05)
    weights.write_bytes(b"b" * 100)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = saved._digest_file(weights, cache)
    assert second not in (first, "remembered") and second == saved._digest_file(weights)
    # A memo that is not JSON is ignored (and replaced).
    memo.write_text("{")
    assert saved._digest_file(weights, cache) == second


def test_a_warm_session_with_remembered_digests_still_sees_new_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ortcore.saved_session import record as saved

    monkeypatch.setattr(saved, "_SETTLED_NS", -1)
    path = _external_model(tmp_path)
    folder = path.parent
    cache = tmp_path / "cache"
    _session(path, cache)
    np.testing.assert_array_equal(_y(_session(path, cache)), X * [1, 2, 3] + [4, 5, 6])
    assert Asked.asked == 1  # warm
    digests = cache / SESSION_FOLDER / "digests"
    assert len(list(digests.glob("*.json"))) == 2  # the model file and its weights
    weights = folder / "weights.bin"
    st = weights.stat()
    time.sleep(0.05)
    w = np.frombuffer(weights.read_bytes(), np.float32).copy()
    weights.write_bytes((w * 2).tobytes())
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    np.testing.assert_array_equal(_y(_session(path, cache)), X * [2, 4, 6] + [8, 10, 12])
    assert Asked.asked == 2
    # A purge of every provider removes the digests with the saved sessions.
    assert main(["cache", "purge", "--dir", str(cache)]) == 0
    assert "not a" not in capsys.readouterr().out
    assert not (cache / SESSION_FOLDER).exists()


# -- data files are hashed by reading them, never mapped ---------------------------------


@pytest.mark.parametrize("size", [0, 1, (1 << 24) + 3])
def test_file_digest_is_the_one_a_mapped_file_gave(tmp_path: Path, size: int) -> None:
    """Saved sessions' digests of data files stay what they were when files were mapped."""
    p = tmp_path / "f.bin"
    p.write_bytes(np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes())
    mapped, read = hashlib.sha256(), hashlib.sha256()
    with open(p, "rb") as f:
        if size:
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
                content = np.frombuffer(m, np.uint8)
                hash_arrays(mapped, [("file", content)])
                del content
        else:
            hash_arrays(mapped, [("file", np.zeros(0, np.uint8))])
        hash_file(read, f.fileno(), size)
        assert read.hexdigest() == mapped.hexdigest()
        with pytest.raises(OSError, match="shrank"):
            hash_file(hashlib.sha256(), f.fileno(), size + 1)
