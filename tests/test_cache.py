"""The on-disk cache of compiled fused groups: hits, misses on any key change, the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import ortcore
from ep_sdk import Capability, ExecutionProvider, FusedGroup
from ortcore.cache import CompiledCache, cache_dir_from_config
from ortcore.cli import main

from .conftest import chain_model, chain_reference, manager_with

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
OPS = ["Add", "Relu", "Mul"]


class CompilingProvider(ExecutionProvider):
    """Fuses every node into one group; "compiles" it to an op list; counts compilations."""

    name = "CompilingExecutionProvider"
    aliases = ("compiling",)
    version = "1.0"
    default_options: ClassVar[dict[str, str]] = {"level": "1"}
    compilations = 0
    loads = 0

    def get_capability(self, graph: Any) -> Capability:
        from ep_sdk import Claim

        return Capability(claims=[Claim.group(list(graph.nodes))])

    def compile(self, group: FusedGroup) -> Any:
        CompilingProvider.compilations += 1
        return self._program([n.op_type for n in group.nodes])

    def serialize_compiled(self, group: FusedGroup, compiled: Any) -> bytes:
        return ",".join(n.op_type for n in group.nodes).encode()

    def load_compiled(self, group: FusedGroup, data: bytes) -> Any:
        CompilingProvider.loads += 1
        return self._program(data.decode().split(","))

    @staticmethod
    def _program(ops: list[str]) -> Any:
        def run(x: np.ndarray) -> list[np.ndarray]:
            y = x
            for op in ops:
                y = (
                    {"Add": y + x, "Mul": y * x}.get(op, np.maximum(y, 0))
                    if op != "Relu"
                    else (np.maximum(y, 0))
                )
            return [y]

        return run


class CompilingV2(CompilingProvider):
    version = "2.0"


@pytest.fixture(autouse=True)
def _reset() -> None:
    CompilingProvider.compilations = 0
    CompilingProvider.loads = 0


def _session(cache: Path, cls: type = CompilingProvider, **options: str) -> Any:
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(cache))
    return ortcore.InferenceSession(
        chain_model(OPS),
        so,
        providers=[("compiling", options)],
        plugin_manager=manager_with(cls),
    )


def _check(sess: Any) -> None:
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], chain_reference(OPS, X))


def test_second_session_hits_the_cache(tmp_path: Path) -> None:
    _check(_session(tmp_path))
    assert (CompilingProvider.compilations, CompilingProvider.loads) == (1, 0)
    _check(_session(tmp_path))
    assert (CompilingProvider.compilations, CompilingProvider.loads) == (1, 1)
    (entry,) = CompiledCache(tmp_path).entries()
    assert entry["provider"] == "CompilingExecutionProvider" and entry["version"] == "1.0"
    assert entry["options"] == {"level": "1"} and entry["device"] == "cpu:0"


def test_changed_options_or_version_miss(tmp_path: Path) -> None:
    _check(_session(tmp_path))
    _check(_session(tmp_path, level="2"))
    assert (CompilingProvider.compilations, CompilingProvider.loads) == (2, 0)
    _check(_session(tmp_path, CompilingV2))
    assert (CompilingProvider.compilations, CompilingProvider.loads) == (3, 0)
    assert len(CompiledCache(tmp_path).entries()) == 3
    _check(_session(tmp_path, level="2"))
    assert CompilingProvider.loads == 1


def test_tampered_entry_is_not_reused(tmp_path: Path) -> None:
    _check(_session(tmp_path))
    (meta,) = tmp_path.glob("*/*.json")
    meta.write_text(meta.read_text().replace('"1.0"', '"0.9"'))
    _check(_session(tmp_path))
    assert (CompilingProvider.compilations, CompilingProvider.loads) == (2, 0)


def test_no_cache_unless_the_session_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTCORE_CACHE_DIR", str(tmp_path / "env"))
    for _ in range(2):
        ortcore.InferenceSession(
            chain_model(OPS),
            providers=["compiling"],
            plugin_manager=manager_with(CompilingProvider),
        )
    assert CompilingProvider.compilations == 2 and not (tmp_path / "env").exists()
    assert cache_dir_from_config({}) is None
    # onnxruntime's ep.context_enable writes a compiled model; it is no cache
    assert cache_dir_from_config({"ep.context_enable": "1"}) is None
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(tmp_path / "ctx" / "m_ctx.onnx"))
    (tmp_path / "ctx").mkdir()
    ortcore.InferenceSession(
        chain_model(OPS),
        so,
        providers=["compiling"],
        plugin_manager=manager_with(CompilingProvider),
    )
    assert (CompilingProvider.compilations, CompilingProvider.loads) == (3, 0)
    assert sorted(p.name for p in (tmp_path / "ctx").iterdir()) == [
        "m_ctx.onnx",
        "m_ctx_CompilingExecutionProvider.bin",
    ]


def test_cache_cli_lists_and_purges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _session(tmp_path)
    _session(tmp_path, level="2")
    assert main(["cache", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("cpu:0") == 2 and "CompilingExecutionProvider_fused_1" in out
    assert main(["cache", "purge", "--dir", str(tmp_path), "--provider", "Other"]) == 0
    assert len(CompiledCache(tmp_path).entries()) == 2
    assert (
        main(["cache", "purge", "--dir", str(tmp_path), "--provider", "CompilingExecutionProvider"])
        == 0
    )
    assert "removed 2" in capsys.readouterr().out
    assert main(["cache", "list", "--dir", str(tmp_path)]) == 0
    assert "no cached compiled groups" in capsys.readouterr().out
