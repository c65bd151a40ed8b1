"""What ortcore lends its providers through the SDK (``ep_sdk.SessionConfig``).

A provider versioned against ``ep_sdk`` alone imports neither ortcore nor
another plugin; what it needs of them reaches it here:

* :class:`CacheArtifactStore`: ``ep_sdk.ArtifactStore`` over the
  compiled-artifact cache (:class:`ortcore.cache.CompiledCache`), the
  session's (``SessionConfig.artifact_store``) or one in a folder the
  provider names;
* :class:`SessionHost`: ``ep_sdk.Host``, which opens such stores and lends a
  provider another installed provider's device (``device_peer``), chosen from
  the session's plugin table by device type.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ep_sdk import (
    Device,
    DevicePeer,
    ExecutionProvider,
    FusedGroup,
    NoDevicePeer,
    SessionConfig,
    artifact_key,
)

from .cache import CompiledCache, content_digest, default_cache_dir
from .errors import InvalidArgument
from .plugins import PluginManager, ProviderEntry, describe_error

__all__ = ["CacheArtifactStore", "SessionHost", "session_config"]

log = logging.getLogger("ortcore.host")


class CacheArtifactStore:
    """``ep_sdk.ArtifactStore`` backed by a :class:`CompiledCache` folder.

    Keys are :func:`ep_sdk.artifact_key` of the provider's parts and the
    group's :func:`~ortcore.cache.content_digest`, the same as the keys the
    cache gives its own entries (:meth:`CompiledCache.key`).
    """

    def __init__(self, cache: CompiledCache) -> None:
        self.cache = cache

    @property
    def location(self) -> str:
        """The cache folder."""
        return str(self.cache.directory)

    def key_parts(self, provider: ExecutionProvider, group: FusedGroup) -> dict[str, Any]:
        """:meth:`CompiledCache.key_parts`."""
        return CompiledCache.key_parts(provider, group)

    def content_digest(self, group: FusedGroup) -> str:
        """:func:`ortcore.cache.content_digest`."""
        return content_digest(group)

    def load(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        parts: Mapping[str, Any],
        *,
        content: str = "",
        mapped: bool = False,
    ) -> bytes | memoryview | None:
        """The entry under ``artifact_key(parts, content)``, or ``None``."""
        key = artifact_key(parts, content)
        return self.cache.load(provider, group, key=key, parts=parts, mapped=mapped)

    def save(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        parts: Mapping[str, Any],
        data: bytes,
        *,
        content: str = "",
    ) -> bool:
        """Write the entry under ``artifact_key(parts, content)``."""
        key = artifact_key(parts, content)
        return self.cache.store(provider, group, bytes(data), key=key, parts=parts)

    def __repr__(self) -> str:
        return f"CacheArtifactStore({self.location!r})"


class SessionHost:
    """``ep_sdk.Host`` of a session: artifact stores, and device peers found
    in ``manager``'s provider table (see :meth:`device_peer`)."""

    def __init__(self, manager: PluginManager) -> None:
        self.manager = manager
        self.config: SessionConfig | None = None  # set once the config holding it exists

    def open_artifact_store(self, folder: str = "") -> CacheArtifactStore:
        """A store in ``folder`` (``""``: :func:`~ortcore.cache.default_cache_dir`)."""
        return CacheArtifactStore(CompiledCache(Path(folder) if folder else default_cache_dir()))

    def device_peer(self, device: Device) -> DevicePeer:
        """A new instance of the provider that keeps its tensors on
        ``device.type`` devices, on ``device`` (see ``ep_sdk.Host``).

        The provider named after the device type (name or alias ``cuda``) is
        chosen when it is available, and only its entry point is imported;
        else the available one with the highest priority.

        Raises:
            NoDevicePeer: none installed, none available (the reason of the
                one with the highest priority), or it failed to start.
        """
        owners = self._owners(device.type)
        if not owners:
            raise NoDevicePeer(
                device,
                f"no installed provider keeps its tensors on {device.type!r} devices",
                installed=False,
            )
        usable = [e for e in owners if e.available]
        if not usable:
            first = owners[0]
            raise NoDevicePeer(device, first.reason or "it cannot run here", installed=True)
        entry = usable[0]
        assert entry.cls is not None
        options: dict[str, str] = {}
        if "device_id" in entry.cls.default_options:
            options["device_id"] = str(device.id)
        try:
            peer = entry.cls(options, self.config)
        except Exception as exc:
            raise NoDevicePeer(
                device,
                f"{entry.name} (plugin {entry.plugin}) failed to start: {describe_error(exc)}",
                installed=True,
            ) from exc
        if peer.device != device:
            _close(peer)
            raise NoDevicePeer(
                device,
                f"{entry.name} runs on {peer.device}, not on {device}"
                + ("" if options else " (it has no device_id option)"),
                installed=True,
            )
        return peer

    def _owners(self, device_type: str) -> list[ProviderEntry]:
        """The installed providers whose tensors live on ``device_type``
        devices, best first: the one named after the type (name or alias
        ``cuda``) when it is available, else the available ones by priority,
        then the unavailable ones (the named one first)."""
        named: ProviderEntry | None = None
        try:  # imports only the entry point named after the type
            named = self.manager.resolve(device_type, available=False)
        except InvalidArgument:
            pass
        if named is not None and (named.device != device_type or named.cls is None):
            named = None
        if named is not None and named.available:
            return [named]
        owners = [e for e in self.manager.entries() if e.device == device_type and e.cls]
        return sorted(owners, key=lambda e: (not e.available, e is not named, -e.priority, e.name))


def _close(provider: ExecutionProvider) -> None:
    try:
        provider.close()
    except Exception as exc:
        log.warning("closing %s failed: %s", provider.name, describe_error(exc))


def session_config(
    manager: PluginManager,
    *,
    intra_op_num_threads: int,
    config_entries: Mapping[str, str],
    cache_dir: Path | None,
) -> SessionConfig:
    """The ``ep_sdk.SessionConfig`` handed to a session's providers, with the
    session's artifact store (when ``cache_dir`` is set) and its host."""
    host = SessionHost(manager)
    config = SessionConfig(
        intra_op_num_threads=intra_op_num_threads,
        config_entries=config_entries,
        cache_dir=str(cache_dir) if cache_dir is not None else "",
        artifact_store=CacheArtifactStore(CompiledCache(cache_dir)) if cache_dir else None,
        host=host,
    )
    host.config = config
    return config
