"""The cache's keys: what a compiled group's entry depends on, hashed.

:func:`content_digest` covers the group's structure and the bytes of every
constant it reads, hashed in slices on several threads (memory-mapped data
is streamed, never gathered); the store adds the provider's parts
(:meth:`ortcore.cache.CompiledCache.key_parts`). Saved sessions hash model
files with :func:`hash_file` and arrays with :func:`hash_arrays`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ep_sdk import FusedGroup
from ep_sdk.graph import group_digest

__all__ = ["content_digest", "hash_arrays", "hash_file"]

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


def hash_arrays(h: Any, named: list[tuple[str, np.ndarray]]) -> None:
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


def hash_file(h: Any, fd: int, size: int) -> None:
    """What ``hash_arrays(h, [("file", content)])`` adds for a file of
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
    hash_arrays(h, named)
    return h.hexdigest()
