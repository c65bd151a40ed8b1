"""onnxruntime's provider-library registration, the Python way.

onnxruntime 1.22+ loads a plugin EP from a native library with
``register_execution_provider_library(name, path)``; its devices then appear
in ``get_ep_devices()``. An ortcore provider is a Python plugin, so here
``path`` names one: an importable module (``"ortcore_openvino.plugin"``), a
``.py`` file, or a package folder; the module is registered with the
process's plugin manager under ``name``, exactly as an entry point would be
(its providers are listed, selectable by name, by device and by policy).
``unregister_execution_provider_library(name)`` forgets it again. A native
library (``.so``, ``.dll``, ``.dylib``) is refused with a clear error: ortcore
cannot load onnxruntime's binary EP ABI.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import threading
from pathlib import Path
from types import ModuleType

from .errors import Fail, InvalidArgument
from .plugins import default_manager, describe_error

__all__ = ["register_execution_provider_library", "unregister_execution_provider_library"]

_NATIVE = (".so", ".dll", ".dylib", ".pyd")
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_lock = threading.Lock()
_registered: dict[str, str] = {}  # registration name -> the plugin label in the manager


def _label(name: str) -> str:
    return f"{name} (register_execution_provider_library)"


def _import_file(name: str, path: Path) -> ModuleType:
    """Import a ``.py`` file or a package folder under a private module name."""
    if path.is_dir():
        init = path / "__init__.py"
        if not init.is_file():
            raise Fail(f"{path} is a folder without __init__.py, not a Python package")
        spec = importlib.util.spec_from_file_location(
            f"ortcore_ep_library_{name}", init, submodule_search_locations=[str(path)]
        )
    else:
        spec = importlib.util.spec_from_file_location(f"ortcore_ep_library_{name}", path)
    if spec is None or spec.loader is None:
        raise Fail(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module


def _load(name: str, path: str) -> ModuleType:
    candidate = Path(path)
    if candidate.suffix.lower() in _NATIVE or any(
        s in _NATIVE for s in (x.lower() for x in candidate.suffixes)
    ):
        raise Fail(
            f"register_execution_provider_library({name!r}, {path!r}): {candidate.name} is a "
            "native onnxruntime provider library; ortcore's providers are Python plugins. Give "
            "the plugin module instead (an importable module name, a .py file or a package "
            "folder), or install an ortcore provider package (`ortcore providers` lists them)"
        )
    if candidate.exists():
        return _import_file(name, candidate)
    if os.sep in path or (os.altsep and os.altsep in path) or candidate.suffix == ".py":
        raise Fail(f"register_execution_provider_library({name!r}, {path!r}): no such file")
    if not _MODULE_NAME.fullmatch(path):
        raise Fail(
            f"register_execution_provider_library({name!r}, {path!r}): neither a file nor a "
            "Python module name"
        )
    return importlib.import_module(path)


def register_execution_provider_library(
    registration_name: str, path: str | os.PathLike[str]
) -> None:
    """Register the provider plugin at ``path`` under ``registration_name``.

    ``path``: an importable module name, a ``.py`` file or a package folder
    whose ``@ep_sdk.hookimpl`` functions offer providers (or custom
    operators), as an entry point of group ``ortcore.providers`` names.

    Raises:
        InvalidArgument: an empty name, or a name already registered.
        Fail: a native library, a path that does not exist, a module that
            fails to import, or a plugin that offers nothing (each names the
            registration and the reason).
    """
    name = str(registration_name)
    if not name.strip():
        raise InvalidArgument("register_execution_provider_library: the registration name is empty")
    target = os.fspath(path)
    with _lock:
        if name in _registered:
            raise InvalidArgument(
                f"an execution provider library is already registered as {name!r} "
                "(unregister_execution_provider_library first)"
            )
        try:
            module = _load(name, target)
        except Fail:
            raise
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:  # the plugin's import failed: say so, keep the host
            raise Fail(
                f"register_execution_provider_library({name!r}, {target!r}): importing the "
                f"plugin failed: {describe_error(exc)}"
            ) from None
        manager = default_manager()
        label = _label(name)
        manager.register_plugin(module, name=label)
        offered, ops = manager.offered_by(label)
        if not any(e.cls is not None for e in offered) and not ops:
            why = "; ".join(e.reason for e in offered if e.reason) or (
                "it implements neither ortcore_providers nor ortcore_custom_ops"
            )
            manager.unregister_plugin(label)
            raise Fail(
                f"register_execution_provider_library({name!r}, {target!r}): the plugin "
                f"offers no provider: {why}"
            )
        _registered[name] = label


def unregister_execution_provider_library(registration_name: str) -> None:
    """Forget the plugin registered as ``registration_name`` and its providers.

    Sessions already created keep the providers they hold.

    Raises:
        Fail: nothing is registered under that name.
    """
    with _lock:
        label = _registered.pop(str(registration_name), None)
        if label is None:
            raise Fail(f"no execution provider library is registered as {registration_name!r}")
        default_manager().unregister_plugin(label)
