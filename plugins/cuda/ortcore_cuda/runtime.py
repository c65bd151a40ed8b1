"""One provider's hold on its device: the backend, a stream, the arena, and launches on the stream.

The bottom of the plugin's layers (``runtime`` -> ``tensor`` -> ``device``
-> op helpers -> op families -> registry -> provider): addresses, bytes and
kernels, no tensors. The backend is shared by every provider instance on the
device (as the device's memory is); the stream and the caching allocator
(:mod:`ortcore_cuda.allocator`) are the provider's own. All three are made
on first use, so that making a provider stays cheap.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import ep_sdk
import numpy as np

from .allocator import CachingAllocator
from .backend import Backend, EmulatedBackend
from .kernels import elementwise as ew
from .kernels.spec import Kernel

__all__ = ["CudaRuntime", "shared_backend"]


class CudaRuntime:
    """The device of one provider instance, at the level of addresses.

    Args:
        device: the ``ep_sdk.Device`` (its ``id`` is the CUDA ordinal).
        emulated: run on the CPU emulation instead of the GPU.
        mem_limit: the arena's limit in bytes (0: none).
        strategy: the arena's extend strategy (``allocator.STRATEGIES``).
    """

    def __init__(
        self, device: ep_sdk.Device, *, emulated: bool, mem_limit: int = 0, strategy: str
    ) -> None:
        self.device = device
        self.emulated = emulated
        self.mem_limit = mem_limit
        self.strategy = strategy

    @cached_property
    def backend(self) -> Backend:
        """Where the work goes: one per device and process, made on first use."""
        return shared_backend(self.emulated, self.device.id)

    @cached_property
    def stream(self) -> int:
        """The stream: kernels and copies, in order."""
        return self.backend.stream()

    @cached_property
    def arena(self) -> CachingAllocator:
        """The caching allocator of device memory."""
        b = self.backend
        return CachingAllocator(b.alloc, b.free, b.synchronize, self.mem_limit, self.strategy)

    @property
    def max_grid(self) -> int:
        """The most blocks a grid-stride kernel is launched with (few under
        the emulation, whose threads are OS threads)."""
        return 2 if self.emulated else 65535

    def synchronize(self) -> None:
        """Wait for everything queued on the stream."""
        self.backend.synchronize(self.stream)

    def launch(self, kernel: Kernel, grid: int, block: int, *args: Any) -> None:
        """``kernel<<<grid, block, 0, stream>>>(args)``."""
        self.backend.launch(kernel, grid, block, args, self.stream)

    def launch_over(self, kernel: Kernel, n: int, *args: Any, threads: int = 256) -> None:
        """Launch a grid-stride ``kernel`` over ``n`` elements: blocks of
        ``threads``, as many as cover ``n``, at most :attr:`max_grid`."""
        grid = max(1, min(-(-n // threads), self.max_grid))
        self.backend.launch(kernel, grid, threads, args, self.stream)

    def strided_copy(
        self,
        src: int,
        dst: int,
        dims: Sequence[int],
        src_strides: Sequence[int],
        dst_strides: Sequence[int],
        itemsize: int,
    ) -> None:
        """For each index ``c`` of ``dims``: ``dst[c . dst_strides] = src[c . src_strides]``
        (elements of ``itemsize`` bytes, addresses in bytes)."""
        count = int(np.prod(dims, dtype=np.int64))
        if not count:
            return
        if not dims:
            dims, src_strides, dst_strides = [1], [0], [0]
        kernel = ew.transpose_kernel(itemsize, len(dims))
        args = ew.copy_args(dims, src_strides, dst_strides)
        self.launch_over(kernel, count, src, dst, count, args)

    def close(self) -> None:
        """Wait for the stream and free the cached device memory (if any was held)."""
        if "arena" in self.__dict__:
            self.synchronize()
            self.arena.empty_cache()


_SHARED: dict[tuple[bool, int], Backend] = {}
_SHARED_LOCK = threading.Lock()


def shared_backend(emulated: bool, ordinal: int) -> Backend:
    """The process's backend for device ``ordinal`` (or its emulation), made on first use."""
    with _SHARED_LOCK:
        found = _SHARED.get((emulated, ordinal))
        if found is None:
            if emulated:
                found = EmulatedBackend()
            else:
                from .pycuda_backend import PyCudaBackend

                found = PyCudaBackend(ordinal)
            _SHARED[(emulated, ordinal)] = found
        return found
