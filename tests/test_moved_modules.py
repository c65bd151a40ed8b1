"""Modules that moved still import under their old names. The scale-out
modules now in ortcore-ray (``ortcore/_moved.py``): with a DeprecationWarning
and the new module's names, or, without ortcore-ray, an ImportError saying what
to install; ``ortcore batch`` without ortcore-ray says what to install; and
``ortcore.cli_logging``, now ``ortcore.cli.logs``."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import pytest

from ortcore._moved import MOVED
from ortcore.cli import main


def _fresh(old: str) -> Any:
    sys.modules.pop(old, None)
    return importlib.import_module(old)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> dict[str, types.ModuleType]:
    """A stand-in ``ortcore_ray`` whose modules each define two names, one public."""
    made = {"ortcore_ray": types.ModuleType("ortcore_ray")}
    for new in MOVED.values():
        module = types.ModuleType(new)
        module.__all__ = ["Public"]  # type: ignore[attr-defined]
        module.Public = object()  # type: ignore[attr-defined]
        module._private = object()  # type: ignore[attr-defined]
        made[new] = module
    for name, module in made.items():
        monkeypatch.setitem(sys.modules, name, module)
    for old in MOVED:
        monkeypatch.delitem(sys.modules, old, raising=False)
    return made


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_warns_and_gives_the_new_modules_names(
    old: str, stand_in: dict[str, types.ModuleType]
) -> None:
    new = stand_in[MOVED[old]]
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: import {MOVED[old]}"):
        shim = _fresh(old)
    assert shim.Public is new.Public and shim.__all__ == ["Public"]
    assert shim._private is new._private  # any other name, through __getattr__
    with pytest.raises(AttributeError):
        shim.nothing_of_that_name  # noqa: B018


@pytest.mark.parametrize("old", sorted(MOVED))
def test_without_ortcore_ray_an_old_name_says_what_to_install(
    old: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ortcore_ray", None)  # None: import fails
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.raises(ImportError, match=r"moved to ortcore_ray\..*pip install ortcore-ray"):
        importlib.import_module(old)
    assert old not in sys.modules


def test_batch_without_ortcore_ray_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.metadata

    real = importlib.metadata.entry_points

    def entry_points(group: str) -> Any:
        return [ep for ep in real(group=group) if ep.name != "batch"]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert main(["batch", "model.onnx", "in.parquet", "out", "--actors", "2"]) == 2
    err = capsys.readouterr().err
    assert "ortcore batch needs ortcore-ray" in err and "pip install" in err


def test_cli_logging_is_an_alias_of_cli_logs() -> None:
    from ortcore.cli import logs

    sys.modules.pop("ortcore.cli_logging", None)
    with pytest.warns(DeprecationWarning, match=r"import ortcore.cli.logs instead"):
        old = importlib.import_module("ortcore.cli_logging")
    assert old.command_logging is logs.command_logging and old.LOGGERS is logs.LOGGERS
