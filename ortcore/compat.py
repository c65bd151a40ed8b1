"""Make ``import onnxruntime`` give ortcore: an import hook switched on by one call.

After :func:`install_as_onnxruntime`, ``onnxruntime`` is the ``ortcore``
module itself and ``onnxruntime.X.Y`` is ``ortcore.X.Y``
(``onnxruntime.capi.onnxruntime_pybind11_state``, ``onnxruntime.backend``,
``onnxruntime.datasets``, ...), so a program written for onnxruntime runs
unchanged and ``except onnxruntime.capi.onnxruntime_pybind11_state.Fail``
catches what ortcore raises. Nothing happens until the call is made: the real
onnxruntime, if installed, stays importable in processes that do not call it.

To run a program unchanged without editing it::

    python -m ortcore.as_onnxruntime program.py [args...]
    python -m ortcore.as_onnxruntime -m package.module [args...]
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Sequence
from types import ModuleType

from .errors import Fail

__all__ = ["install_as_onnxruntime", "is_installed", "uninstall_onnxruntime_alias"]

ALIAS = "onnxruntime"
TARGET = "ortcore"

_lock = threading.Lock()


def _target_name(fullname: str) -> str | None:
    """``ortcore.X`` for ``onnxruntime.X``; ``None`` for other names."""
    if fullname == ALIAS:
        return TARGET
    if fullname.startswith(ALIAS + "."):
        return TARGET + fullname[len(ALIAS) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Hands out the ortcore module itself under the onnxruntime name."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._own_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias spec on the module; the module
        # stays ortcore's (its name, its spec), only reachable by two names.
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``onnxruntime`` and ``onnxruntime.*`` as ortcore modules."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        name = _target_name(fullname)
        if name is None:
            return None
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: `onnxruntime` is ortcore in this process "
                f"(ortcore.install_as_onnxruntime()), and ortcore has no {name!r}. "
                "See docs/onnxruntime-compat.md for what ortcore covers.",
                name=fullname,
            )
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(name), is_package=found.submodule_search_locations is not None
        )


def _finder() -> _AliasFinder | None:
    return next((f for f in sys.meta_path if isinstance(f, _AliasFinder)), None)


def is_installed() -> bool:
    """Whether ``import onnxruntime`` gives ortcore in this process."""
    return _finder() is not None


def install_as_onnxruntime() -> None:
    """Make ``onnxruntime`` and its submodules import as ortcore in this process.

    Call it before the program imports onnxruntime; calling it again does
    nothing.

    Raises:
        Fail: the real onnxruntime is already imported in this process (its
            objects and ortcore's cannot be mixed); call this first, or run
            the program with ``python -m ortcore.as_onnxruntime``.
    """
    with _lock:
        if _finder() is not None:
            return
        loaded = sys.modules.get(ALIAS)
        if loaded is not None and loaded is not sys.modules.get(TARGET):
            where = getattr(loaded, "__file__", None) or "?"
            raise Fail(
                f"install_as_onnxruntime(): the real onnxruntime ({where}) is already "
                "imported in this process, so `onnxruntime` cannot become ortcore. Call "
                "ortcore.install_as_onnxruntime() before anything imports onnxruntime, or "
                "run the program with `python -m ortcore.as_onnxruntime program.py`."
            )
        sys.meta_path.insert(0, _AliasFinder())


def uninstall_onnxruntime_alias() -> None:
    """Undo :func:`install_as_onnxruntime`: forget the ``onnxruntime`` aliases
    (modules already imported under that name keep working)."""
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AliasFinder)]
        for key in [k for k in sys.modules if _target_name(k) is not None]:
            target = _target_name(key)
            if target is not None and sys.modules[key] is sys.modules.get(target):
                del sys.modules[key]
