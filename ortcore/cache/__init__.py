"""The on-disk cache of compiled fused groups.

A provider that compiles fused groups may also serialize what it compiled
(``ExecutionProvider.serialize_compiled``) and load it back
(``load_compiled``). When a session enables the cache, the planner looks a
group up before compiling it and stores what it compiled.

Where: session config ``ortcore.cache_dir`` (``$ORTCORE_CACHE_DIR`` or
``~/.cache/ortcore/compiled`` where a tool asks for the default folder).
onnxruntime's ``ep.context_enable`` does not turn the cache on: it writes a
compiled model (:mod:`ortcore.compile_api`).

Entries live in ``<dir>/<provider name>/<key>.bin`` with a ``<key>.json``
beside it. The key is a SHA-256 of everything that changes what a compiled
artifact means, so an entry made under any other value of these is never
reused (a wrong hit is a wrong answer; a miss only costs time):

* the group's structure: its nodes, attributes, inputs, outputs, opsets and
  each constant's name, type and shape, read from the graph
  (:func:`ep_sdk.graph.group_digest`: the model is not exported for a key);
* the bytes of every constant the group reads (``FusedGroup.constants``, and
  any other initializer of a given model), hashed in slices of 16 MiB on
  several threads, so that memory-mapped external data is streamed, never
  gathered in memory;
* the provider's name, version, options and device
  (:meth:`CompiledCache.key_parts`), what its
  ``compile_cache_key_parts(group)`` adds (an engine's version and target),
  and ortcore's version.

A provider's ``load_compiled`` that raises costs a compile, never the
session: :func:`compile_with_cache` logs a warning, compiles the group and
replaces the entry. A failure to write an entry is logged the same way.
``ortcore cache list`` and ``ortcore cache purge [--provider NAME]`` show and
clear the folder.

The folder may hold other things (a user's files, a symlink someone put
there): :meth:`CompiledCache.scan` and :meth:`CompiledCache.purge` touch only
what :meth:`CompiledCache.store` writes, never follow a symlink inside the
folder, and report everything else they leave alone. What counts as ours:

* a provider folder: a real folder (not a symlink) whose name matches
  ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`` (a provider name; ``store`` refuses
  any other);
* in it, regular files ``<key>.bin`` and ``<key>.json``, ``<key>`` being 64
  lowercase hex digits (a SHA-256); a ``.json`` must be a JSON object whose
  ``key`` and ``provider`` name this entry and this folder;
* regular files ``query-<key>.json``: a bridge provider's kept answers of
  its engine about candidate groups (:mod:`ep_sdk.bridge`); not listed as
  entries, removed by ``purge``;
* regular files ``.tmp-XXXXXXXX`` (eight of ``[a-z0-9_]``, what
  ``tempfile.mkstemp`` makes) that an interrupted ``store`` left behind;
  ``purge`` removes them once older than :data:`TEMP_GRACE_S`.

The package, bottom to top: :mod:`~ortcore.cache.layout` (the folder and
the names of what is written there), :mod:`~ortcore.cache.files` (the safe
file layer), :mod:`~ortcore.cache.keys` (hashing),
:mod:`~ortcore.cache.store` (:class:`CompiledCache`, :func:`compile_with_cache`)
and :mod:`~ortcore.cache.admin` (listing and purging, loaded only when a
tool asks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ep_sdk.kernel import is_provider_folder_name

from .keys import content_digest
from .layout import (
    CACHE_DIR_KEY,
    DIGEST_FOLDER,
    SESSION_FOLDER,
    TEMP_GRACE_S,
    cache_dir_from_config,
    default_cache_dir,
)
from .store import SOURCES, CompiledCache, compile_with_cache

if TYPE_CHECKING:
    from .admin import CacheListing, CacheNote, PurgeReport

__all__ = [
    "CACHE_DIR_KEY",
    "DIGEST_FOLDER",
    "SESSION_FOLDER",
    "SOURCES",
    "TEMP_GRACE_S",
    "CacheListing",
    "CacheNote",
    "CompiledCache",
    "PurgeReport",
    "cache_dir_from_config",
    "compile_with_cache",
    "content_digest",
    "default_cache_dir",
    "is_provider_folder_name",
]

_ADMIN = frozenset({"CacheListing", "CacheNote", "PurgeReport"})


def __getattr__(name: str) -> Any:
    # The administration's report types load with it, only when asked for.
    if name in _ADMIN:
        from . import admin

        return getattr(admin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
