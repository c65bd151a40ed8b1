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
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx

from ep_sdk import ExecutionProvider, FusedGroup
from ep_sdk.files import write_atomically
from ep_sdk.graph import group_digest
from ep_sdk.kernel import is_provider_folder_name

from . import _version
from .errors import InvalidArgument

__all__ = [
    "CacheListing",
    "CacheNote",
    "CompiledCache",
    "PurgeReport",
    "SOURCES",
    "cache_dir_from_config",
    "default_cache_dir",
    "is_provider_folder_name",
]

log = logging.getLogger("ortcore.cache")

CACHE_DIR_KEY = "ortcore.cache_dir"

TEMP_GRACE_S = 300.0
"""``purge`` leaves younger ``.tmp-*`` files alone: a ``store`` may be writing them."""

_ENTRY_RE = re.compile(r"([0-9a-f]{64})\.(bin|json)")
_TEMP_RE = re.compile(r"\.tmp-[a-z0-9_]{8}")
# a bridge provider's kept query answer (ep_sdk.bridge): listed as nothing, purged
_QUERY_RE = re.compile(r"query-[0-9a-f]{64}\.json")
_META_LIMIT = 1 << 20  # store() writes a few hundred bytes; refuse to read more than this

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in must not hang open()
_O_BINARY = getattr(os, "O_BINARY", 0)
# Where the OS allows, folders are walked through file descriptors, so a folder
# swapped for a symlink between a check and a delete is never followed.
_USE_DIR_FD = (
    {os.open, os.stat, os.unlink, os.rmdir} <= os.supports_dir_fd
    and os.scandir in os.supports_fd
    and bool(_O_DIRECTORY and _O_NOFOLLOW)
)


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
_SESSION_RE = re.compile(r"([0-9a-f]{64})\.(?:onnx|meta)")
DIGEST_FOLDER = "digests"
"""The sub-folder of :data:`SESSION_FOLDER` that remembers the digests of
model and external data files (see :mod:`ortcore.saved_session`)."""
_DIGEST_RE = re.compile(r"[0-9a-f]{40}\.json")

_HASH_SLICE = 1 << 24  # bytes hashed at a time: memory-mapped data is read page by page
_HASH_THREADS = 8  # at most this many threads hash slices (hashlib releases the GIL)


def _array_parts(array: np.ndarray) -> tuple[bytes, list[np.ndarray | bytes]]:
    """An array's header (dtype, shape) and its content in slices (views of a
    contiguous array, no copy; strings element by element)."""
    head = f"{array.dtype.str}{array.dtype.name}{array.shape}".encode()
    if array.dtype.hasobject:  # strings: each element's bytes, length first
        items = []
        for item in array.reshape(-1):
            b = item if isinstance(item, bytes) else str(item).encode()
            items.append(len(b).to_bytes(8, "little") + b)
        return head, [b"".join(items)]
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return head, [flat[start : start + _HASH_SLICE] for start in range(0, flat.size, _HASH_SLICE)]


@dataclass(frozen=True)
class _FileSlice:
    """Bytes of an open file, read (``pread``) only by the thread that hashes them."""

    fd: int
    offset: int
    length: int


def _slice_digest(data: Any) -> bytes:
    if isinstance(data, _FileSlice):
        data = _read_slice(data)
    return hashlib.sha256(data).digest()


def _read_slice(part: _FileSlice) -> bytes:
    """A file's bytes read through its descriptor: a file truncated meanwhile
    gives a short read (an ``OSError`` here), where a memory map would fault."""
    chunks = []
    done = 0
    while done < part.length:
        chunk = os.pread(part.fd, part.length - done, part.offset + done)
        if not chunk:
            raise OSError(f"file shrank while it was hashed (at byte {part.offset + done})")
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


def _hash_threads() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(_HASH_THREADS, cpus))


def _hash_arrays(h: Any, named: list[tuple[str, np.ndarray]]) -> None:
    """Feed each array's name, dtype and shape to ``h``, then the SHA-256 of
    each slice of its bytes: slices are hashed on several threads, and the
    result does not depend on how many."""
    heads: list[bytes] = []
    slices: list[np.ndarray | bytes | _FileSlice] = []
    counts: list[int] = []
    for name, array in named:
        head, parts = _array_parts(array)
        heads.append(b"\0constant\0" + name.encode() + b"\0" + head)
        slices.extend(parts)
        counts.append(len(parts))
    _hash_slices(h, heads, slices, counts)


def _hash_file(h: Any, fd: int, size: int) -> None:
    """What ``_hash_arrays(h, [("file", content)])`` adds for a file of
    ``size`` bytes whose ``content`` is read from ``fd``, a slice per thread.

    Raises:
        OSError: the file is shorter than ``size`` (it shrank meanwhile).
    """
    u8 = np.dtype(np.uint8)
    head = b"\0constant\0file\0" + f"{u8.str}{u8.name}{(size,)}".encode()
    slices: list[np.ndarray | bytes | _FileSlice] = [
        _FileSlice(fd, start, min(_HASH_SLICE, size - start))
        for start in range(0, size, _HASH_SLICE)
    ]
    _hash_slices(h, [head], slices, [len(slices)])


def _hash_slices(
    h: Any, heads: list[bytes], slices: list[np.ndarray | bytes | _FileSlice], counts: list[int]
) -> None:
    threads = min(_hash_threads(), len(slices))
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads, thread_name_prefix="ortcore-hash") as pool:
            digests = list(pool.map(_slice_digest, slices))
    else:
        digests = [_slice_digest(part) for part in slices]
    at = 0
    for head, count in zip(heads, counts):
        h.update(head)
        h.update(count.to_bytes(8, "little"))
        for digest in digests[at : at + count]:
            h.update(digest)
        at += count


def _structure(model: Any, skip: set[str]) -> bytes:
    """``model`` serialized with the content of the initializers in ``skip`` left out."""
    graph = onnx.GraphProto()
    for fd, val in model.graph.ListFields():
        if fd.name == "initializer":
            for t in val:
                if t.name in skip:  # its content is hashed from its value
                    graph.initializer.add(name=t.name, dims=t.dims, data_type=t.data_type)
                else:
                    graph.initializer.add().CopyFrom(t)
        else:
            _copy_field(graph, fd, val)
    shell = onnx.ModelProto()
    for fd, val in model.ListFields():
        if fd.name == "graph":
            shell.graph.CopyFrom(graph)
        else:
            _copy_field(shell, fd, val)
    return bytes(shell.SerializeToString(deterministic=True))


def _copy_field(target: Any, fd: Any, val: Any) -> None:
    if hasattr(val, "extend"):  # a repeated field
        getattr(target, fd.name).extend(val)
    elif fd.message_type is not None:
        getattr(target, fd.name).CopyFrom(val)
    else:
        setattr(target, fd.name, val)


def content_digest(group: FusedGroup) -> str:
    """SHA-256 of the group's structure and of every constant's bytes.

    The structure of a group the core made (:attr:`FusedGroup.exported_lazily`)
    is :func:`ep_sdk.graph.group_digest` of its nodes, so the key is found
    without exporting the model; a group built around a given model is keyed
    by that model's serialization with the constants' content left out. The
    constants are hashed from their values (``group.constants``), a slice at
    a time on several threads; they are never serialized or concatenated for
    hashing. An initializer of a given model that is not among
    ``group.constants`` is hashed with the structure.
    """
    h = hashlib.sha256()
    consts = [v for v in group.constants if v.const_value is not None]
    if group.exported_lazily:
        baked = [v for v in consts if v not in group.inputs]
        h.update(b"group\0")
        h.update(
            group_digest(
                group.name, group.nodes, group.inputs, group.outputs, group.opsets, baked
            ).encode()
        )
    elif isinstance(group.model, (bytes, bytearray, memoryview)):
        h.update(b"model bytes\0")
        h.update(group.model)
    else:
        h.update(b"model\0")
        h.update(_structure(group.model, {v.name or "" for v in consts}))
    named = []
    for v in consts:
        assert v.const_value is not None
        named.append((v.name or "", v.const_value.numpy()))
    _hash_arrays(h, named)
    return h.hexdigest()


def _map_file(path: Path, size: Any) -> memoryview | None:
    """A private memory map of the regular file ``path`` if it holds ``size``
    (> 0) bytes, else ``None`` (the caller reads it instead)."""
    if not isinstance(size, int) or size <= 0:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_BINARY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_COPY))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class CacheNote:
    """An item of a cache folder that was left alone, and why.

    ``error`` is true when an operation on an item of ours failed (permission
    denied, say); false when the item was skipped on purpose (not ours, a symlink).
    """

    path: str
    reason: str
    error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"path": self.path, "reason": self.reason, "error": self.error}


@dataclass
class CacheListing:
    """What :meth:`CompiledCache.scan` found: entries' metadata, and what it skipped."""

    directory: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[CacheNote] = field(default_factory=list)


@dataclass
class PurgeReport:
    """What :meth:`CompiledCache.purge` removed, and what it left alone and why."""

    directory: Path
    entries: int = 0
    """How many entries were removed (an entry is a ``.bin`` and its ``.json``)."""
    temp_files: int = 0
    """How many ``.tmp-*`` files left by an interrupted :meth:`CompiledCache.store` went."""
    folders: int = 0
    """How many provider folders were removed (once empty)."""
    sessions: int = 0
    """How many saved sessions were removed (a purge of every provider removes them)."""
    removed: list[str] = field(default_factory=list)
    """Every path removed: entry files, leftover temp files, emptied provider folders."""
    skipped: list[CacheNote] = field(default_factory=list)

    @property
    def errors(self) -> list[CacheNote]:
        """The notes of items of ours that could not be removed."""
        return [n for n in self.skipped if n.error]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "directory": str(self.directory),
            "entries": self.entries,
            "temp_files": self.temp_files,
            "folders": self.folders,
            "sessions": self.sessions,
            "removed": list(self.removed),
            "skipped": [n.to_dict() for n in self.skipped],
        }


class _Dir:
    """A folder whose children are named relative to it, never through a symlink.

    With ``dir_fd`` support the folder is held open (``fd``) and every call
    resolves names against it; elsewhere names are joined to ``path``.
    """

    __slots__ = ("fd", "path")

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def open_root(cls, path: Path) -> _Dir:
        """Open the cache folder itself; a symlink is followed (the user chose it)."""
        if not _USE_DIR_FD:
            if not path.is_dir():
                raise NotADirectoryError(f"not a folder: {path}")
            return cls(path, None)
        return cls(path, os.open(path, os.O_RDONLY | _O_DIRECTORY))

    def _at(self, name: str) -> tuple[str, int | None]:
        return (name, self.fd) if self.fd is not None else (str(self.path / name), None)

    def child(self, name: str) -> _Dir:
        """Open the sub-folder ``name``; fails if it is (now) a symlink."""
        if self.fd is None:
            st = os.stat(self.path / name, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"not a folder: {self.path / name}")
            return _Dir(self.path / name, None)
        fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW, dir_fd=self.fd)
        return _Dir(self.path / name, fd)

    def scandir(self) -> list[os.DirEntry[str]]:
        """The folder's entries, sorted by name."""
        with os.scandir(self.fd if self.fd is not None else self.path) as it:
            return sorted(it, key=lambda e: e.name)

    def lstat(self, name: str) -> os.stat_result:
        """``lstat`` of a child."""
        target, dir_fd = self._at(name)
        return os.stat(target, dir_fd=dir_fd, follow_symlinks=False)

    def read(self, name: str, limit: int) -> bytes:
        """A regular file's bytes; refuses a symlink, anything else, or more than ``limit``."""
        target, dir_fd = self._at(name)
        flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_BINARY
        with os.fdopen(os.open(target, flags, dir_fd=dir_fd), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ValueError("not a regular file")
            if st.st_size > limit:
                raise ValueError(f"larger than {limit} bytes")
            return f.read(limit + 1)

    def unlink(self, name: str) -> None:
        """Remove a child file (a symlink itself, never its target)."""
        target, dir_fd = self._at(name)
        os.unlink(target, dir_fd=dir_fd)

    def rmdir(self, name: str) -> None:
        """Remove an empty child folder."""
        target, dir_fd = self._at(name)
        os.rmdir(target, dir_fd=dir_fd)

    def close(self) -> None:
        """Release the folder's descriptor, if any."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_link(entry: os.DirEntry[str]) -> bool:
    # A Windows junction is a link too (DirEntry.is_junction: Python 3.12+).
    return entry.is_symlink() or bool(getattr(entry, "is_junction", lambda: False)())


def _oserror(exc: OSError) -> str:
    return exc.strerror or str(exc)


@dataclass
class _Entry:
    """The files of one key found in a provider folder."""

    key: str
    files: list[str] = field(default_factory=list)  # "<key>.bin" and/or "<key>.json"
    meta: dict[str, Any] | None = None
    problem: str = ""  # why the entry is not recognised as ours, if it is not


@dataclass
class _FolderScan:
    entries: list[_Entry] = field(default_factory=list)
    temps: list[tuple[str, float]] = field(default_factory=list)  # (name, mtime)
    queries: list[str] = field(default_factory=list)  # a bridge's kept query answers


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
        data: bytes | memoryview | None = _map_file(data_path, size) if mapped else None
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

    # -- listing and purging -------------------------------------------------------

    def _open_root(self) -> _Dir | None:
        """The cache folder, or ``None`` when it does not exist (an empty cache)."""
        if not os.path.lexists(self.directory):
            return None
        try:
            return _Dir.open_root(self.directory)
        except FileNotFoundError:  # a dangling symlink
            return None
        except OSError as exc:
            raise InvalidArgument(
                f"cache folder {self.directory}: cannot open it ({_oserror(exc)})"
            ) from exc

    def _folders(
        self, root: _Dir, provider: str | None, notes: list[CacheNote]
    ) -> Iterator[tuple[str, _Dir]]:
        """The provider folders to look into (only ``provider``'s when given);
        never the saved sessions' folder."""
        try:
            children = root.scandir()
        except OSError as exc:
            raise InvalidArgument(
                f"cache folder {self.directory}: cannot list it ({_oserror(exc)})"
            ) from exc
        for e in children:
            if e.name == SESSION_FOLDER:
                continue
            if provider is not None and e.name != provider:
                continue
            path = str(root.path / e.name)
            if _is_link(e):
                notes.append(CacheNote(path, "symlink, not followed"))
            elif not e.is_dir(follow_symlinks=False):
                notes.append(CacheNote(path, "not a cache entry (a file beside the folders)"))
            elif not is_provider_folder_name(e.name):
                notes.append(CacheNote(path, "not a provider folder name"))
            else:
                try:
                    folder = root.child(e.name)
                except OSError as exc:
                    notes.append(CacheNote(path, f"cannot open: {_oserror(exc)}", error=True))
                    continue
                with folder:
                    yield e.name, folder

    def _scan_folder(self, folder: _Dir, provider: str, notes: list[CacheNote]) -> _FolderScan:
        """Sort a provider folder's children into entries, temp files and the rest."""
        out = _FolderScan()
        by_key: dict[str, _Entry] = {}
        try:
            children = folder.scandir()
        except OSError as exc:
            notes.append(CacheNote(str(folder.path), f"cannot list: {_oserror(exc)}", error=True))
            return out
        for e in children:
            path = str(folder.path / e.name)
            m = _ENTRY_RE.fullmatch(e.name)
            query = _QUERY_RE.fullmatch(e.name) is not None
            ours = m is not None or query or _TEMP_RE.fullmatch(e.name) is not None
            if _is_link(e):
                notes.append(CacheNote(path, "symlink, not followed"))
            elif not ours:
                notes.append(CacheNote(path, "not a cache entry"))
            elif not e.is_file(follow_symlinks=False):
                notes.append(CacheNote(path, "not a regular file"))
            elif query:
                out.queries.append(e.name)
            elif m is None:
                try:
                    out.temps.append((e.name, e.stat(follow_symlinks=False).st_mtime))
                except OSError as exc:
                    notes.append(CacheNote(path, f"cannot stat: {_oserror(exc)}", error=True))
            else:
                by_key.setdefault(m.group(1), _Entry(m.group(1))).files.append(e.name)
        for key, entry in sorted(by_key.items()):
            if f"{key}.json" in entry.files:
                entry.meta, entry.problem = self._read_meta(folder, provider, key)
            out.entries.append(entry)
        return out

    @staticmethod
    def _read_meta(folder: _Dir, provider: str, key: str) -> tuple[dict[str, Any] | None, str]:
        """An entry's metadata, or ``None`` and why it is not ours to trust."""
        try:
            meta = json.loads(folder.read(f"{key}.json", _META_LIMIT).decode("utf-8"))
        except OSError as exc:
            return None, f"metadata unreadable: {_oserror(exc)}"
        except ValueError as exc:  # also UnicodeDecodeError and json's errors
            return None, f"metadata unreadable: {exc}"
        if not isinstance(meta, dict):
            return None, "metadata is not a JSON object"
        if meta.get("key") != key or meta.get("provider") != provider:
            return None, "metadata names another entry (its key or provider differ)"
        return meta, ""

    def scan(self, provider: str | None = None) -> CacheListing:
        """Every entry's metadata (only ``provider``'s when given), and what was skipped.

        Nothing inside the folder is followed through a symlink; malformed
        metadata, incomplete entries and foreign files are noted, not fatal. A
        folder that does not exist is an empty cache.

        Raises:
            InvalidArgument: the cache folder is a file or cannot be read.
        """
        listing = CacheListing(self.directory)
        root = self._open_root()
        if root is None:
            return listing
        with root:
            for name, folder in self._folders(root, provider, listing.skipped):
                found = self._scan_folder(folder, name, listing.skipped)
                for entry in found.entries:
                    base = folder.path / entry.key
                    if entry.problem:
                        for f in entry.files:
                            listing.skipped.append(CacheNote(str(folder.path / f), entry.problem))
                    elif entry.meta is None:
                        listing.skipped.append(
                            CacheNote(f"{base}.bin", "incomplete entry: no metadata (.json)")
                        )
                    elif f"{entry.key}.bin" not in entry.files:
                        listing.skipped.append(
                            CacheNote(f"{base}.json", "incomplete entry: no data (.bin)")
                        )
                    else:
                        listing.entries.append({**entry.meta, "path": f"{base}.bin"})
        listing.entries.sort(key=lambda m: (str(m.get("provider")), str(m.get("created"))))
        return listing

    def entries(self) -> list[dict[str, Any]]:
        """Metadata of every entry, by provider then creation time (see :meth:`scan`)."""
        return self.scan().entries

    def purge(self, provider: str | None = None) -> PurgeReport:
        """Delete every entry (or only ``provider``'s) and report what was done.

        Only what :meth:`store` writes is removed (see the module docstring):
        entries, leftover temp files older than :data:`TEMP_GRACE_S`, and a
        provider folder once it is empty. Symlinks inside the cache are never
        followed; foreign files stay. A failure on one item (permission denied)
        is noted in the report's ``skipped`` (with ``error`` set) and the purge
        goes on. A folder that does not exist is an empty cache.

        Raises:
            InvalidArgument: the cache folder is a file or cannot be read.
        """
        report = PurgeReport(self.directory)
        root = self._open_root()
        if root is None:
            return report
        now = time.time()
        with root:
            if provider is None:
                self._purge_sessions(root, report)
            for name, folder in self._folders(root, provider, report.skipped):
                found = self._scan_folder(folder, name, report.skipped)
                for entry in found.entries:
                    if entry.problem:
                        for f in entry.files:
                            report.skipped.append(CacheNote(str(folder.path / f), entry.problem))
                        continue
                    # metadata first: without it the entry is a miss at once
                    ok = all(
                        self._remove(folder, f, report)
                        for f in sorted(entry.files, key=lambda f: not f.endswith(".json"))
                    )
                    report.entries += ok
                for query in found.queries:
                    self._remove(folder, query, report)
                for tmp, mtime in found.temps:
                    if now - mtime < TEMP_GRACE_S:
                        report.skipped.append(
                            CacheNote(
                                str(folder.path / tmp),
                                f"temp file younger than {TEMP_GRACE_S:.0f} s "
                                "(a store may be writing it)",
                            )
                        )
                    else:
                        report.temp_files += self._remove(folder, tmp, report)
                self._remove_if_empty(root, folder, name, report)
        return report

    @staticmethod
    def _purge_sessions(root: _Dir, report: PurgeReport) -> None:
        """Remove the saved sessions (their ``.onnx`` and ``.meta`` files, and
        leftover temp files) and the remembered file digests, then their
        folders once empty."""
        try:
            if not stat.S_ISDIR(root.lstat(SESSION_FOLDER).st_mode):
                return  # absent, or not a real folder (a symlink is not followed)
        except OSError:
            return

        def is_session_file(e: os.DirEntry[str]) -> bool:
            named = _SESSION_RE.fullmatch(e.name) is not None
            return (named and e.is_file(follow_symlinks=False)) or bool(_TEMP_RE.fullmatch(e.name))

        def is_digest_file(e: os.DirEntry[str]) -> bool:
            named = _DIGEST_RE.fullmatch(e.name) or _TEMP_RE.fullmatch(e.name)
            return named is not None and e.is_file(follow_symlinks=False)

        def digests(folder: _Dir, e: os.DirEntry[str]) -> bool:
            if e.name != DIGEST_FOLDER or not e.is_dir(follow_symlinks=False):
                return False
            CompiledCache._purge_folder(folder, DIGEST_FOLDER, is_digest_file, "digest", report)
            return True

        removed = CompiledCache._purge_folder(
            root, SESSION_FOLDER, is_session_file, "saved session", report, digests
        )
        report.sessions += len(
            {m.group(1) for m in map(_SESSION_RE.fullmatch, removed) if m is not None}
        )

    @staticmethod
    def _purge_folder(
        parent: _Dir,
        name: str,
        wanted: Callable[[os.DirEntry[str]], bool],
        what: str,
        report: PurgeReport,
        visit: Callable[[_Dir, os.DirEntry[str]], bool] | None = None,
    ) -> list[str]:
        """Remove the entries of ``parent``'s sub-folder ``name`` that ``wanted``
        accepts (``visit`` may take an entry first; any other is reported as
        "not a ``what``"), then the folder once empty; the names removed."""
        try:
            folder = parent.child(name)
        except OSError:
            return []
        removed: list[str] = []
        with folder:
            try:
                children = folder.scandir()
            except OSError as exc:
                report.skipped.append(
                    CacheNote(str(folder.path), f"cannot list: {_oserror(exc)}", error=True)
                )
                return removed
            for e in children:
                if visit is not None and visit(folder, e):
                    continue
                if not wanted(e):
                    report.skipped.append(CacheNote(str(folder.path / e.name), f"not a {what}"))
                    continue
                if CompiledCache._remove(folder, e.name, report):
                    removed.append(e.name)
            try:
                if not folder.scandir():
                    parent.rmdir(name)
                    report.removed.append(str(folder.path))
            except OSError:
                pass
        return removed

    @staticmethod
    def _remove(folder: _Dir, name: str, report: PurgeReport) -> bool:
        path = str(folder.path / name)
        try:
            folder.unlink(name)
        except FileNotFoundError:
            return True  # gone already (another purge): nothing left to do
        except OSError as exc:
            report.skipped.append(CacheNote(path, f"cannot remove: {_oserror(exc)}", error=True))
            return False
        report.removed.append(path)
        return True

    @staticmethod
    def _remove_if_empty(root: _Dir, folder: _Dir, name: str, report: PurgeReport) -> None:
        try:
            if folder.scandir():
                return
            root.rmdir(name)
        except FileNotFoundError:
            return
        except OSError as exc:
            report.skipped.append(
                CacheNote(str(folder.path), f"cannot remove folder: {_oserror(exc)}", error=True)
            )
            return
        report.removed.append(str(folder.path))
        report.folders += 1


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
