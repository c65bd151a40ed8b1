"""Writing a saved session: the context model and its record (see
:mod:`ortcore.saved_session`)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import onnx_ir as ir

from ep_sdk.files import write_atomically

from ..epcontext_write import build_context_model
from ..model import EXTERNAL_FILES_KEY
from .record import FORMAT, SESSION_FOLDER, externals_digest, provider_identity, record_paths

if TYPE_CHECKING:
    from ..plans import SessionPlans

__all__ = ["save_session"]

log = logging.getLogger("ortcore.cache")


def save_session(
    cache_dir: Path,
    key: str,
    path_or_bytes: str | os.PathLike[str] | bytes,
    model: ir.Model,
    plans: SessionPlans,
    group_keys: Mapping[str, str],
) -> bool:
    """Save the session's context model under ``key``; whether it was saved.

    Never raises for a session that cannot be saved or a write that fails
    (logged): the session works the same without it.
    """
    try:
        ctx = build_context_model(
            model, plans.planner, embed=False, stem=key, cache_keys=group_keys
        )
        if ctx is None:
            return False
        externals = model.meta.get(EXTERNAL_FILES_KEY)
        if externals is None:  # not a model from load_model: its files are unknown
            return False
        ext_digest = None
        if externals:
            assert not isinstance(path_or_bytes, (bytes, bytearray, memoryview))
            ext_digest = externals_digest(Path(path_or_bytes).parent, externals, cache_dir)
            if ext_digest is None:
                return False
        data = ctx.proto.SerializeToString()
        providers = plans.planner.providers
        meta = {
            "provider": SESSION_FOLDER,
            "format": FORMAT,
            "key": key,
            "group": model.graph.name or "",
            "nodes": ctx.compiled,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "providers": [provider_identity(p) for p in providers],
            "externals": externals,
            "externals_digest": ext_digest,
        }
        data_path, meta_path = record_paths(cache_dir, key)
        data_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(data_path, data)
        write_atomically(meta_path, json.dumps(meta).encode())
        return True
    except Exception:
        log.warning("the session was not saved in %s", cache_dir, exc_info=True)
        return False
