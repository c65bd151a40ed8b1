"""The GPU backend: pycuda for memory, streams and kernels; cuBLAS (through ctypes) for GEMMs.

Never imported unless the provider runs on a GPU. Everything runs in the
device's primary context (shared with cuBLAS, torch and CuPy), on streams
the provider creates; the kernels (:func:`ortcore_cuda.kernels.all_kernels`)
are compiled once per device architecture by nvcc through pycuda, in
:data:`CHUNKS` translation units compiled side by side (one nvcc process
each: a single unit of thousands of kernels takes minutes), whose compiler
cache keeps the cubins across processes.

.. warning:: No GPU was available while this was written: this module has
   run only as far as ``import`` and ``unavailable_reason`` on machines
   without one (see docs/cuda.md for what ran where).
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np

from .kernels import all_kernels
from .kernels.spec import SCALARS, Kernel, translation_unit

__all__ = ["CHUNKS", "PyCudaBackend", "chunks", "cublas_unavailable_reason"]

CHUNKS = 16
"""Translation units the kernels are compiled in, side by side."""


def chunks(kernels: Sequence[Kernel], count: int = CHUNKS) -> list[list[Kernel]]:
    """``kernels`` in at most ``count`` consecutive runs of near-equal length."""
    size = -(-len(kernels) // max(count, 1)) or 1
    return [list(kernels[i : i + size]) for i in range(0, len(kernels), size)]


_CUDA_R = {np.dtype(np.float32): 0, np.dtype(np.float16): 2}  # cudaDataType
_COMPUTE_32F = 68  # CUBLAS_COMPUTE_32F
_GEMM_DEFAULT = -1  # CUBLAS_GEMM_DEFAULT


def _cublas_dirs() -> list[str]:
    dirs: list[str] = []
    for package in ("nvidia.cu13", "nvidia.cublas"):
        try:
            module = __import__(package, fromlist=["__path__"])
            dirs += [os.path.join(p, "lib") for p in module.__path__]
        except ImportError:
            continue
    dirs += [d for d in os.environ.get("CUBLAS_LIB_DIR", "").split(os.pathsep) if d]
    return dirs


@cache
def _load_cublas() -> Any:
    """libcublas (libcublasLt first, globally: libcublas needs it)."""
    for d in _cublas_dirs():
        found = sorted(glob.glob(os.path.join(d, "libcublas.so.*")))
        lt = sorted(glob.glob(os.path.join(d, "libcublasLt.so.*")))
        if found and lt:
            ctypes.CDLL(lt[0], mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(found[0])
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("libcublas cannot be found (pip install nvidia-cublas, or set CUBLAS_LIB_DIR)")


def cublas_unavailable_reason() -> str | None:
    """Why cuBLAS cannot be loaded, or ``None``."""
    try:
        _load_cublas()
    except OSError as exc:
        return f"cuBLAS is missing: {exc}"
    return None


class PyCudaBackend:
    """The GPU (see the module docstring)."""

    name = "gpu"

    def __init__(self, ordinal: int) -> None:
        import pycuda.driver as drv
        from pycuda.compiler import compile as nvcc

        self.drv = drv
        drv.init()
        self.device = drv.Device(ordinal)
        self.context = self.device.retain_primary_context()
        self.context.push()
        major, minor = self.device.compute_capability()
        arch = f"sm_{major}{minor}"
        parts = chunks(all_kernels())
        sources = [translation_unit(part) for part in parts]
        with ThreadPoolExecutor(max_workers=min(len(parts), os.cpu_count() or 1)) as pool:
            cubins = list(pool.map(lambda src: nvcc(src, no_extern_c=True, arch=arch), sources))
        self.modules = [drv.module_from_buffer(cubin) for cubin in cubins]
        self._home = {k.name: i for i, part in enumerate(parts) for k in part}
        self._functions: dict[str, Any] = {}
        self._allocations: dict[int, Any] = {}
        self._streams: dict[int, Any] = {0: None}
        lib = _load_cublas()
        self._cublas = lib
        handle = ctypes.c_void_p()
        status = lib.cublasCreate_v2(ctypes.byref(handle))
        if status:
            raise RuntimeError(f"cublasCreate_v2 failed with status {status}")
        self._handle = handle
        lib.cublasGemmStridedBatchedEx.restype = ctypes.c_int

    def alloc(self, nbytes: int) -> int:
        """See :meth:`ortcore_cuda.backend.Backend.alloc`."""
        allocation = self.drv.mem_alloc(max(int(nbytes), 1))
        self._allocations[int(allocation)] = allocation
        return int(allocation)

    def free(self, ptr: int) -> None:
        """See :meth:`ortcore_cuda.backend.Backend.free`."""
        self._allocations.pop(ptr).free()

    def stream(self) -> int:
        """See :meth:`ortcore_cuda.backend.Backend.stream`."""
        s = self.drv.Stream()
        self._streams[int(s.handle)] = s
        return int(s.handle)

    def synchronize(self, stream: int) -> None:
        """See :meth:`ortcore_cuda.backend.Backend.synchronize`."""
        s = self._streams[stream]
        if s is None:
            self.drv.Context.synchronize()
        else:
            s.synchronize()

    def upload(self, ptr: int, array: np.ndarray, stream: int) -> None:
        """See :meth:`ortcore_cuda.backend.Backend.upload`."""
        self.drv.memcpy_htod_async(ptr, array, self._streams[stream])

    def download(self, array: np.ndarray, ptr: int, stream: int) -> None:
        """See :meth:`ortcore_cuda.backend.Backend.download`."""
        self.drv.memcpy_dtoh_async(array, ptr, self._streams[stream])

    def copy(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """See :meth:`ortcore_cuda.backend.Backend.copy`."""
        self.drv.memcpy_dtod_async(dst, src, nbytes, self._streams[stream])

    def launch(
        self, kernel: Kernel, grid: int, block: int, args: Sequence[Any], stream: int
    ) -> None:
        """See :meth:`ortcore_cuda.backend.Backend.launch`."""
        fn = self._functions.get(kernel.name)
        if fn is None:
            module = self.modules[self._home[kernel.name]]
            fn = self._functions[kernel.name] = module.get_function(kernel.name)
        packed: list[Any] = []
        for p, a in zip(kernel.params, args):
            if p.is_pointer:
                packed.append(np.uintp(a))
            elif kernel.struct(p.ctype) is not None:
                packed.append(np.asarray(a)[()])  # a numpy record: passed by value
            else:
                packed.append(SCALARS[p.ctype].type(a))
        fn(*packed, block=(int(block), 1, 1), grid=(int(grid), 1), stream=self._streams[stream])

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
        """See :meth:`ortcore_cuda.backend.Backend.gemm`."""
        # Row-major C (m x n) = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
        lib, t = self._cublas, _CUDA_R[np.dtype(dtype)]
        lib.cublasSetStream_v2(self._handle, ctypes.c_void_p(stream or None))
        lda = m if trans_a else k
        ldb = k if trans_b else n
        one, zero = ctypes.c_float(alpha), ctypes.c_float(beta)
        status = lib.cublasGemmStridedBatchedEx(
            self._handle,
            ctypes.c_int(1 if trans_b else 0),
            ctypes.c_int(1 if trans_a else 0),
            ctypes.c_int(n),
            ctypes.c_int(m),
            ctypes.c_int(k),
            ctypes.byref(one),
            ctypes.c_void_p(b),
            ctypes.c_int(t),
            ctypes.c_int(ldb),
            ctypes.c_longlong(stride_b),
            ctypes.c_void_p(a),
            ctypes.c_int(t),
            ctypes.c_int(lda),
            ctypes.c_longlong(stride_a),
            ctypes.byref(zero),
            ctypes.c_void_p(c),
            ctypes.c_int(t),
            ctypes.c_int(n),
            ctypes.c_longlong(stride_c),
            ctypes.c_int(batch),
            ctypes.c_int(_COMPUTE_32F),
            ctypes.c_int(_GEMM_DEFAULT),
        )
        if status:
            raise RuntimeError(f"cublasGemmStridedBatchedEx failed with status {status}")
