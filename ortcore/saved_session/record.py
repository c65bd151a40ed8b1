"""A saved session's record: its key, where it lies, finding, listing and
checking one (see :mod:`ortcore.saved_session`)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from ep_sdk import ExecutionProvider
from ep_sdk.files import write_atomically

from .. import _version
from ..cache.keys import hash_arrays, hash_file
from ..cache.layout import DIGEST_FOLDER, SESSION_FOLDER
from ..errors import StaleSavedSession

if TYPE_CHECKING:
    from ..options import SessionOptions

__all__ = [
    "FORMAT",
    "SAVE_SESSION_KEY",
    "SESSION_FOLDER",
    "SavedSession",
    "StaleSavedSession",
    "check_saved",
    "externals_digest",
    "find_saved",
    "list_saved",
    "model_digest",
    "provider_identity",
    "record_paths",
    "saves_sessions",
    "session_key",
]

log = logging.getLogger("ortcore.cache")

SAVE_SESSION_KEY = "ortcore.save_session"
"""Session config entry: ``"1"`` saves and reuses sessions (see the module docstring)."""
FORMAT = "epcontext"
"""The record's ``format``: its context model is an EPContext model (older records are stale)."""
_META_LIMIT = 1 << 20


def saves_sessions(config: Mapping[str, str]) -> bool:
    """Whether a session's config entries turn saved sessions on
    (``ortcore.save_session`` = ``"1"``; onnxruntime's ``ep.context_enable``
    writes a compiled model instead, see :mod:`ortcore.compile_api`)."""
    return config.get(SAVE_SESSION_KEY, "").strip() == "1"


@dataclass
class SavedSession:
    """A saved session found for a model.

    Attributes:
        key: its key (:func:`session_key`).
        model: the context model's bytes.
        meta: its record (providers, external files, ...).
        cache_dir: the cache folder its nodes' binaries are entries of.
    """

    key: str
    model: bytes
    meta: dict[str, Any]
    cache_dir: Path


# --------------------------------------------------------------------------- #
# Keys
# --------------------------------------------------------------------------- #


def _open_regular(path: Path) -> tuple[int, os.stat_result] | None:
    """A read-only descriptor of ``path`` and its stat, or ``None`` when it is
    not a regular file or cannot be opened. The open does not block: a FIFO
    put in its place never hangs the session."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def _read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of a regular file, or ``None`` when it is not one, cannot be
    read, or is larger than ``limit``."""
    opened = _open_regular(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        if limit is not None and st.st_size > limit:
            return None
        chunks = []
        while chunk := os.read(fd, max(st.st_size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


_SETTLED_NS = 2_000_000_000


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _digest_file(path: Path, cache_dir: Path | None = None) -> str | None:
    """SHA-256 (in threaded slices) of a regular file's content; ``None`` if it
    is not one or cannot be read.

    With ``cache_dir``, a digest is remembered under
    ``<cache>/ortcore.session/digests/`` with the file's device, inode, size,
    modification and change times, and reused while all five are the same
    (as Bazel's digest cache and git's index do): a write to the file changes
    its change time, which no user can set back. Only files unchanged for two
    seconds are remembered, so a write within the clock's resolution of the
    stat is never missed. POSIX only: elsewhere ``st_ctime`` is the creation time.
    """
    opened = _open_regular(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        signature = _signature(st)
        memo = None
        if cache_dir is not None and os.name == "posix":  # elsewhere st_ctime is creation
            name = hashlib.sha256(f"{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:40]
            memo = cache_dir / SESSION_FOLDER / DIGEST_FOLDER / f"{name}.json"
            known = _read_regular(memo, 4096)
            try:
                record = json.loads(known) if known else None
            except ValueError:
                record = None
            if isinstance(record, dict) and record.get("stat") == signature:
                digest = record.get("sha256")
                if isinstance(digest, str):
                    return digest
        h = hashlib.sha256()
        # Read, not mapped: a file truncated while it is hashed gives a short
        # read (no digest), where a mapped page past its new end would kill
        # the process with SIGBUS.
        hash_file(h, fd, st.st_size)
        digest = h.hexdigest()
        if memo is not None and time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS:
            try:
                memo.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(memo, json.dumps({"stat": signature, "sha256": digest}).encode())
            except OSError:
                pass  # a digest not remembered is computed again next time
        return digest
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def model_digest(
    path_or_bytes: str | os.PathLike[str] | bytes, cache_dir: Path | None = None
) -> str | None:
    """SHA-256 of the model's bytes (its file's content), or ``None`` when it
    cannot be read (``cache_dir``: see :func:`_digest_file`)."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        h = hashlib.sha256()
        hash_arrays(h, [("file", np.frombuffer(path_or_bytes, dtype=np.uint8))])
        return h.hexdigest()
    return _digest_file(Path(path_or_bytes), cache_dir)


def session_key(
    path_or_bytes: str | os.PathLike[str] | bytes,
    options: SessionOptions,
    settings: Mapping[str, Any],
    cache_dir: Path | None = None,
) -> str | None:
    """The saved-session key of a session, or ``None`` when it is never saved.

    It covers the model's bytes, ortcore's version, the optimization level,
    threads, execution mode and order, every config entry, the free dimension
    overrides, and ``settings`` (the providers and provider options asked for,
    the optimizers disabled, whether the model's own config is read). Sessions
    that add initializers (``add_initializer``, external initializers or files
    in memory), register custom ops or save their optimized model have none.
    With ``cache_dir``, the model file's digest may be one remembered there
    (see :func:`_digest_file`).
    """
    if (
        options.initializers
        or options.external_initializers
        or options.external_files_in_memory
        or options.custom_ops
        or options.optimized_model_filepath
    ):
        return None
    digest = model_digest(path_or_bytes, cache_dir)
    if digest is None:
        return None
    by_name, by_denotation = options.free_dimension_overrides
    parts = {
        "model": digest,
        "ortcore": _version.__version__,
        "level": int(options.graph_optimization_level),
        "intra_op_num_threads": options.intra_op_num_threads,
        "inter_op_num_threads": options.inter_op_num_threads,
        "execution_mode": int(options.execution_mode),
        "execution_order": int(options.execution_order),
        "config": sorted(options.config_entries.items()),
        "free_dims": [sorted(by_name.items()), sorted(by_denotation.items())],
        "settings": dict(settings),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


def provider_identity(provider: ExecutionProvider) -> dict[str, Any]:
    return {
        "name": provider.name,
        "version": str(provider.version),
        "options": {str(k): str(v) for k, v in sorted(provider.provider_options.items())},
        "device": str(provider.device),
    }


def externals_digest(
    base: Path, locations: Sequence[str], cache_dir: Path | None = None
) -> str | None:
    """One digest of the external data files (relative to ``base``), or ``None``
    when one is missing, not a regular file, or outside ``base``."""
    h = hashlib.sha256()
    root = base.resolve()
    for location in locations:
        path = (base / location).resolve()
        if root != path and root not in path.parents:
            return None
        digest = _digest_file(path, cache_dir)
        if digest is None:
            return None
        h.update(f"{location}\0{digest}\0".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- #
# Finding and loading
# --------------------------------------------------------------------------- #


def record_paths(cache_dir: Path, key: str) -> tuple[Path, Path]:
    folder = cache_dir / SESSION_FOLDER
    return folder / f"{key}.onnx", folder / f"{key}.meta"


def list_saved(cache_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The saved sessions under ``cache_dir`` (their records, each with the
    ``path`` of its context model), by creation time, and the files of the
    session folder that are not one (a record unreadable, of another format,
    or without its model), as ``"path: why"``. Nothing is followed through a
    symlink; a missing folder holds none."""
    folder = Path(cache_dir) / SESSION_FOLDER
    found: list[dict[str, Any]] = []
    skipped: list[str] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found, skipped
    for name in names:
        path = folder / name
        if not name.endswith(".meta"):
            if not (name.endswith(".onnx") and (folder / f"{name[:-5]}.meta").exists()):
                skipped.append(f"{path}: not a saved session's file")
            continue
        text = _read_regular(path, _META_LIMIT)
        try:
            meta = json.loads(text.decode("utf-8")) if text is not None else None
        except ValueError:
            meta = None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            skipped.append(f"{path}: unreadable or stale record (a session ignores it)")
            continue
        data_path = folder / f"{name[:-5]}.onnx"
        if _open_regular_size(data_path) != meta.get("size"):
            skipped.append(f"{path}: its context model is missing or changed")
            continue
        found.append({**meta, "path": str(data_path)})
    found.sort(key=lambda m: str(m.get("created")))
    return found, skipped


def _open_regular_size(path: Path) -> int | None:
    opened = _open_regular(path)
    if opened is None:
        return None
    fd, st = opened
    os.close(fd)
    return st.st_size


def find_saved(
    cache_dir: Path, key: str, path_or_bytes: str | os.PathLike[str] | bytes
) -> SavedSession | None:
    """The saved session of ``key``, or ``None`` (a miss, or a record that
    cannot be trusted: unreadable, of another key, external files changed)."""
    data_path, meta_path = record_paths(cache_dir, key)
    try:
        text = _read_regular(meta_path, _META_LIMIT)
        if text is None:
            return None
        meta = json.loads(text.decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        if meta.get("provider") != SESSION_FOLDER or meta.get("format") != FORMAT:
            return None
        externals = meta.get("externals", [])
        if externals:
            if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
                return None
            base = Path(path_or_bytes).parent
            if externals_digest(base, externals, cache_dir) != meta.get("externals_digest"):
                return None
        data = _read_regular(data_path)
    except (OSError, ValueError, TypeError):
        return None
    if data is None or len(data) != meta.get("size"):
        return None
    if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        return None
    return SavedSession(key, data, meta, cache_dir)


def check_saved(
    saved: SavedSession, model: ir.Model, providers: Sequence[ExecutionProvider]
) -> None:
    """Refuse a saved session made with other providers, or whose context model
    holds anything else than EPContext nodes.

    Raises:
        StaleSavedSession: naming what differs.
    """
    from ..epcontext import is_context_node

    if saved.meta.get("providers") != [provider_identity(p) for p in providers]:
        raise StaleSavedSession("the session's providers differ from the saved session's")
    for node in model.graph:
        if not is_context_node(node):
            raise StaleSavedSession(f"node {node.name!r} is not an EPContext node")
