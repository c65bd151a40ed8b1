"""The compiled-artifact store, as a provider reaches it (new in SDK 1.1).

A provider that keeps artifacts of its own (engines built for a shape
profile, an engine's timing cache: things the core's per-group cache of
``serialize_compiled`` cannot hold) keeps them in an :class:`ArtifactStore`
the host lends it, never by importing the host:

* ``SessionConfig.artifact_store``: the session's store (session config entry
  ``ortcore.cache_dir``, or onnxruntime's ``ep.context_*`` entries); ``None``
  when the session caches nothing;
* ``SessionConfig.host.open_artifact_store(folder)``: a store in a folder the
  provider names (an option such as TensorRT's ``trt_engine_cache_path``), or
  with ``""`` in the host's default folder (``$ORTCORE_CACHE_DIR``, else
  ``~/.cache/ortcore/compiled``).

An entry is found by its key, :func:`artifact_key` of the ``parts`` the
provider names and, for an artifact made from a group, the group's
:meth:`~ArtifactStore.content_digest`. Start the parts from
:meth:`~ArtifactStore.key_parts` (the provider's name, version, options and
device, what its ``compile_cache_key_parts(group)`` adds, and the host's
version), add what else the artifact depends on, and keep every part that
changes what the bytes mean: an entry made under any other value of the parts
is never handed back (a wrong hit is a wrong answer; a miss only costs time).
Entries live beside the core's own (``<folder>/<provider name>/<key>.bin``
with a ``.json`` of the parts), so ``ortcore cache list`` shows them and
``ortcore cache purge`` removes them.

Example (an engine per shape profile, as the TensorRT provider keeps them)::

    store = self.session_config.artifact_store
    if store is not None:
        content = store.content_digest(group)
        parts = {**store.key_parts(self, group), "kind": "engine", "profile": text}
        plan = store.load(self, group, parts, content=content)
        if plan is None:
            plan = build()
            store.save(self, group, parts, plan, content=content)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .capability import FusedGroup
    from .provider import ExecutionProvider

__all__ = ["ArtifactStore", "artifact_key"]


def artifact_key(parts: Mapping[str, Any], content: str = "") -> str:
    """An entry's key: SHA-256 of ``content`` (a group's
    :meth:`~ArtifactStore.content_digest`, or ``""`` for an artifact that
    does not depend on one group) followed by ``parts`` as JSON with sorted
    keys. The core's cache keys its own entries the same way."""
    h = hashlib.sha256(content.encode())
    h.update(json.dumps(parts, sort_keys=True).encode())
    return h.hexdigest()


@runtime_checkable
class ArtifactStore(Protocol):
    """A folder of a provider's compiled artifacts, lent by the host (see the module docs).

    Every method is safe to call from several threads, and no method raises
    for a missing, corrupt or unreadable entry: that is a miss.
    """

    @property
    def location(self) -> str:
        """Where the entries are (a folder), for messages."""
        ...

    def key_parts(self, provider: ExecutionProvider, group: FusedGroup) -> dict[str, Any]:
        """The parts every entry of ``provider`` for ``group`` depends on:
        ``provider``, ``version``, ``options``, ``device``, ``provider_parts``
        (its ``compile_cache_key_parts(group)``) and the host's version
        (``ortcore``). Values are JSON-ready."""
        ...

    def content_digest(self, group: FusedGroup) -> str:
        """SHA-256 of the group's structure and of every constant's bytes (the
        constants are hashed, never copied). Costs a pass over the weights:
        compute it once per group and pass it to :meth:`load` and :meth:`save`."""
        ...

    def load(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        parts: Mapping[str, Any],
        *,
        content: str = "",
        mapped: bool = False,
    ) -> bytes | memoryview | None:
        """The entry of ``provider`` under ``artifact_key(parts, content)``,
        or ``None`` (a miss; also when the entry's stored parts differ).
        ``mapped``: a private memory map of the entry where the platform
        allows (writes never reach the file)."""
        ...

    def save(
        self,
        provider: ExecutionProvider,
        group: FusedGroup,
        parts: Mapping[str, Any],
        data: bytes,
        *,
        content: str = "",
    ) -> bool:
        """Keep ``data`` under ``artifact_key(parts, content)``, atomically (a
        reader never sees half an entry), with ``parts`` in its metadata;
        whether it was written (``False``: a provider name that cannot be a
        folder name).

        Raises:
            OSError: the folder cannot be written.
        """
        ...
