"""Where the provider's device work goes: a GPU through pycuda and cuBLAS, or the CPU emulation.

The provider is written against :class:`Backend`: raw device memory, copies
on a stream, kernel launches and batched GEMMs. Two implement it:

* :class:`ortcore_cuda.pycuda_backend.PyCudaBackend`: the GPU. Memory from
  ``cuMemAlloc``, the kernels compiled once per device from
  :func:`ortcore_cuda.kernels.all_kernels` (nvcc through pycuda, cached),
  GEMMs by cuBLAS, all on the provider's stream in the device's primary
  context.
* :class:`EmulatedBackend`: no GPU. "Device" memory is host memory, kernels
  run under the CPU emulation of CUDA (:mod:`ortcore_cuda.emulator`: their
  own source, compiled with g++), GEMMs by numpy (cuBLAS is NVIDIA's
  library, not code of ours: the emulation stands in for the library call,
  with its arguments checked as cuBLAS would read them). Streams are
  ordered by construction (everything runs at once, in order). It exists so
  that the provider's whole device path (allocation, copies, launches,
  planning, IO binding) runs on machines without a GPU: option
  ``backend=emulator``.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Sequence
from functools import cache
from typing import Any, Protocol

import numpy as np

from .kernels.spec import Kernel

__all__ = ["Backend", "EmulatedBackend"]


class Backend(Protocol):
    """What the provider needs of a device."""

    name: str

    def alloc(self, nbytes: int) -> int:
        """A new device buffer of ``nbytes`` (> 0) bytes; its address."""

    def free(self, ptr: int) -> None:
        """Release a buffer :meth:`alloc` returned."""

    def stream(self) -> int:
        """A new stream's handle."""

    def synchronize(self, stream: int) -> None:
        """Wait for everything queued on ``stream``."""

    def upload(self, ptr: int, array: np.ndarray, stream: int) -> None:
        """Copy the C-contiguous ``array`` to ``ptr``; ``array`` must stay
        alive and unchanged until ``stream`` is synchronized."""

    def download(self, array: np.ndarray, ptr: int, stream: int) -> None:
        """Copy ``array.nbytes`` from ``ptr`` into the C-contiguous ``array``
        (complete once ``stream`` is synchronized)."""

    def copy(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """Device-to-device copy."""

    def launch(
        self, kernel: Kernel, grid: int, block: int, args: Sequence[Any], stream: int
    ) -> None:
        """``kernel<<<grid, block, 0, stream>>>(args)``: addresses for pointer
        parameters, numbers, numpy records for structs."""

    def gemm(
        self,
        dtype: np.dtype,
        trans_a: bool,
        trans_b: bool,
        m: int,
        n: int,
        k: int,
        alpha: float,
        a: int,
        stride_a: int,
        b: int,
        stride_b: int,
        beta: float,
        c: int,
        stride_c: int,
        batch: int,
        stream: int,
    ) -> None:
        """Row-major, batched: ``C[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i]``
        for ``i < batch``; ``op(A)`` is ``m x k`` (``A`` is ``k x m`` when
        ``trans_a``), ``op(B)`` is ``k x n``, ``C`` is ``m x n``, each
        contiguous; strides in elements between batch items (0: the same
        matrix for every item)."""


@cache
def _emulator() -> Any:
    from .emulator import Emulator
    from .kernels import all_kernels

    return Emulator(all_kernels())


class EmulatedBackend:
    """The CPU stand-in for a GPU (see the module docstring)."""

    name = "emulator"

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._streams = itertools.count(1)
        self.allocs = self.frees = self.launches = self.gemms = 0
        self.uploads = self.downloads = self.copies = 0

    def alloc(self, nbytes: int) -> int:
        """See :meth:`Backend.alloc`."""
        buf = np.empty(max(int(nbytes), 1), np.uint8)
        ptr = int(buf.ctypes.data)
        with self._lock:
            self.buffers[ptr] = buf
            self.allocs += 1
        return ptr

    def free(self, ptr: int) -> None:
        """See :meth:`Backend.free`."""
        with self._lock:
            del self.buffers[ptr]
            self.frees += 1

    def stream(self) -> int:
        """See :meth:`Backend.stream`."""
        return next(self._streams)

    def synchronize(self, stream: int) -> None:
        """See :meth:`Backend.synchronize`."""
        pass  # every call below is complete when it returns

    def _check(self, ptr: int, nbytes: int, what: str) -> None:
        """An access of ``nbytes`` at ``ptr`` must lie in one live buffer: the
        emulation catches what would be an illegal address on a GPU."""
        with self._lock:
            for base, buf in self.buffers.items():
                if base <= ptr and ptr + nbytes <= base + buf.nbytes:
                    return
        raise RuntimeError(f"{what}: {nbytes} bytes at {ptr:#x} are not in device memory")

    def upload(self, ptr: int, array: np.ndarray, stream: int) -> None:
        """See :meth:`Backend.upload`."""
        self._check(ptr, array.nbytes, "upload")
        ctypes.memmove(ptr, array.ctypes.data, array.nbytes)
        self.uploads += 1

    def download(self, array: np.ndarray, ptr: int, stream: int) -> None:
        """See :meth:`Backend.download`."""
        self._check(ptr, array.nbytes, "download")
        ctypes.memmove(array.ctypes.data, ptr, array.nbytes)
        self.downloads += 1

    def copy(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """See :meth:`Backend.copy`."""
        self._check(src, nbytes, "copy from")
        self._check(dst, nbytes, "copy to")
        ctypes.memmove(dst, src, nbytes)
        self.copies += 1

    def launch(
        self, kernel: Kernel, grid: int, block: int, args: Sequence[Any], stream: int
    ) -> None:
        """See :meth:`Backend.launch`."""
        self.launches += 1
        _emulator().launch(kernel.name, grid, block, *args)

    def _matrix(self, ptr: int, dtype: np.dtype, count: int) -> np.ndarray:
        self._check(ptr, count * dtype.itemsize, "gemm operand")
        raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
        return np.frombuffer(memoryview(raw).cast("B"), dtype, count)

    def gemm(
        self,
        dtype: np.dtype,
        trans_a: bool,
        trans_b: bool,
        m: int,
        n: int,
        k: int,
        alpha: float,
        a: int,
        stride_a: int,
        b: int,
        stride_b: int,
        beta: float,
        c: int,
        stride_c: int,
        batch: int,
        stream: int,
    ) -> None:
        """See :meth:`Backend.gemm`."""
        self.gemms += 1
        dtype = np.dtype(dtype)
        for i in range(batch):
            am = self._matrix(a + i * stride_a * dtype.itemsize, dtype, m * k)
            bm = self._matrix(b + i * stride_b * dtype.itemsize, dtype, k * n)
            cm = self._matrix(c + i * stride_c * dtype.itemsize, dtype, m * n)
            ma = am.reshape(k, m).T if trans_a else am.reshape(m, k)
            mb = bm.reshape(n, k).T if trans_b else bm.reshape(k, n)
            # accumulate in float32 as cuBLAS does for float16 (CUBLAS_COMPUTE_32F)
            acc = alpha * (ma.astype(np.float32) @ mb.astype(np.float32))
            if beta:
                acc += beta * cm.reshape(m, n).astype(np.float32)
            cm[:] = acc.astype(dtype).reshape(-1)
