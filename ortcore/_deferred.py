"""Deferred third-party modules: sympy, which onnx-ir imports and a session rarely uses.

onnx-ir (ortcore's graph IR) imports sympy at module level, for the arithmetic
of symbolic dimensions (``SymbolicDim("N") + 1``), and builds a table of sympy
functions in ``onnx_ir._symbolic_shapes`` when that module is imported. Loading
sympy takes 0.3-0.4 s, longer than everything else a first session needs; a
session that never does arithmetic on a symbolic dimension never uses it.

:func:`defer_sympy` (called by ``import ortcore``, before anything imports
onnx-ir) puts a stand-in module in ``sys.modules`` under each of those names.
The first access to any attribute of a stand-in imports the real module (under
a lock, once), copies its namespace into the stand-in and answers from it, so
``import sympy; sympy.Symbol``, ``from sympy import Expr`` and onnx-ir's own
symbolic arithmetic behave as without the deferral, only the import's cost
moves to the first use. Nothing is deferred when sympy or onnx-ir is already
imported, when onnx-ir has no ``_symbolic_shapes`` module (another layout: it
would load sympy anyway), or when the environment sets
``ORTCORE_DEFER_IMPORTS=0``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import Any

__all__ = ["DeferredModule", "defer_sympy", "is_deferred"]

_LOCK = threading.RLock()

# The modules deferred, in the order they are checked: sympy itself, and the
# onnx-ir module that reads sympy's functions into a table at import.
_SYMPY_USERS = ("sympy", "onnx_ir._symbolic_shapes")


class DeferredModule(types.ModuleType):
    """A stand-in in ``sys.modules`` that imports the real module on first attribute access."""

    def __getattr__(self, attr: str) -> Any:
        # Called only for names not yet in the stand-in's namespace: every
        # name before the first load, and afterwards names the real module
        # gained later (a submodule imported since, say).
        return getattr(_load(self), attr)


def _load(stand_in: DeferredModule) -> types.ModuleType:
    """The real module behind ``stand_in``, imported the first time."""
    with _LOCK:
        real = stand_in.__dict__.get("_ortcore_deferred_real")
        if real is None:
            name = stand_in.__name__
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]  # the import system then finds and runs the real one
            try:
                real = importlib.import_module(name)
            except BaseException:
                sys.modules.setdefault(name, stand_in)
                raise
            stand_in.__dict__.update(real.__dict__)
            stand_in.__dict__["_ortcore_deferred_real"] = real
        return real  # type: ignore[no-any-return]


def is_deferred(module: object) -> bool:
    """Whether ``module`` is a stand-in whose real module has not been imported yet."""
    return isinstance(module, DeferredModule) and "_ortcore_deferred_real" not in module.__dict__


def defer_sympy() -> bool:
    """Defer sympy (and onnx-ir's table of sympy functions) until first used.

    Returns whether the stand-ins were installed; see the module's docstring
    for when they are not.
    """
    if os.environ.get("ORTCORE_DEFER_IMPORTS", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    with _LOCK:
        if any(name in sys.modules for name in ("onnx_ir", *_SYMPY_USERS)):
            return False
        try:
            sympy = importlib.util.find_spec("sympy")
            onnx_ir = importlib.util.find_spec("onnx_ir")
        except (ImportError, ValueError):
            return False
        if sympy is None or onnx_ir is None:
            return False
        table = None
        for folder in onnx_ir.submodule_search_locations or ():
            path = os.path.join(folder, "_symbolic_shapes.py")
            if os.path.isfile(path):
                table = importlib.util.spec_from_file_location(_SYMPY_USERS[1], path)
                break
        if table is None:
            return False
        # Each stand-in carries its module's spec, so ``importlib.util.find_spec``
        # (how programs ask whether sympy is installed) answers as before.
        for name, spec in zip(_SYMPY_USERS, (sympy, table)):
            stand_in = DeferredModule(name)
            stand_in.__spec__ = spec
            sys.modules[name] = stand_in
        return True
