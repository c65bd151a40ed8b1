"""The tests import the installed ``ortcore_cuda`` (under tox: the built
wheel); in a checkout's environment without it, the source tree is used."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import ortcore_cuda  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A plugin manager with the CUDA provider (on the emulation) and the CPU provider."""
    from ortcore_cuda.emulator import compiler

    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    monkeypatch.setenv("ORTCORE_CUDA_EMULATE", "1")
    from ortcore.plugins import PluginManager

    import ortcore_cuda.plugin

    cpu = pytest.importorskip("ortcore_cpu.plugin")
    pm = PluginManager(autoload=False)
    pm.register_plugin(ortcore_cuda.plugin, name="ortcore_cuda")
    pm.register_plugin(cpu, name="ortcore_cpu")
    return pm
