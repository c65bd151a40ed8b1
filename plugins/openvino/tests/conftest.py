"""Fixtures: the OpenVINO and CPU providers in a plugin manager of their own.

The tests import the installed ``ortcore_openvino`` (under tox: the built
wheel); in a checkout's environment without it, the source tree is used.
Tests that need OpenVINO itself skip when ``openvino`` cannot be imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import ortcore_openvino  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.fixture
def ov() -> Any:
    """The openvino module; skips the test without it."""
    return pytest.importorskip("openvino")


@pytest.fixture
def manager(ov: Any) -> Any:
    """A plugin manager offering only the OpenVINO and CPU providers."""
    from ortcore.plugins import PluginManager

    import ortcore_openvino.plugin

    cpu = pytest.importorskip("ortcore_cpu.plugin")
    pm = PluginManager(autoload=False)
    pm.register_plugin(ortcore_openvino.plugin, name="ortcore_openvino")
    pm.register_plugin(cpu, name="ortcore_cpu")
    return pm


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """How often OpenVINO built a group and loaded one from the cache, and the
    engines it built (``engines``) and loaded (``loaded``)."""
    from ortcore_openvino.provider import OpenVINOExecutionProvider as P

    seen: dict[str, Any] = {"builds": 0, "loads": 0, "engines": [], "loaded": []}
    build, deserialize = P.build, P.deserialize

    def counted_build(self: P, model: bytes, group: Any) -> Any:
        seen["builds"] += 1
        seen["engines"].append(build(self, model, group))
        return seen["engines"][-1]

    def counted_deserialize(self: P, data: bytes, group: Any) -> Any:
        seen["loads"] += 1
        seen["loaded"].append(deserialize(self, data, group))
        return seen["loaded"][-1]

    monkeypatch.setattr(P, "build", counted_build)
    monkeypatch.setattr(P, "deserialize", counted_deserialize)
    yield seen
