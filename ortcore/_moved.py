"""Modules that moved out of the core, still importable under their old names.

The scale-out modules (``ortcore.ray``, ``ortcore.ray_batch``,
``ortcore.batching``, ``ortcore.batch_check``, ``ortcore.ray_errors``) are
the ``ortcore-ray`` distribution's since 0.2 (package ``ortcore_ray``). Each
old module is a shim: importing it warns (``DeprecationWarning``) and gives the
new module's names; without ``ortcore-ray`` installed it raises an
``ImportError`` that says what to install. The shims go in ortcore 0.3.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "moved"]

MOVED = {
    "ortcore.ray": "ortcore_ray.inference",
    "ortcore.ray_batch": "ortcore_ray.run",
    "ortcore.batching": "ortcore_ray.columns",
    "ortcore.batch_check": "ortcore_ray.checks",
    "ortcore.ray_errors": "ortcore_ray.errors",
}
"""Old module -> the module of ``ortcore-ray`` that replaces it."""

_INSTALL = "pip install ortcore-ray (from a clone of ortcore: pip install ./plugins/ray)"


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def moved(old: str, namespace: dict[str, Any]) -> ModuleType:
    """Fill the shim ``old``'s ``namespace`` from its new module, with a warning.

    The new module's ``__all__`` names are copied; any other name resolves
    through the shim's ``__getattr__`` (PEP 562).

    Raises:
        ImportError: ``ortcore-ray`` is not installed.
    """
    new = MOVED[old]
    try:
        module = importlib.import_module(new)
    except ImportError as exc:
        if _installed(new.split(".")[0]):
            raise  # ortcore-ray is there, something it imports is not
        raise ImportError(
            f"{old} moved to {new}, in the ortcore-ray distribution, which is not "
            f"installed: {_INSTALL}; or pip install 'ortcore[ray]'",
            name=old,
        ) from exc
    warnings.warn(
        f"{old} is deprecated: import {new} (distribution ortcore-ray) instead; "
        f"{old} goes in ortcore 0.3",
        DeprecationWarning,
        stacklevel=3,
    )
    names = list(getattr(module, "__all__", ()))
    namespace.update({name: getattr(module, name) for name in names})
    namespace["__all__"] = names
    namespace["__getattr__"] = lambda name: getattr(module, name)
    return module
