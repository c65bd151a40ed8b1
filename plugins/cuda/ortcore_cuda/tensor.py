"""The provider's device tensor: a block of its caching allocator, a shape and a dtype."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .allocator import Block

if TYPE_CHECKING:
    from .provider import CUDAExecutionProvider

__all__ = ["CudaTensor"]


class CudaTensor:
    """A tensor in device memory (``ep_sdk.DeviceTensor``).

    Its block goes back to the allocator (ordered on the provider's stream)
    when the tensor is garbage; ``numpy()`` copies it to the host. On a real
    GPU it exports ``__cuda_array_interface__`` (version 3), so torch and
    CuPy can read it without a copy.
    """

    __slots__ = ("__weakref__", "_provider", "block", "dtype", "shape")

    def __init__(
        self, provider: CUDAExecutionProvider, block: Block, shape: Sequence[int], dtype: Any
    ) -> None:
        self._provider = provider
        self.block = block
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        weakref.finalize(self, provider.arena.release, block, provider.stream)

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
        """Block until the work queued so far on the stream of the provider
        that made this tensor is done (before another stream reads it)."""
        self._provider.backend.synchronize(self._provider.stream)

    def numpy(self) -> np.ndarray:
        """A host copy."""
        return self._provider.to_host(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA array interface (a GPU backend only: an emulated tensor's
        memory is host memory, which a CUDA consumer must not be handed)."""
        if self._provider.backend.name == "emulator":
            raise AttributeError("an emulated CUDA tensor lives in host memory")
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": self._provider.stream or 1,
        }

    def __repr__(self) -> str:
        return f"CudaTensor(shape={self.shape}, dtype={self.dtype}, device={self._provider.device})"
