"""Fixtures: the TensorRT and CPU providers in a plugin manager of their own.

The tests import the installed ``ortcore_tensorrt`` (under tox: the built
wheel); in a checkout's environment without it, the source tree is used.
Tests that need TensorRT itself skip when neither ``tensorrt`` nor
``tensorrt_rtx`` imports. No test here needs a GPU except those marked
``gpu``: building engines works without one; running them is tested against
the stand-in runtime of ``fake_trt.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import ortcore_tensorrt  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fake_trt, models


@pytest.fixture
def trt() -> Any:
    """The TensorRT module the provider would use; skips the test without one."""
    from ortcore_tensorrt import _module

    found = _module.find()
    if not isinstance(found, _module.Found):
        pytest.skip(f"no TensorRT module: {found}")
    return _module.load(found.name)


def _manager() -> Any:
    from ortcore.plugins import PluginManager

    import ortcore_tensorrt.plugin

    cpu = pytest.importorskip("ortcore_cpu.plugin")
    pm = PluginManager(autoload=False)
    pm.register_plugin(ortcore_tensorrt.plugin, name="ortcore_tensorrt")
    pm.register_plugin(cpu, name="ortcore_cpu")
    return pm


@pytest.fixture
def manager(trt: Any) -> Any:
    """A plugin manager offering only the TensorRT and CPU providers."""
    return _manager()


@pytest.fixture
def runnable(monkeypatch: pytest.MonkeyPatch, trt: Any) -> Any:
    """A plugin manager (TensorRT and CPU) in which the provider is available
    on this GPU-less machine: engines are still built by the real TensorRT
    builder; deserializing and running them is left to the test (``fake``)."""
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    monkeypatch.setattr(P, "unavailable_reason", classmethod(lambda cls: None))
    return _manager()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, runnable: Any, trt: Any) -> Any:
    """The stand-in runtime and memory of ``fake_trt.py`` in place of the
    GPU's: plans are the group's ONNX model, run by the CPU provider."""
    import fake_trt

    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    memory = fake_trt.FakeMemory()
    module = fake_trt.FakeModule(trt, memory)
    monkeypatch.setattr(P, "trt", property(lambda self: module))
    monkeypatch.setattr(P, "memory", property(lambda self: memory))
    built: list[Any] = []

    def build_plan(self: P, model: bytes, profile: Any, store: Any) -> bytes:
        built.append(profile)
        return fake_trt.fake_plan(model, profile)

    monkeypatch.setattr(P, "_build_plan", build_plan)
    module.built = built
    return module
