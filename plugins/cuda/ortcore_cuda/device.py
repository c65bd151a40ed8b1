"""The device as kernels see it: tensors from the arena, and the tensor operations they share.

:class:`CudaDevice` is a :class:`~ortcore_cuda.runtime.CudaRuntime` (the
backend, the stream, the arena, launches) that makes
:class:`~ortcore_cuda.tensor.CudaTensor` s: empty ones, copies, transposes,
broadcasts, matrix products, uploads and downloads. It is the
``ep_sdk.Allocator`` the provider hands out (``provider.allocator()``), so
a kernel reaches it through what it is given (``info.provider.allocator()``,
see :func:`ortcore_cuda.ops_common.device_of`), not through the provider's
internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ep_sdk
import numpy as np

from .kernels import elementwise as ew
from .runtime import CudaRuntime
from .tensor import CudaTensor

__all__ = ["CudaDevice"]

_SUFFIXES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


class CudaDevice(CudaRuntime):
    """A provider's device: tensors from its arena, work on its stream.

    Args:
        device: the ``ep_sdk.Device`` (its ``id`` is the CUDA ordinal).
        emulated: run on the CPU emulation instead of the GPU.
        mem_limit: the arena's limit in bytes (0: none).
        strategy: the arena's extend strategy (``allocator.STRATEGIES``).
        owner: the provider's name, for errors.
    """

    def __init__(
        self,
        device: ep_sdk.Device,
        *,
        emulated: bool,
        mem_limit: int = 0,
        strategy: str,
        owner: str = "CUDAExecutionProvider",
    ) -> None:
        super().__init__(device, emulated=emulated, mem_limit=mem_limit, strategy=strategy)
        self.owner = owner

    def allocate(self, shape: Sequence[int], dtype: Any) -> CudaTensor:
        """An uninitialized device tensor (``ep_sdk.Allocator``)."""
        return self.empty(shape, dtype)

    def empty(self, shape: Sequence[int], dtype: Any) -> CudaTensor:
        """An uninitialized device tensor."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = self.arena.allocate(nbytes, self.stream)
        return CudaTensor(self, block, shape, dtype)

    def copy(self, x: CudaTensor, shape: Sequence[int]) -> CudaTensor:
        """A device copy of ``x`` under ``shape`` (as many elements)."""
        y = self.empty(shape, x.dtype)
        if x.nbytes:
            self.backend.copy(y.ptr, x.ptr, x.nbytes, self.stream)
        return y

    def copy_broadcast(self, x: CudaTensor, out: CudaTensor) -> None:
        """Fill ``out`` with ``x`` broadcast to its shape."""
        shape, rank, s = ew.broadcast_args(x.shape, out.shape)
        if shape != out.shape:
            raise ValueError(f"{x.shape} does not broadcast to {out.shape}")
        if out.size:
            kernel = ew.transpose_kernel(x.dtype.itemsize, rank)
            self.launch_over(kernel, out.size, x.ptr, out.ptr, out.size, s)

    def transpose(self, x: CudaTensor, perm: Sequence[int]) -> CudaTensor:
        """``x`` with its axes permuted by ``perm``, as a new device tensor."""
        if x.ndim == 0:
            return self.copy(x, x.shape)
        out, s = ew.permute_args(x.shape, perm)
        y = self.empty(out, x.dtype)
        if y.size:
            kernel = ew.transpose_kernel(x.dtype.itemsize, x.ndim)
            self.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, s)
        return y

    def add_inplace(self, y: CudaTensor, b: CudaTensor, shape: Sequence[int]) -> None:
        """``y += b`` with ``b`` viewed as ``shape`` and broadcast to ``y``."""
        out, rank, s = ew.broadcast_args(y.shape, tuple(shape))
        if out != y.shape:
            raise ValueError(f"{tuple(shape)} does not broadcast to {y.shape}")
        kernel = ew.binary_kernel("Add", _SUFFIXES[y.dtype], rank)
        self.launch_over(kernel, y.size, y.ptr, b.ptr, y.ptr, y.size, s)

    def matmul(self, a: CudaTensor, b: CudaTensor, info: Any = None) -> CudaTensor:
        """numpy's ``matmul`` of two device tensors (batch dims broadcast):
        one GEMM when ``b`` is a matrix (batch folded into rows) or when the
        batch dims agree (strided batched), else one per batch item."""
        if a.dtype != b.dtype:
            raise TypeError(f"MatMul of {a.dtype} and {b.dtype}")
        a_shape = (1, *a.shape) if a.ndim == 1 else a.shape
        b_shape = (*b.shape, 1) if b.ndim == 1 else b.shape
        (m, k), (k2, n) = a_shape[-2:], b_shape[-2:]
        if k != k2:
            raise ValueError(f"MatMul of {a.shape} and {b.shape}: inner dims {k} and {k2}")
        ba, bb = tuple(a_shape[:-2]), tuple(b_shape[:-2])
        batch = tuple(np.broadcast_shapes(ba, bb))
        out = self.empty((*batch, m, n), a.dtype)
        count = int(np.prod(batch, dtype=np.int64))
        gemm, s, t = self.backend.gemm, self.stream, a.dtype
        if out.size == 0:
            pass
        elif k == 0:
            self.backend.upload(out.ptr, np.zeros(out.size, t), s)
            self.backend.synchronize(s)
        elif not bb:  # B a matrix: A's batch folded into its rows
            gemm(t, False, False, m * count, n, k, 1.0, a.ptr, 0, b.ptr, 0, 0.0, out.ptr, 0, 1, s)
        elif ba == bb or not ba:
            sa = 0 if not ba else m * k
            gemm(
                t,
                False,
                False,
                m,
                n,
                k,
                1.0,
                a.ptr,
                sa,
                b.ptr,
                k * n,
                0.0,
                out.ptr,
                m * n,
                count,
                s,
            )
        else:
            ia = np.arange(int(np.prod(ba, dtype=np.int64))).reshape(ba)
            ib = np.arange(int(np.prod(bb, dtype=np.int64))).reshape(bb)
            pa, pb = np.broadcast_arrays(ia, ib)
            item = t.itemsize
            for i, (x, y) in enumerate(zip(pa.reshape(-1), pb.reshape(-1))):
                gemm(
                    t,
                    False,
                    False,
                    m,
                    n,
                    k,
                    1.0,
                    a.ptr + int(x) * m * k * item,
                    0,
                    b.ptr + int(y) * k * n * item,
                    0,
                    0.0,
                    out.ptr + i * m * n * item,
                    0,
                    1,
                    s,
                )
        shape = out.shape
        if a.ndim == 1:
            shape = shape[:-2] + shape[-1:]
        if b.ndim == 1:
            shape = shape[:-1]
        if shape != out.shape:
            out.shape = tuple(shape)  # same elements, same order
        return out

    def from_host(self, array: np.ndarray) -> CudaTensor:
        """Copy a numpy array to the device (on the provider's stream)."""
        host = np.ascontiguousarray(array)
        x = self.empty(np.shape(array), host.dtype)  # ascontiguousarray makes a 0-d array 1-d
        if host.nbytes:
            self.backend.upload(x.ptr, host, self.stream)
            self.backend.synchronize(self.stream)  # the host array may go away after this
        return x

    def to_host(self, value: Any) -> np.ndarray:
        """Copy a device tensor to a new numpy array (waits for the stream)."""
        if not isinstance(value, CudaTensor):
            raise TypeError(f"{self.owner}: expected a CUDA tensor, got {type(value).__name__}")
        return value.numpy()
