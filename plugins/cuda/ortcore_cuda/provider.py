"""The CUDA execution provider: device-resident tensors, generated kernels, cuBLAS GEMMs.

* Device: ``Device("cuda", device_id)``. Values live in
  :class:`~ortcore_cuda.tensor.CudaTensor` s from a caching allocator
  (:mod:`ortcore_cuda.allocator`); the core inserts copies only where the
  partition changes device, through :meth:`to_host` / :meth:`from_host`
  (on the provider's stream; ``to_host`` waits for it).
* Kernels: :mod:`ortcore_cuda.ops` over the sources of
  :mod:`ortcore_cuda.kernels`; what they do not cover is declined with the
  reason and runs on the next provider.
* Backend (:mod:`ortcore_cuda.backend`): the GPU through pycuda and cuBLAS,
  or, with ``backend=emulator`` (or ``ORTCORE_CUDA_EMULATE=1``, which also
  makes the provider available on a machine without a GPU), the CPU
  emulation that runs the same kernel sources.
* Options named like onnxruntime's CUDA EP where they mean the same:
  ``device_id``, ``gpu_mem_limit`` (bytes; 0: none), ``arena_extend_strategy``
  (``kNextPowerOfTwo``, ``kSameAsRequested``), ``do_copy_in_default_stream``
  and ``cudnn_conv_algo_search`` (accepted for onnxruntime's sake; copies and
  kernels share the provider's stream, and no kernel uses cuDNN yet), and
  ``backend`` (``auto``, ``gpu``, ``emulator``); unknown ones are refused.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import threading
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar

import ep_sdk
import numpy as np
from ep_sdk.hardware import VENDOR_IDS, cuda_devices

from . import __version__
from .allocator import STRATEGIES, CachingAllocator
from .backend import Backend, EmulatedBackend
from .kernels import elementwise as ew
from .kernels.spec import Kernel
from .tensor import CudaTensor

__all__ = ["EMULATE_ENV", "CUDAExecutionProvider"]

EMULATE_ENV = "ORTCORE_CUDA_EMULATE"
"""``1``: the provider is available without a GPU and runs on the CPU emulation."""

_MIN_CC = (6, 0)
_SUFFIXES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
_KINDS = ("auto", "gpu", "emulator")


def _emulating() -> bool:
    return os.environ.get(EMULATE_ENV, "") == "1"


class _Allocator:
    """``ep_sdk.Allocator`` of the provider: CUDA tensors from its arena."""

    __slots__ = ("provider",)

    def __init__(self, provider: CUDAExecutionProvider) -> None:
        self.provider = provider

    def allocate(self, shape: Sequence[int], dtype: Any) -> CudaTensor:
        return self.provider.empty(shape, dtype)


class CUDAExecutionProvider(ep_sdk.ExecutionProvider):
    """Runs nodes on an NVIDIA GPU (or its CPU emulation); see the module docstring."""

    name = "CUDAExecutionProvider"
    aliases = ("cuda",)
    version = __version__
    priority = 55  # after TensorRT (60), before OpenVINO (50) and the CPU provider (0)
    vendor = "ortcore"
    device = ep_sdk.Device("cuda", 0)
    default_options: ClassVar[Mapping[str, str]] = {
        "device_id": "0",
        "gpu_mem_limit": "0",
        "arena_extend_strategy": "kNextPowerOfTwo",
        "cudnn_conv_algo_search": "EXHAUSTIVE",
        "do_copy_in_default_stream": "1",
        "backend": "auto",
    }

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: ep_sdk.SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        o = self.options
        for key in ("device_id", "gpu_mem_limit"):
            if not o[key].strip().isdigit():
                raise ep_sdk.ProviderOptionError(
                    f"{self.name}: {key} must be a whole number >= 0, got {o[key]!r}"
                )
        self.device_id = int(o["device_id"])
        self.device = ep_sdk.Device("cuda", self.device_id)
        self.mem_limit = int(o["gpu_mem_limit"])
        choices = {
            "arena_extend_strategy": STRATEGIES,
            "cudnn_conv_algo_search": _SEARCH,
            "do_copy_in_default_stream": ("0", "1"),
            "backend": _KINDS,
        }
        for key, allowed in choices.items():
            if o[key] not in allowed:
                raise ep_sdk.ProviderOptionError(
                    f"{self.name}: {key} must be one of {', '.join(allowed)}, got {o[key]!r}"
                )
        kind = o["backend"]
        self.emulated = kind == "emulator" or (kind == "auto" and _emulating())
        self._lock = threading.Lock()

    # -- availability ------------------------------------------------------------

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why it cannot run here: pycuda missing or without a driver, no
        device, a device older than compute capability 6.0, or cuBLAS
        missing. With ``ORTCORE_CUDA_EMULATE=1`` it runs on the CPU
        emulation instead, which needs only a C++ compiler."""
        if _emulating():
            if shutil.which(os.environ.get("CXX", "g++")) is None:
                return f"{EMULATE_ENV}=1, but there is no C++ compiler (g++) for the emulation"
            return None
        return gpu_unavailable_reason()

    @classmethod
    def ep_devices(cls) -> Sequence[ep_sdk.EpDevice]:
        """The devices the provider runs on, each with ``ep_options``
        ``{"device_id": ordinal}``: under emulation, the one emulated device
        (metadata ``Emulated`` = ``"1"``); else the NVIDIA devices the driver
        sees (:func:`ep_sdk.hardware.cuda_devices`) of compute capability
        6.0 or newer. Nothing when the provider cannot run here."""
        if cls.unavailable_reason() is not None:
            return []
        if _emulating():
            emulated = ep_sdk.HardwareDevice(
                ep_sdk.HardwareDeviceType.GPU,
                "NVIDIA",
                VENDOR_IDS["NVIDIA"],
                metadata={
                    "Description": "ortcore CUDA emulation (on the host CPU)",
                    "Discrete": "1",
                    "Emulated": "1",
                },
            )
            return [ep_sdk.EpDevice(emulated, {"backend": "emulator"}, {"device_id": "0"})]
        found = cuda_devices()
        if isinstance(found, str):
            return []
        out = []
        for hw in found:
            major, _, minor = hw.metadata.get("ComputeCapability", "0.0").partition(".")
            if (int(major), int(minor or 0)) < _MIN_CC:
                continue
            ordinal = hw.metadata.get("CudaOrdinal", "0")
            out.append(ep_sdk.EpDevice(hw, {"backend": "gpu"}, {"device_id": ordinal}))
        return out

    # -- the device ----------------------------------------------------------------

    @cached_property
    def backend(self) -> Backend:
        """Where the work goes: one per device and process, shared by every
        provider instance on the device (as the device's memory is), made on
        first use."""
        return _backend(self.emulated, self.device_id)

    @cached_property
    def stream(self) -> int:
        """The provider's stream: kernels and copies, in order."""
        return self.backend.stream()

    @cached_property
    def arena(self) -> CachingAllocator:
        """The caching allocator of device memory."""
        b = self.backend
        return CachingAllocator(
            b.alloc,
            b.free,
            b.synchronize,
            self.mem_limit,
            self.options["arena_extend_strategy"],
        )

    @property
    def max_grid(self) -> int:
        """The most blocks a grid-stride kernel is launched with (few under
        the emulation, whose threads are OS threads)."""
        return 2 if self.emulated else 65535

    def allocator(self) -> ep_sdk.Allocator:
        """CUDA tensors from the arena."""
        return _Allocator(self)

    def empty(self, shape: Sequence[int], dtype: Any) -> CudaTensor:
        """An uninitialized device tensor."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = self.arena.allocate(nbytes, self.stream)
        return CudaTensor(self, block, shape, dtype)

    def launch(self, kernel: Kernel, grid: int, block: int, *args: Any) -> None:
        """``kernel<<<grid, block, 0, stream>>>(args)``."""
        self.backend.launch(kernel, grid, block, args, self.stream)

    def launch_over(self, kernel: Kernel, n: int, *args: Any, threads: int = 256) -> None:
        """Launch a grid-stride ``kernel`` over ``n`` elements: blocks of
        ``threads``, as many as cover ``n``, at most :attr:`max_grid`."""
        grid = max(1, min(-(-n // threads), self.max_grid))
        self.backend.launch(kernel, grid, threads, args, self.stream)

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

    # -- data movement ----------------------------------------------------------------

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
            raise TypeError(f"{self.name}: expected a CUDA tensor, got {type(value).__name__}")
        out = np.empty(value.shape, value.dtype)
        if out.nbytes:
            self.backend.download(out, value.ptr, self.stream)
        self.backend.synchronize(self.stream)
        return out

    # -- capability ---------------------------------------------------------------------

    def kernel_registry(self) -> ep_sdk.KernelRegistry:
        """The kernels of :mod:`ortcore_cuda.ops` (built once per process)."""
        return _registry()

    def get_capability(self, graph: ep_sdk.GraphContext) -> ep_sdk.Capability:
        """The nodes the registry covers, less what :func:`~ortcore_cuda.ops.decline_reason`
        says the kernels do not handle."""
        from .ops import decline_reason

        cap = super().get_capability(graph)
        kept = []
        for claim in cap.claims:
            node = claim.nodes[0]
            why = decline_reason(node, graph)
            if why is None:
                kept.append(claim)
            else:
                cap.declined[node] = why
        cap.claims = kept
        return cap

    def close(self) -> None:
        """Wait for the stream and free the cached device memory."""
        if "arena" in self.__dict__:
            self.backend.synchronize(self.stream)
            self.arena.empty_cache()


_SHARED: dict[tuple[bool, int], Backend] = {}
_SHARED_LOCK = threading.Lock()


def _backend(emulated: bool, ordinal: int) -> Backend:
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


_REGISTRY: list[ep_sdk.KernelRegistry] = []
_REGISTRY_LOCK = threading.Lock()


def _registry() -> ep_sdk.KernelRegistry:
    with _REGISTRY_LOCK:
        if not _REGISTRY:
            from .ops import build_registry

            _REGISTRY.append(build_registry())
        return _REGISTRY[0]


def gpu_unavailable_reason() -> str | None:
    """Why the GPU backend cannot run here, or ``None`` (see
    :meth:`CUDAExecutionProvider.unavailable_reason`). Never raises."""
    if importlib.util.find_spec("pycuda") is None:
        return (
            "pycuda is not installed (pip install pycuda; it builds from source against "
            f"the CUDA toolkit); set {EMULATE_ENV}=1 to run on the CPU emulation"
        )
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        return f"pycuda cannot load the NVIDIA driver ({exc})"
    try:
        drv.init()
        count = drv.Device.count()
        if count == 0:
            return "the NVIDIA driver sees no CUDA device"
        major, minor = drv.Device(0).compute_capability()
    except Exception as exc:  # pycuda.driver.Error is not a builtin RuntimeError
        return f"the NVIDIA driver reports no usable device ({type(exc).__name__}: {exc})"
    if (major, minor) < _MIN_CC:
        return f"compute capability {major}.{minor}; the provider needs 6.0 or newer"
    from .pycuda_backend import cublas_unavailable_reason

    return cublas_unavailable_reason()
