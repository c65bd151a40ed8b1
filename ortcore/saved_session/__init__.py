"""Saved sessions: a warm start that skips loading, optimizing and partitioning.

When a session with the compiled-artifact cache on (:mod:`ortcore.cache`)
and the session config entry ``ortcore.save_session`` = ``"1"`` ends up with
every node of its model in groups that the cache holds, it also saves a
*context model* under ``<cache>/ortcore.session/<key>.onnx`` (its record in
``<key>.meta``, JSON; ``ortcore cache purge`` without ``--provider`` removes
them; ``ortcore cache list`` shows them after the compiled groups, see
:func:`list_saved`). The context model
is a compiled model in onnxruntime's EPContext form (:mod:`ortcore.epcontext`),
the same format ``ortcore.ModelCompiler`` writes: the model's inputs, outputs
and metadata, and one ``com.microsoft::EPContext`` node per group, in the
order the plan runs them, with ``embed_mode`` = 0 and ``ep_cache_context``
naming the group's cache entry, ``<provider>/<key>.bin``, relative to the
cache folder. No weights: they are in the compiled artifacts. It is loaded
by the same loader as any compiled model, except that each binary is read
through the cache, which checks the entry against the provider (name,
version, options, device, engine).

The key is a SHA-256 of the model's bytes and of everything in the session's
options and provider choice that could change the result (see
:func:`session_key`); the content of any external data file the model
references is checked against the record's digest of it (digests of
settled files are remembered by their stat, see :func:`_digest_file`). A session created
again with the same key loads the context model, gives each node to its
provider as a fused group, and has the provider load the artifact: the
original graph is not read into onnx-ir, optimized or partitioned.

A saved session never fails a session: when the record is unreadable (or of
the format before EPContext: a record without ``"format": "epcontext"`` is
stale), a provider differs (name, version, options, device), or an artifact
is missing or does not load, the session is created from the model as usual
(and saves a new record). Sessions that replace initializers, register
custom ops, save their optimized model, or feed initializers are never saved.

The package: :mod:`~ortcore.saved_session.record` (keys, finding, listing
and checking a record) and :mod:`~ortcore.saved_session.writer` (saving one).
"""

from __future__ import annotations

from .record import (
    SAVE_SESSION_KEY,
    SESSION_FOLDER,
    SavedSession,
    StaleSavedSession,
    check_saved,
    find_saved,
    list_saved,
    model_digest,
    saves_sessions,
    session_key,
)
from .writer import save_session

__all__ = [
    "SAVE_SESSION_KEY",
    "SESSION_FOLDER",
    "SavedSession",
    "StaleSavedSession",
    "check_saved",
    "find_saved",
    "list_saved",
    "model_digest",
    "save_session",
    "saves_sessions",
    "session_key",
]
