"""Plugin discovery: entry points, the pluggy manager, and the provider table.

How plugins are found and judged:

* **Once, under a lock, in sorted order.** The entry points of group
  ``ortcore.providers`` are listed once, sorted by (name, value); each is
  imported at most once, under the manager's lock.
* **Only what is needed.** Listing providers (``entries()``, ``available()``,
  ``custom_ops()``, ``get_available_providers()``, ``ortcore providers``, a
  session given no ``providers=``) imports every entry point. Resolving a
  name (a session given ``providers=[...]``) first imports only the entry
  points named after it: ``cpu``, ``CPU`` and ``CPUExecutionProvider`` all
  mean entry point ``cpu`` (compared lowercased, without the
  ``ExecutionProvider`` suffix). The others are imported only when that
  leaves the name unknown, or when one of them could still win the name
  (see below). A slow or broken plugin thus costs nothing to a session that
  does not need it.
* **A broken plugin never breaks the host.** Whatever a plugin raises while
  it is imported, while its hooks run, or in ``unavailable_reason()`` --
  ``SystemExit`` included -- is caught; only ``KeyboardInterrupt`` and
  ``GeneratorExit`` go through. The plugin is listed as unavailable with the
  reason, a warning goes to the ``ortcore.plugins`` logger, and the other
  plugins load as usual. Invalid plugins and refused duplicate names are
  listed and logged the same way.
* **A provider name has one owner.** When several plugins offer the same
  provider name, the one with the strongest claim keeps it; the others are
  listed as unavailable with a reason naming the winner, and a warning is
  logged. Claims, strongest first:

  1. the entry point of the distribution that ships the name in this
     repository (``CPUExecutionProvider`` belongs to ``ortcore-cpu``, see
     :data:`OWNER_DISTRIBUTIONS`);
  2. an entry point named after the provider (``cpu`` for
     ``CPUExecutionProvider``);
  3. a plugin registered by hand (:func:`register_plugin`), the first
     registered winning;
  4. any other entry point, the first in sorted order winning.

  The winner does not depend on which entry points happened to be imported
  first, so an entry point that sorts first cannot take over a name it does
  not own.
* **Compatibility before import.** Before an entry point is imported, its
  distribution's metadata is read (once per distribution and process): a
  plugin whose requirement on ``ortcore-ep-sdk`` excludes the installed SDK
  (``ep_sdk.__version__``) is never imported, and is listed as unavailable
  with its range, the installed version and the pip command that fixes it
  (:mod:`ortcore.sdk_compat`); naming it in a session raises that reason. A
  plugin that declares no range (one from before SDK 1.1) is loaded, with
  one info-level log line saying so. Hand-registered plugins have no
  metadata and are not checked.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pluggy

import ep_sdk
from ep_sdk import ExecutionProvider

from . import hookspecs
from .custom_ops import CustomOp
from .errors import InvalidArgument
from .sdk_compat import SdkVerdict, judge_entry_point

__all__ = [
    "ENTRY_POINT_GROUP",
    "OWNER_DISTRIBUTIONS",
    "PluginManager",
    "ProviderEntry",
    "default_manager",
    "provider_key",
    "register_plugin",
]

ENTRY_POINT_GROUP = "ortcore.providers"
AUTOLOAD_ENV = "ORTCORE_DISABLE_PLUGIN_AUTOLOAD"

OWNER_DISTRIBUTIONS: Mapping[str, str] = {
    "CPUExecutionProvider": "ortcore-cpu",
    "CUDAExecutionProvider": "ortcore-cuda",
    "TensorrtExecutionProvider": "ortcore-tensorrt",
    "OpenVINOExecutionProvider": "ortcore-openvino",
}
"""Provider name -> the distribution that owns it; its entry point wins the name."""

# What a plugin may not swallow: the user's Ctrl-C and generator shutdown. Anything
# else it raises, SystemExit included, is the plugin's failure, not the host's.
_FATAL = (KeyboardInterrupt, GeneratorExit)

_SUFFIX = "executionprovider"

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
        priority: default order when no providers are named (higher first).
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


@dataclass(frozen=True)
class _Origin:
    """Where a plugin came from: an entry point, or the n-th hand registration."""

    label: str
    ep: importlib.metadata.EntryPoint | None = None
    seq: int = 0


class _Invalid(Exception):
    """A hook returned something that is not a named provider class."""


# (claim rank, entry-point name, entry-point value, registration number): lower wins.
_Claim = tuple[int, str, str, int]


class PluginManager:
    """Loads plugins once and answers which providers exist (see the module docs)."""

    def __init__(self, *, autoload: bool | None = None) -> None:
        self._pm = pluggy.PluginManager("ortcore")
        self._pm.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._loaded = False
        self._autoload = autoload
        self._pending: list[importlib.metadata.EntryPoint] | None = None
        self._registrations = 0
        self._entries: dict[str, ProviderEntry] = {}
        self._claims: dict[str, _Claim] = {}
        self._broken: list[ProviderEntry] = []
        self._refused: set[tuple[str, str]] = set()  # (provider name, plugin refused it)
        self._custom_ops: list[tuple[str, CustomOp]] = []
        self._sdk_verdicts: dict[str, SdkVerdict] = {}  # distribution -> its SDK range, judged
        # entry-point key -> (plugin label, why it was refused before import)
        self._incompatible: dict[str, tuple[str, str]] = {}

    # -- loading -----------------------------------------------------------

    def _autoload_enabled(self) -> bool:
        if self._autoload is not None:
            return self._autoload
        return os.environ.get(AUTOLOAD_ENV, "").strip() not in ("1", "true", "True", "yes")

    def _discover(self) -> list[importlib.metadata.EntryPoint]:
        """The entry points not imported yet, in sorted order (listed once)."""
        if self._pending is None:
            self._pending = []
            if self._autoload_enabled():
                try:
                    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                except _FATAL:
                    raise
                except BaseException as exc:  # unreadable metadata: run without plugins
                    log.warning("ortcore: listing entry points failed: %s", describe_error(exc))
                    eps = importlib.metadata.EntryPoints(())
                self._pending = sorted(eps, key=lambda e: (e.name, e.value))
        return self._pending

    def _load_where(self, wanted: Callable[[importlib.metadata.EntryPoint], bool]) -> None:
        """Import the pending entry points ``wanted`` accepts, in sorted order."""
        pending = self._discover()
        while True:
            # A plugin's import may itself ask for providers (re-entering under the
            # RLock), so take one entry point at a time off the shared list.
            ep = next((e for e in pending if wanted(e)), None)
            if ep is None:
                return
            pending.remove(ep)
            self._load_entry_point(ep)

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._load_where(lambda ep: True)
            self._loaded = True

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint) -> None:
        label = f"{ep.name} ({ep.value})"
        if not self._sdk_allows(ep, label):
            return
        try:
            plugin = ep.load()
        except _FATAL:
            raise
        except BaseException as exc:  # SystemExit too: a broken plugin must never end the host
            self._mark_broken(label, label, f"failed to import: {describe_error(exc)}")
            return
        self._register(plugin, _Origin(label, ep=ep))

    def _sdk_allows(self, ep: importlib.metadata.EntryPoint, label: str) -> bool:
        """Whether ``ep``'s distribution may be imported with the installed SDK;
        when not, it is listed as incompatible (see the module docs)."""
        version, reason = judge_entry_point(ep, label, self._sdk_verdicts, ep_sdk.__version__)
        if not reason:
            return True
        log.warning("ortcore plugin %s: %s", label, reason)
        self._incompatible[_key(ep.name)] = (label, reason)
        entry = _broken_entry(label, label, reason)
        self._broken.append(dataclasses.replace(entry, version=version))
        return False

    def _register(self, plugin: Any, origin: _Origin) -> None:
        label = origin.label
        try:
            self._pm.register(plugin, name=label)
        except ValueError:
            log.debug("ortcore plugin %s is already registered", label)
            return
        except _FATAL:
            raise
        except BaseException as exc:  # pluggy.PluginValidationError and friends
            self._mark_broken(label, label, f"invalid plugin: {describe_error(exc)}")
            return
        try:
            self._pm.check_pending()
        except _FATAL:
            raise
        except BaseException as exc:
            self._pm.unregister(plugin)
            self._mark_broken(
                label,
                label,
                f"invalid plugin: {describe_error(exc)}; the hooks are declared in "
                "ortcore.hookspecs (did you mean ortcore_providers?)",
            )
            return
        for impl in self._pm.hook.ortcore_providers.get_hookimpls():
            if impl.plugin is plugin:
                self._collect(impl.function, origin)
        for impl in self._pm.hook.ortcore_custom_ops.get_hookimpls():
            if impl.plugin is plugin:
                self._collect_ops(impl.function, label)

    def _collect_ops(self, hook: Callable[[], Any], label: str) -> None:
        try:
            ops = list(hook() or ())
        except _FATAL:
            raise
        except BaseException as exc:
            self._mark_broken(label, label, f"ortcore_custom_ops() raised {describe_error(exc)}")
            return
        for op in ops:
            if isinstance(op, CustomOp):
                self._custom_ops.append((label, op))
            else:
                self._mark_broken(
                    _safe_repr(op), label, "ortcore_custom_ops() returned a non-CustomOp"
                )

    def _collect(self, hook: Callable[[], Any], origin: _Origin) -> None:
        try:
            classes = list(hook() or ())
        except _FATAL:
            raise
        except BaseException as exc:
            self._mark_broken(
                origin.label, origin.label, f"ortcore_providers() raised {describe_error(exc)}"
            )
            return
        for cls in classes:
            self._add_provider(cls, origin)

    def _add_provider(self, cls: Any, origin: _Origin) -> None:
        label = origin.label
        invalid = "not an ep_sdk.ExecutionProvider subclass with a name"
        try:
            if not (isinstance(cls, type) and issubclass(cls, ExecutionProvider)):
                raise _Invalid
            name = cls.name
            if not (isinstance(name, str) and name):
                raise _Invalid
            aliases = (cls.aliases,) if isinstance(cls.aliases, str) else tuple(cls.aliases)
            version, device, priority = str(cls.version), str(cls.device.type), int(cls.priority)
        except _FATAL:
            raise
        except BaseException as exc:
            if not isinstance(exc, _Invalid):
                invalid += f" (reading its attributes raised {describe_error(exc)})"
            self._mark_broken(_safe_repr(cls), label, invalid)
            return
        claim = _claim(origin, name)
        current = self._entries.get(name)
        if current is not None and claim >= self._claims[name]:
            self._refuse(name, label)
            return
        try:
            reason = cls.unavailable_reason()
        except _FATAL:
            raise
        except BaseException as exc:
            reason = f"unavailable_reason() raised {describe_error(exc)}"
            log.warning("ortcore provider %s (plugin %s): %s", name, label, reason)
        self._claims[name] = claim
        self._entries[name] = ProviderEntry(
            name=name,
            aliases=aliases,
            plugin=label,
            version=version,
            device=device,
            available=reason is None,
            reason="" if reason is None else str(reason),
            cls=cls,
            priority=priority,
        )
        if current is not None:  # the newcomer's claim is stronger: the holder gives it up
            self._refuse(name, current.plugin)

    def _refuse(self, name: str, loser: str) -> None:
        """List ``loser``'s offer of provider ``name`` as refused in favour of the
        plugin holding the name now; earlier refusals of the name are updated to
        name that plugin too."""
        winner, claim = self._entries[name].plugin, self._claims[name]

        def reason(who: str) -> str:
            return (
                f"provider name {name} is already provided by plugin {winner}, which "
                f"takes precedence ({_why(claim, name)}); plugin {who}'s {name} is refused"
            )

        self._broken = [
            _broken_entry(name, b.plugin, reason(b.plugin))
            if b.name == name and (name, b.plugin) in self._refused
            else b
            for b in self._broken
        ]
        self._refused.add((name, loser))
        self._mark_broken(name, loser, reason(loser))

    def _mark_broken(self, name: str, label: str, reason: str) -> None:
        log.warning("ortcore plugin %s: %s", label, reason)
        self._broken.append(_broken_entry(name, label, reason))

    def _find(self, name: str) -> ProviderEntry | None:
        low = name.lower()
        for e in sorted(self._entries.values(), key=_order):
            if name == e.name or low == e.name.lower() or low in (a.lower() for a in e.aliases):
                return e
        return None

    def _settled(self, name: str) -> bool:
        """Whether ``name`` resolves and no entry point not yet imported could win it."""
        e = self._find(name)
        if e is None:
            return False
        claim = self._claims[e.name]
        return all(_claim(_Origin("", ep=ep), e.name) > claim for ep in self._discover())

    # -- public ------------------------------------------------------------

    @property
    def fully_loaded(self) -> bool:
        """Whether every entry point has been imported (or autoload is off)."""
        return self._loaded or (self._pending is not None and not self._pending)

    def load(self, names: Iterable[str] | None = None) -> None:
        """Import the entry points needed to resolve ``names`` (every one when ``None``).

        For each name, the entry points named after it are imported first
        (``cpu`` for ``cpu`` or ``CPUExecutionProvider``); the rest follow only
        if a name is still unknown or another entry point could still win it.
        Never raises for a broken plugin: it is listed in :meth:`entries`.
        """
        if names is None:
            self._ensure_loaded()
            return
        if self._loaded:
            return
        names = list(names)
        with self._lock:
            keys = {_key(n) for n in names}
            self._load_where(lambda ep: _key(ep.name) in keys)
            if not all(self._settled(n) for n in names):
                self._ensure_loaded()

    def installed_names(self) -> list[str]:
        """What is installed, without importing anything: the names of the
        providers known so far (imported or registered by hand), then the
        names of the entry points not imported yet (``openvino``)."""
        with self._lock:
            known = [e.name for e in sorted(self._entries.values(), key=_order)]
            return known + [ep.name for ep in self._discover()]

    def register_plugin(self, plugin: Any, name: str | None = None) -> None:
        """Register a plugin object (module or instance) by hand.

        A provider name it offers that the owning distribution's entry point,
        or an entry point named after the provider, also offers stays theirs;
        it wins the name from any other entry point (see the module docs). The
        refused offer is listed as unavailable.
        """
        with self._lock:
            self._registrations += 1
            label = name or str(getattr(plugin, "__name__", repr(plugin)))
            self._register(plugin, _Origin(label, seq=self._registrations))

    def unregister_plugin(self, name: str) -> None:
        """Forget a plugin registered under ``name`` and its providers."""
        with self._lock:
            plugin = self._pm.get_plugin(name)
            if plugin is not None:
                self._pm.unregister(plugin)
            self._entries = {k: e for k, e in self._entries.items() if e.plugin != name}
            self._claims = {k: c for k, c in self._claims.items() if k in self._entries}
            self._broken = [e for e in self._broken if e.plugin != name]
            self._refused = {r for r in self._refused if r[1] != name}
            self._custom_ops = [(p, op) for p, op in self._custom_ops if p != name]
            self._incompatible = {k: v for k, v in self._incompatible.items() if v[0] != name}

    def offered_by(self, plugin: str) -> tuple[list[ProviderEntry], list[CustomOp]]:
        """What the plugin registered as ``plugin`` offers, loading nothing: its
        providers (refused and broken offers included) and its custom operators."""
        with self._lock:
            found = [e for e in self._entries.values() if e.plugin == plugin]
            found += [e for e in self._broken if e.plugin == plugin]
            return found, [op for p, op in self._custom_ops if p == plugin]

    def incompatible_reason(self, name: str) -> str | None:
        """Why the plugin whose entry point is named after ``name`` was refused
        before import (its SDK range excludes the installed SDK), or ``None``."""
        self.load([name])
        with self._lock:
            refused = self._incompatible.get(_key(name))
            return None if refused is None else f"plugin {refused[0]} is {refused[1]}"

    def entries(self) -> list[ProviderEntry]:
        """Every provider known, available or not, plus broken plugins (loads all)."""
        self._ensure_loaded()
        with self._lock:
            return sorted(self._entries.values(), key=_order) + list(self._broken)

    def custom_ops(self, *, load_all: bool = True) -> list[CustomOp]:
        """Custom operators offered by plugins' ``ortcore_custom_ops`` hooks.

        Args:
            load_all: import every entry point first; ``False`` answers from
                the plugins imported so far.
        """
        if load_all:
            self._ensure_loaded()
        with self._lock:
            return [op for _, op in self._custom_ops]

    def available(self) -> list[ProviderEntry]:
        """Available providers in default priority order (CPU last)."""
        return [e for e in self.entries() if e.available and e.cls is not None]

    def resolve(self, name: str, *, available: bool = True) -> ProviderEntry:
        """Find a provider by its name or alias (case-insensitive), importing
        only the entry points needed (see :meth:`load`).

        Args:
            available: refuse a provider that is installed but unavailable
                (``False``: return it too, e.g. to ask it how it would
                partition a model without running it).

        Raises:
            InvalidArgument: nothing by that name (the message lists the
                available providers and the plugins that failed to load), or
                it is unavailable (when ``available``).
        """
        self.load([name])
        with self._lock:
            e = self._find(name)
            if e is not None and e.cls is not None and not available:
                return e
            if e is not None:
                if not e.available:
                    raise InvalidArgument(
                        f"Provider {e.name!r} (plugin {e.plugin}) is installed but "
                        f"unavailable: {e.reason}"
                    )
                return e
            refused = self._incompatible.get(_key(name))
            if refused is not None:
                raise InvalidArgument(
                    f"Provider {name!r} cannot be used: plugin {refused[0]} is {refused[1]}"
                )
            known = ", ".join(
                f"{e.name} ({'/'.join(e.aliases)})" if e.aliases else e.name
                for e in sorted(self._entries.values(), key=_order)
                if e.available
            )
            key = _key(name)
            broken = sorted(self._broken, key=lambda b: _key(b.plugin.split(" ")[0]) != key)
            failed = "; ".join(f"plugin {b.plugin}: {b.reason}" for b in broken)
        raise InvalidArgument(
            f"Unknown provider {name!r}. Available providers: {known or 'none'}. "
            + (f"Plugins that failed to load or were refused: {failed}. " if failed else "")
            + "Install a provider plugin (e.g. pip install ./plugins/cpu) or check "
            "`ortcore providers`."
        )


def _key(name: str) -> str:
    """``CPUExecutionProvider``, ``CPU`` and ``cpu`` all give ``cpu``."""
    low = name.strip().lower()
    return low[: -len(_SUFFIX)] if low.endswith(_SUFFIX) and low != _SUFFIX else low


def provider_key(name: str) -> str:
    """The key a provider name is compared by: lowercased, without the
    ``ExecutionProvider`` suffix (``CPUExecutionProvider``, ``CPU`` and ``cpu``
    all give ``cpu``)."""
    return _key(name)


def _normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_name(ep: importlib.metadata.EntryPoint) -> str:
    try:
        dist = ep.dist
        return _normalize_dist(dist.name) if dist is not None and dist.name else ""
    except Exception:  # unreadable metadata only weakens the claim
        return ""


def _claim(origin: _Origin, name: str) -> _Claim:
    """How strongly ``origin`` claims provider ``name`` (lower is stronger)."""
    ep = origin.ep
    if ep is None:
        return (3, "", "", origin.seq)
    owner = OWNER_DISTRIBUTIONS.get(name)
    if owner is not None and _dist_name(ep) == _normalize_dist(owner):
        return (1, ep.name, ep.value, 0)
    if _key(ep.name) == _key(name):
        return (2, ep.name, ep.value, 0)
    return (4, ep.name, ep.value, 0)


def _why(claim: _Claim, name: str) -> str:
    rank = claim[0]
    if rank == 1:
        return f"its distribution {OWNER_DISTRIBUTIONS[name]} owns {name}"
    if rank == 2:
        return f"its entry point is named {claim[1]!r} after {name}"
    if rank == 3:
        return "it was registered by hand, and first"
    return "its entry point sorts first"


def describe_error(exc: BaseException) -> str:
    """``repr(exc)``, or its type name if even that raises (a hostile plugin's error)."""
    try:
        return repr(exc)
    except _FATAL:
        raise
    except BaseException:
        return f"{type(exc).__name__}(<unprintable>)"


def _safe_repr(obj: object) -> str:
    try:
        return repr(obj)
    except _FATAL:
        raise
    except BaseException:
        return f"<{type(obj).__name__} (unprintable)>"


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
