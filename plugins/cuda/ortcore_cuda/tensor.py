"""The provider's device tensor: a block of its runtime's caching allocator, a shape and a dtype."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .allocator import Block
from .runtime import CudaRuntime

__all__ = ["CudaTensor"]


class CudaTensor:
    """A tensor in device memory (``ep_sdk.DeviceTensor``).

    Its block goes back to the allocator (ordered on the runtime's stream)
    when the tensor is garbage; ``numpy()`` copies it to the host. On a real
    GPU it exports ``__cuda_array_interface__`` (version 3), so torch and
    CuPy can read it without a copy.
    """

    __slots__ = ("__weakref__", "_runtime", "block", "dtype", "shape")

    def __init__(
        self, runtime: CudaRuntime, block: Block, shape: Sequence[int], dtype: Any
    ) -> None:
        self._runtime = runtime
        self.block = block
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        weakref.finalize(self, runtime.arena.release, block, runtime.stream)

    @property
    def ptr(self) -> int:
        """The device address of the first element."""
        return self.block.ptr

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes of the elements."""
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def wait(self) -> None:
        """Block until the work queued so far on the stream of the runtime
        that made this tensor is done (before another stream reads it)."""
        self._runtime.synchronize()

    def numpy(self) -> np.ndarray:
        """A host copy (waits for the stream)."""
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self._runtime.backend.download(out, self.ptr, self._runtime.stream)
        self._runtime.synchronize()
        return out

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA array interface (a GPU backend only: an emulated tensor's
        memory is host memory, which a CUDA consumer must not be handed)."""
        if self._runtime.backend.name == "emulator":
            raise AttributeError("an emulated CUDA tensor lives in host memory")
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": self._runtime.stream or 1,
        }

    def __repr__(self) -> str:
        return f"CudaTensor(shape={self.shape}, dtype={self.dtype}, device={self._runtime.device})"
