"""The store of compiled groups: :class:`CompiledCache` (load and store an
entry under its key) and :func:`compile_with_cache`, the planner's way in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ep_sdk import ExecutionProvider, FusedGroup
from ep_sdk.files import write_atomically
from ep_sdk.kernel import is_provider_folder_name

from .. import _version
from .files import map_file
from .keys import content_digest

if TYPE_CHECKING:
    from .admin import CacheListing, PurgeReport

__all__ = ["SOURCES", "CompiledCache", "compile_with_cache"]

log = logging.getLogger("ortcore.cache")


class CompiledCache:
    """Compiled groups on disk, keyed by content (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key_parts(provider: ExecutionProvider, group: FusedGroup) -> dict[str, Any]:
        """Everything an entry depends on besides the group's content
        (:func:`content_digest`): the provider's name, version, options and
        device, what its ``compile_cache_key_parts(group)`` adds, and
        ortcore's version. Stored in the entry's metadata too."""
        extra = provider.compile_cache_key_parts(group)
        return {
            "provider": provider.name,
            "version": str(provider.version),
            "options": dict(sorted(provider.provider_options.items())),
            "device": str(provider.device),
            "provider_parts": {str(k): str(v) for k, v in sorted(extra.items())},
            "ortcore": _version.__version__,
        }

    def key(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        parts: Mapping[str, Any] | None = None,
    ) -> str:
        """The entry's key: SHA-256 of :func:`content_digest` and :meth:`key_parts`
        (``parts``, when the caller has them already)."""
        h = hashlib.sha256(content_digest(group).encode())
        parts = self.key_parts(provider, group) if parts is None else parts
        h.update(json.dumps(parts, sort_keys=True).encode())
        return h.hexdigest()

    def _paths(self, provider_name: str, key: str) -> tuple[Path, Path]:
        folder = self.directory / provider_name
        return folder / f"{key}.bin", folder / f"{key}.json"

    def load(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        *,
        key: str | None = None,
        parts: Mapping[str, Any] | None = None,
        mapped: bool = False,
    ) -> bytes | memoryview | None:
        """The stored bytes for ``group`` under ``provider``, or ``None`` on a miss.

        ``key`` and ``parts`` (:meth:`key` and :meth:`key_parts`), when the
        caller has them, save hashing the group's constants again. With
        ``mapped``, a writable ``memoryview`` of a private (copy-on-write)
        memory map of the entry, where the platform can map it: nothing is
        read until it is touched, and writes never reach the file.
        """
        if not is_provider_folder_name(provider.name):
            return None
        parts = self.key_parts(provider, group) if parts is None else parts
        key = self.key(provider, group, parts) if key is None else key
        data_path, meta_path = self._paths(provider.name, key)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        # belt and braces: the key already covers these
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        if {k: meta.get(k) for k in parts} != dict(parts):
            return None
        size = meta.get("size")
        try:  # a FIFO or a folder under the entry's name is a miss, never a hang
            if not stat.S_ISREG(data_path.stat().st_mode):
                return None
        except OSError:
            return None
        data: bytes | memoryview | None = map_file(data_path, size) if mapped else None
        if data is None:
            try:
                data = data_path.read_bytes()
            except OSError:
                return None
        return data if len(data) == size else None

    def store(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        data: bytes,
        *,
        key: str | None = None,
        parts: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write an entry (atomically: a reader never sees half of one); whether it was written.

        A provider whose name cannot be a folder name of the cache (see the
        module docstring) is not cached: a warning is logged and nothing written.
        ``key`` and ``parts`` as for :meth:`load`.
        """
        if not is_provider_folder_name(provider.name):
            log.warning(
                "not caching %s's compiled group %s: provider name %r is not a valid "
                "cache folder name (letters, digits, '_', '.', '-')",
                provider.name,
                group.name,
                provider.name,
            )
            return False
        parts = self.key_parts(provider, group) if parts is None else parts
        key = self.key(provider, group, parts) if key is None else key
        data_path, meta_path = self._paths(provider.name, key)
        data_path.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            **parts,
            "group": group.name,
            "nodes": len(group.nodes),
            "size": len(data),
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "key": key,
        }
        for path, content in ((data_path, data), (meta_path, json.dumps(meta).encode())):
            # The ".tmp-" prefix (and mkstemp's 8-character suffix) is what
            # purge() recognises as a leftover of ours.
            write_atomically(path, content, prefix=".tmp-")
        return True

    # -- listing and purging: ortcore.cache.admin, loaded only when asked ------

    def scan(self, provider: str | None = None) -> CacheListing:
        """Every entry's metadata and what was skipped (:meth:`CacheAdmin.scan`)."""
        from .admin import CacheAdmin

        return CacheAdmin(self.directory).scan(provider)

    def entries(self) -> list[dict[str, Any]]:
        """Metadata of every entry, by provider then creation time (see :meth:`scan`)."""
        return self.scan().entries

    def purge(self, provider: str | None = None) -> PurgeReport:
        """Delete every entry (or only ``provider``'s) (:meth:`CacheAdmin.purge`)."""
        from .admin import CacheAdmin

        return CacheAdmin(self.directory).purge(provider)


def compile_with_cache(
    cache: CompiledCache | None,
    provider: ExecutionProvider,
    group: FusedGroup,
    *,
    keys: dict[str, str] | None = None,
    sources: dict[str, str] | None = None,
) -> Any:
    """``provider.compile(group)``, through ``cache`` when the provider supports it.

    ``keys``, when given, gets ``group.name -> key`` for a group that the
    cache holds once this returns (loaded from it, or stored in it).
    ``sources``, when given, gets ``group.name ->`` one of :data:`SOURCES`'
    values: where the compiled group came from. Each is also logged at info
    level (logger ``ortcore.cache``).

    The cache never fails a session: when the key cannot be computed (the
    provider's ``compile_cache_key_parts`` raised), when ``load_compiled``
    raises on a stored entry, or when ``serialize_compiled`` or writing the
    entry fails, a warning is logged and the group is compiled (and, after a
    failed load, the entry replaced). Errors of ``compile`` itself propagate.
    """
    found: dict[str, str] = sources if sources is not None else {}

    def source(what: str, key: str = "") -> None:
        found[group.name] = SOURCES[what]
        entry = f" (entry {key[:12]})" if key else ""
        log.info("%s: compiled group %s: %s%s", provider.name, group.name, SOURCES[what], entry)

    supports = type(provider).serialize_compiled is not ExecutionProvider.serialize_compiled
    if cache is None or not supports:
        fn = provider.compile(group)
        source("off" if cache is None else "uncacheable")
        return fn
    try:
        parts = cache.key_parts(provider, group)
        key = cache.key(provider, group, parts)
    except Exception:
        log.warning(
            "not caching %s's compiled group %s: its cache key could not be computed",
            provider.name,
            group.name,
            exc_info=True,
        )
        fn = provider.compile(group)
        source("not stored")
        return fn
    data = cache.load(provider, group, key=key, parts=parts, mapped=provider.load_compiled_mapped)
    if data is not None:
        try:
            # a memoryview for a provider that set load_compiled_mapped
            fn = provider.load_compiled(group, cast(bytes, data))
            if keys is not None:
                keys[group.name] = key
            source("hit", key)
            return fn
        except Exception:
            log.warning(
                "%s could not load its cached compiled group %s (entry %s); compiling it "
                "again and replacing the entry",
                provider.name,
                group.name,
                key,
                exc_info=True,
            )
    fn = provider.compile(group)
    stored = False
    try:
        blob = provider.serialize_compiled(group, fn)
        if blob is not None:
            stored = cache.store(provider, group, bytes(blob), key=key, parts=parts)
            if stored and keys is not None:
                keys[group.name] = key
    except Exception:
        log.warning(
            "%s's compiled group %s was not cached", provider.name, group.name, exc_info=True
        )
    source("miss" if stored else "not stored", key if stored else "")
    return fn


SOURCES: Mapping[str, str] = {
    "hit": "cache hit",
    "miss": "cache miss: compiled and stored",
    "not stored": "compiled, not stored in the cache",
    "uncacheable": "compiled (the provider keeps nothing in the cache)",
    "off": "compiled (no cache: ortcore.cache_dir not set)",
    "context": "loaded from a compiled model's EPContext node",
    "saved": "loaded from a saved session",
}
"""Where a compiled group came from, as ``session.get_partition().compiled``
and the ``ortcore.cache`` log say it."""
