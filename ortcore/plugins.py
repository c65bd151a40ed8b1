"""Plugin discovery: entry points, the pluggy manager, and the provider table."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from ep_sdk import ExecutionProvider

from . import hookspecs
from .custom_ops import CustomOp
from .errors import InvalidArgument

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginManager",
    "ProviderEntry",
    "default_manager",
    "register_plugin",
]

ENTRY_POINT_GROUP = "ortcore.providers"
AUTOLOAD_ENV = "ORTCORE_DISABLE_PLUGIN_AUTOLOAD"

log = logging.getLogger("ortcore.plugins")


@dataclass(frozen=True)
class ProviderEntry:
    """One provider as ``ortcore providers`` lists it.

    Attributes:
        name: onnxruntime-style name (``CPUExecutionProvider``).
        aliases: short names accepted in ``providers=[...]``.
        plugin: the entry point (or registered plugin) that offered it.
        version: provider version.
        device: device type it runs on.
        available: whether it can be used on this machine.
        reason: why not, when unavailable.
        cls: the provider class (``None`` if the plugin failed to load).
    """

    name: str
    aliases: tuple[str, ...]
    plugin: str
    version: str
    device: str
    available: bool
    reason: str = ""
    cls: type[ExecutionProvider] | None = None
    priority: int = 100


class PluginManager:
    """Loads plugins once and answers which providers exist."""

    def __init__(self, *, autoload: bool | None = None) -> None:
        self._pm = pluggy.PluginManager("ortcore")
        self._pm.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._loaded = False
        self._autoload = autoload
        self._entries: dict[str, ProviderEntry] = {}
        self._broken: list[ProviderEntry] = []
        self._custom_ops: list[tuple[str, CustomOp]] = []

    # -- loading -----------------------------------------------------------

    def _autoload_enabled(self) -> bool:
        if self._autoload is not None:
            return self._autoload
        return os.environ.get(AUTOLOAD_ENV, "").strip() not in ("1", "true", "True", "yes")

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            if self._autoload_enabled():
                eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                for ep in sorted(eps, key=lambda e: (e.name, e.value)):
                    self._load_entry_point(ep)
            self._loaded = True

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint) -> None:
        label = f"{ep.name} ({ep.value})"
        try:
            plugin = ep.load()
        except Exception as exc:  # a broken plugin must never break the host
            log.warning("ortcore plugin %s failed to import: %s", label, exc)
            self._broken.append(_broken_entry(ep.name, label, f"import failed: {exc!r}"))
            return
        self._register(plugin, label)

    def _register(self, plugin: Any, label: str) -> None:
        try:
            self._pm.register(plugin, name=label)
        except ValueError:
            return  # already registered under this name
        except Exception as exc:  # pluggy.PluginValidationError and friends
            self._broken.append(_broken_entry(label, label, f"invalid plugin: {exc}"))
            return
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self._pm.unregister(plugin)
            self._broken.append(
                _broken_entry(
                    label,
                    label,
                    f"invalid plugin: {exc}; the hooks are declared in ortcore.hookspecs "
                    "(did you mean ortcore_providers?)",
                )
            )
            return
        for impl in self._pm.hook.ortcore_providers.get_hookimpls():
            if impl.plugin is plugin:
                self._collect(impl.function, label)
        for impl in self._pm.hook.ortcore_custom_ops.get_hookimpls():
            if impl.plugin is plugin:
                self._collect_ops(impl.function, label)

    def _collect_ops(self, hook: Any, label: str) -> None:
        try:
            ops = list(hook() or ())
        except Exception as exc:
            self._broken.append(_broken_entry(label, label, f"ortcore_custom_ops() raised {exc!r}"))
            return
        for op in ops:
            if isinstance(op, CustomOp):
                self._custom_ops.append((label, op))
            else:
                self._broken.append(
                    _broken_entry(repr(op), label, "ortcore_custom_ops() returned a non-CustomOp")
                )

    def _collect(self, hook: Any, label: str) -> None:
        try:
            classes = list(hook() or ())
        except Exception as exc:
            self._broken.append(_broken_entry(label, label, f"ortcore_providers() raised {exc!r}"))
            return
        for cls in classes:
            self._add_provider(cls, label)

    def _add_provider(self, cls: Any, label: str) -> None:
        if not (isinstance(cls, type) and issubclass(cls, ExecutionProvider)) or not cls.name:
            self._broken.append(
                _broken_entry(
                    repr(cls), label, "not an ep_sdk.ExecutionProvider subclass with a name"
                )
            )
            return
        if cls.name in self._entries:
            first = self._entries[cls.name].plugin
            self._broken.append(
                _broken_entry(cls.name, label, f"name already provided by plugin {first}")
            )
            return
        try:
            reason = cls.unavailable_reason()
        except Exception as exc:
            reason = f"unavailable_reason() raised {exc!r}"
        self._entries[cls.name] = ProviderEntry(
            name=cls.name,
            aliases=tuple(cls.aliases),
            plugin=label,
            version=str(cls.version),
            device=str(cls.device.type),
            available=reason is None,
            reason=reason or "",
            cls=cls,
            priority=cls.priority,
        )

    # -- public ------------------------------------------------------------

    def register_plugin(self, plugin: Any, name: str | None = None) -> None:
        """Register a plugin object (module or instance) by hand."""
        self._ensure_loaded()
        with self._lock:
            self._register(plugin, name or str(getattr(plugin, "__name__", repr(plugin))))

    def unregister_plugin(self, name: str) -> None:
        """Forget a plugin registered under ``name`` and its providers."""
        with self._lock:
            plugin = self._pm.get_plugin(name)
            if plugin is not None:
                self._pm.unregister(plugin)
            self._entries = {k: e for k, e in self._entries.items() if e.plugin != name}
            self._broken = [e for e in self._broken if e.plugin != name]
            self._custom_ops = [(p, op) for p, op in self._custom_ops if p != name]

    def entries(self) -> list[ProviderEntry]:
        """Every provider known, available or not, plus broken plugins."""
        self._ensure_loaded()
        with self._lock:
            return sorted(self._entries.values(), key=_order) + list(self._broken)

    def custom_ops(self) -> list[CustomOp]:
        """Custom operators offered by plugins' ``ortcore_custom_ops`` hooks."""
        self._ensure_loaded()
        with self._lock:
            return [op for _, op in self._custom_ops]

    def available(self) -> list[ProviderEntry]:
        """Available providers in default priority order (CPU last)."""
        return [e for e in self.entries() if e.available and e.cls is not None]

    def resolve(self, name: str) -> ProviderEntry:
        """Find a provider by its name or alias (case-insensitive for aliases).

        Raises:
            InvalidArgument: nothing by that name, or it is unavailable.
        """
        entries = self.entries()
        for e in entries:
            if e.cls is None:
                continue
            if (
                name == e.name
                or name.lower() in (a.lower() for a in e.aliases)
                or (name.lower() == e.name.lower())
            ):
                if not e.available:
                    raise InvalidArgument(
                        f"Provider {e.name!r} is installed but unavailable: {e.reason}"
                    )
                return e
        known = ", ".join(
            f"{e.name} ({'/'.join(e.aliases)})" if e.aliases else e.name
            for e in entries
            if e.cls is not None and e.available
        )
        raise InvalidArgument(
            f"Unknown provider {name!r}. Available providers: {known or 'none'}. "
            "Install a provider plugin (e.g. pip install ./plugins/cpu) or check "
            "`ortcore providers`."
        )


def _order(e: ProviderEntry) -> tuple[int, str]:
    return (-e.priority, e.name)


def _broken_entry(name: str, label: str, reason: str) -> ProviderEntry:
    return ProviderEntry(
        name=name,
        aliases=(),
        plugin=label,
        version="?",
        device="?",
        available=False,
        reason=reason,
    )


_default: PluginManager | None = None
_default_lock = threading.Lock()


def default_manager() -> PluginManager:
    """The process-wide plugin manager."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = PluginManager()
    return _default


def register_plugin(plugin: Any, name: str | None = None) -> None:
    """Register a plugin (a module or object with ``@ep_sdk.hookimpl`` functions)."""
    default_manager().register_plugin(plugin, name)


def provider_names(entries: Iterable[ProviderEntry]) -> list[str]:
    """Names of the given entries."""
    return [e.name for e in entries]
