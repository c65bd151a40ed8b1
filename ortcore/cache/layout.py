"""Where the cache keeps things: its folder, and the names of what it writes.

Every name the store writes and the administration recognises as its own is
defined here once (see :mod:`ortcore.cache` for the rules).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "CACHE_DIR_KEY",
    "DIGEST_FOLDER",
    "DIGEST_RE",
    "ENTRY_RE",
    "META_LIMIT",
    "QUERY_RE",
    "SESSION_FOLDER",
    "SESSION_RE",
    "TEMP_GRACE_S",
    "TEMP_RE",
    "cache_dir_from_config",
    "default_cache_dir",
]

CACHE_DIR_KEY = "ortcore.cache_dir"

TEMP_GRACE_S = 300.0
"""``purge`` leaves younger ``.tmp-*`` files alone: a ``store`` may be writing them."""

ENTRY_RE = re.compile(r"([0-9a-f]{64})\.(bin|json)")
TEMP_RE = re.compile(r"\.tmp-[a-z0-9_]{8}")
# a bridge provider's kept query answer (ep_sdk.bridge): listed as nothing, purged
QUERY_RE = re.compile(r"query-[0-9a-f]{64}\.json")
META_LIMIT = 1 << 20  # store() writes a few hundred bytes; refuse to read more than this


def default_cache_dir() -> Path:
    """``$ORTCORE_CACHE_DIR``, else ``~/.cache/ortcore/compiled``."""
    env = os.environ.get("ORTCORE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ortcore" / "compiled"


def cache_dir_from_config(config: Mapping[str, str]) -> Path | None:
    """The cache folder a session's config entries choose (``ortcore.cache_dir``),
    or ``None`` (no cache)."""
    if config.get(CACHE_DIR_KEY):
        return Path(config[CACHE_DIR_KEY])
    return None


SESSION_FOLDER = "ortcore.session"
"""The folder of saved sessions (:mod:`ortcore.saved_session`) in the cache
folder: ``<key>.onnx`` and ``<key>.meta`` files, and remembered file digests
in :data:`DIGEST_FOLDER`. Not a provider's: left out
of :meth:`CompiledCache.scan`, emptied by a purge of every provider."""
SESSION_RE = re.compile(r"([0-9a-f]{64})\.(?:onnx|meta)")
DIGEST_FOLDER = "digests"
"""The sub-folder of :data:`SESSION_FOLDER` that remembers the digests of
model and external data files (see :mod:`ortcore.saved_session`)."""
DIGEST_RE = re.compile(r"[0-9a-f]{40}\.json")
