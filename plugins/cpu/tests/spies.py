"""Test helper: what a kernel module's Cython build gets called with."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def record_calls(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, index: int = -1
) -> list[Any]:
    """Stand a proxy in for ``module.ext`` whose function ``name`` records
    argument ``index`` of each call (the thread count, where it is last), then
    runs the real one; returns the list it records into."""
    seen: list[Any] = []
    real = module.ext

    class Spy:
        def __getattr__(self, attr: str) -> Any:
            return getattr(real, attr)

    def call(*args: Any) -> Any:
        seen.append(args[index])
        return getattr(real, name)(*args)

    spy = Spy()
    setattr(spy, name, call)
    monkeypatch.setattr(module, "ext", spy)
    return seen
