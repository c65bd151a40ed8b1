"""A caching allocator of device memory, with stream-ordered reuse and an arena limit.

``cuMemAlloc``/``cuMemFree`` synchronize the device and cost tens of
microseconds; a run allocates every intermediate tensor. So freed blocks are
kept and handed out again:

* sizes are rounded to a size class: a multiple of 512 bytes
  (``arena_extend_strategy=kSameAsRequested``) or the next power of two
  from 512 bytes (``kNextPowerOfTwo``, onnxruntime's default: fewer
  classes, more reuse, up to 2x the memory);
* a block freed on a stream is reused at once by work on the same stream
  (the stream orders the new use after every earlier use); before a block
  freed on another stream is reused, that stream is synchronized;
* ``gpu_mem_limit`` bounds what is held (in use plus cached): an allocation
  that would pass it first releases the cached blocks, then fails with a
  :class:`DeviceOutOfMemory` that says how much is in use and the limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Block", "CachingAllocator", "DeviceOutOfMemory", "STRATEGIES"]

STRATEGIES = ("kNextPowerOfTwo", "kSameAsRequested")
_GRAIN = 512


class DeviceOutOfMemory(MemoryError):
    """An allocation the arena limit or the device cannot hold."""


@dataclass(eq=False)
class Block:
    """A device buffer: its address and size class (>= the size asked)."""

    ptr: int
    size: int
    stream: int = 0  # the stream it was last freed on


class CachingAllocator:
    """See the module docstring.

    Args:
        alloc, free, synchronize: the backend's raw allocation, release and
            stream synchronization.
        limit: the most bytes held at once (0: no limit but the device's).
        strategy: one of :data:`STRATEGIES`.
    """

    def __init__(
        self,
        alloc: Callable[[int], int],
        free: Callable[[int], None],
        synchronize: Callable[[int], None],
        limit: int = 0,
        strategy: str = "kNextPowerOfTwo",
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"arena_extend_strategy must be one of {', '.join(STRATEGIES)}")
        self._alloc, self._free, self._sync = alloc, free, synchronize
        self.limit = limit
        self.strategy = strategy
        self._cached: dict[int, list[Block]] = {}  # size class -> free blocks
        self._lock = threading.Lock()
        self.held = 0  # bytes in use or cached
        self.in_use = 0
        self.peak = 0
        self.raw_allocs = 0

    def size_class(self, nbytes: int) -> int:
        """What a request of ``nbytes`` takes."""
        n = max(int(nbytes), 1)
        if self.strategy == "kSameAsRequested":
            return -(-n // _GRAIN) * _GRAIN
        size = _GRAIN
        while size < n:
            size *= 2
        return size

    def allocate(self, nbytes: int, stream: int) -> Block:
        """A block of at least ``nbytes`` for work on ``stream``.

        Raises:
            DeviceOutOfMemory: past ``gpu_mem_limit`` even with the cache
                released, or the device itself is full.
        """
        size = self.size_class(nbytes)
        with self._lock:
            free = self._cached.get(size)
            if free:
                # one freed on this stream first: no wait
                index = next((i for i, b in enumerate(free) if b.stream == stream), -1)
                block = free.pop(index)
                if block.stream != stream:
                    self._sync(block.stream)
                block.stream = stream
                self._take(size)
                return block
            if self.limit and self.held + size > self.limit:
                self._release_cached()
                if self.held + size > self.limit:
                    raise DeviceOutOfMemory(
                        f"CUDA: allocating {nbytes} bytes would pass gpu_mem_limit="
                        f"{self.limit} ({self.in_use} bytes in use)"
                    )
            try:
                ptr = self._alloc(size)
            except Exception as exc:  # the device is full: drop the cache, try once more
                self._release_cached()
                try:
                    ptr = self._alloc(size)
                except Exception:
                    raise DeviceOutOfMemory(
                        f"CUDA: the device could not allocate {size} bytes "
                        f"({self.in_use} in use by this session): {exc}"
                    ) from exc
            self.raw_allocs += 1
            self.held += size
            self._take(size)
            return Block(ptr, size, stream)

    def _take(self, size: int) -> None:
        self.in_use += size
        self.peak = max(self.peak, self.in_use)

    def release(self, block: Block, stream: int) -> None:
        """Give ``block`` back after work queued on ``stream``; it is reused,
        not freed (see :meth:`empty_cache`)."""
        with self._lock:
            block.stream = stream
            self.in_use -= block.size
            self._cached.setdefault(block.size, []).append(block)

    def _release_cached(self) -> None:
        for blocks in self._cached.values():
            for b in blocks:
                self._sync(b.stream)
                self._free(b.ptr)
                self.held -= b.size
        self._cached.clear()

    def empty_cache(self) -> None:
        """Free every cached block (the blocks in use stay)."""
        with self._lock:
            self._release_cached()

    @property
    def cached(self) -> int:
        """Bytes held in the cache, ready for reuse."""
        return self.held - self.in_use
