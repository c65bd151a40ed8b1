"""The on-disk cache of compiled fused groups.

A provider that compiles fused groups may also serialize what it compiled
(``ExecutionProvider.serialize_compiled``) and load it back
(``load_compiled``). When a session enables the cache, the planner looks a
group up before compiling it and stores what it compiled.

Where: session config ``ortcore.cache_dir``, or with ``ep.context_enable`` =
``"1"`` (onnxruntime's key) the folder ``ep.context_file_path`` (the folder of
that path if it names a file, e.g. ``model_ctx.onnx``), else
``$ORTCORE_CACHE_DIR`` or ``~/.cache/ortcore/compiled``.

Entries live in ``<dir>/<provider name>/<key>.bin`` with a ``<key>.json``
beside it. The key is a SHA-256 of the group's model bytes, the provider's
name, version and options, and its device, so an entry made under any other
value of these is never reused. ``ortcore cache list`` and
``ortcore cache purge [--provider NAME]`` show and clear the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ep_sdk import ExecutionProvider, FusedGroup

__all__ = ["CompiledCache", "cache_dir_from_config", "default_cache_dir"]

CACHE_DIR_KEY = "ortcore.cache_dir"
CONTEXT_ENABLE_KEY = "ep.context_enable"
CONTEXT_PATH_KEY = "ep.context_file_path"


def default_cache_dir() -> Path:
    """``$ORTCORE_CACHE_DIR``, else ``~/.cache/ortcore/compiled``."""
    env = os.environ.get("ORTCORE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ortcore" / "compiled"


def cache_dir_from_config(config: Mapping[str, str]) -> Path | None:
    """The cache folder a session's config entries choose, or ``None`` (no cache)."""
    if config.get(CACHE_DIR_KEY):
        return Path(config[CACHE_DIR_KEY])
    if config.get(CONTEXT_ENABLE_KEY) != "1":
        return None
    path = config.get(CONTEXT_PATH_KEY, "")
    if not path:
        return default_cache_dir()
    p = Path(path)
    return p.parent if p.suffix and not p.is_dir() else p


def _model_bytes(group: FusedGroup) -> bytes:
    model = group.model
    if isinstance(model, bytes):
        return model
    return bytes(model.SerializeToString(deterministic=True))


class CompiledCache:
    """Compiled groups on disk, keyed by content (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key_parts(provider: ExecutionProvider, group: FusedGroup) -> dict[str, Any]:
        """Everything an entry depends on (besides the group's model bytes)."""
        return {
            "provider": provider.name,
            "version": str(provider.version),
            "options": dict(sorted(provider.options.items())),
            "device": str(provider.device),
        }

    def key(self, provider: ExecutionProvider, group: FusedGroup) -> str:
        """The entry's key: SHA-256 of the model bytes and :meth:`key_parts`."""
        h = hashlib.sha256(_model_bytes(group))
        h.update(json.dumps(self.key_parts(provider, group), sort_keys=True).encode())
        return h.hexdigest()

    def _paths(self, provider_name: str, key: str) -> tuple[Path, Path]:
        folder = self.directory / provider_name
        return folder / f"{key}.bin", folder / f"{key}.json"

    def load(self, provider: ExecutionProvider, group: FusedGroup) -> bytes | None:
        """The stored bytes for ``group`` under ``provider``, or ``None`` on a miss."""
        data_path, meta_path = self._paths(provider.name, self.key(provider, group))
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            data = data_path.read_bytes()
        except (OSError, ValueError):
            return None
        # belt and braces: the key already covers these
        if {k: meta.get(k) for k in ("provider", "version", "options", "device")} != (
            self.key_parts(provider, group)
        ) or meta.get("size") != len(data):
            return None
        return data

    def store(self, provider: ExecutionProvider, group: FusedGroup, data: bytes) -> None:
        """Write an entry (atomically: a reader never sees half of one)."""
        key = self.key(provider, group)
        data_path, meta_path = self._paths(provider.name, key)
        data_path.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            **self.key_parts(provider, group),
            "group": group.name,
            "nodes": len(group.nodes),
            "size": len(data),
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "key": key,
        }
        for path, content in ((data_path, data), (meta_path, json.dumps(meta).encode())):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(content)
            os.replace(tmp, path)

    def entries(self) -> list[dict[str, Any]]:
        """Metadata of every entry, by provider then creation time."""
        out = []
        for meta_path in sorted(self.directory.glob("*/*.json")):
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            meta["path"] = str(meta_path.with_suffix(".bin"))
            out.append(meta)
        return sorted(out, key=lambda m: (str(m.get("provider")), str(m.get("created"))))

    def purge(self, provider: str | None = None) -> int:
        """Delete every entry (or only ``provider``'s); return how many."""
        count = 0
        for folder in sorted(self.directory.glob("*")):
            if not folder.is_dir() or (provider is not None and folder.name != provider):
                continue
            for f in folder.iterdir():
                if f.suffix == ".bin":
                    count += 1
                f.unlink()
            folder.rmdir()
        return count


def compile_with_cache(
    cache: CompiledCache | None, provider: ExecutionProvider, group: FusedGroup
) -> Any:
    """``provider.compile(group)``, through ``cache`` when the provider supports it."""
    supports = type(provider).serialize_compiled is not ExecutionProvider.serialize_compiled
    if cache is None or not supports:
        return provider.compile(group)
    data = cache.load(provider, group)
    if data is not None:
        return provider.load_compiled(group, data)
    fn = provider.compile(group)
    blob = provider.serialize_compiled(group, fn)
    if blob is not None:
        cache.store(provider, group, bytes(blob))
    return fn
