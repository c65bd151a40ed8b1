"""The CUDA execution provider: device-resident tensors, generated kernels, cuBLAS GEMMs.

* Device: ``Device("cuda", device_id)``, held by a
  :class:`~ortcore_cuda.device.CudaDevice` (:attr:`runtime`; the backend,
  the stream, the arena, launches). Values live in
  :class:`~ortcore_cuda.tensor.CudaTensor` s from a caching allocator
  (:mod:`ortcore_cuda.allocator`); the core inserts copies only where the
  partition changes device, through :meth:`to_host` / :meth:`from_host`
  (on the provider's stream; ``to_host`` waits for it).
* Kernels: the op families of :mod:`ortcore_cuda.registry` over the sources of
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
from .backend import Backend
from .device import CudaDevice
from .kernels.spec import Kernel
from .runtime import shared_backend as _backend  # noqa: F401  (where it was)
from .tensor import CudaTensor

__all__ = ["EMULATE_ENV", "CUDAExecutionProvider"]

EMULATE_ENV = "ORTCORE_CUDA_EMULATE"
"""``1``: the provider is available without a GPU and runs on the CPU emulation."""

_MIN_CC = (6, 0)
_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
_KINDS = ("auto", "gpu", "emulator")


def _emulating() -> bool:
    return os.environ.get(EMULATE_ENV, "") == "1"


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
    def runtime(self) -> CudaDevice:
        """The provider's device: the backend, its stream, its arena, launches
        and the tensor operations kernels share (made cheaply; the backend,
        the stream and the arena wait for first use)."""
        return CudaDevice(
            self.device,
            emulated=self.emulated,
            mem_limit=self.mem_limit,
            strategy=self.options["arena_extend_strategy"],
            owner=self.name,
        )

    @property
    def backend(self) -> Backend:
        """Where the work goes: one per device and process, shared by every
        provider instance on the device (as the device's memory is), made on
        first use."""
        return self.runtime.backend

    @property
    def stream(self) -> int:
        """The provider's stream: kernels and copies, in order."""
        return self.runtime.stream

    @property
    def arena(self) -> CachingAllocator:
        """The caching allocator of device memory."""
        return self.runtime.arena

    @property
    def max_grid(self) -> int:
        """The most blocks a grid-stride kernel is launched with (few under
        the emulation, whose threads are OS threads)."""
        return self.runtime.max_grid

    def allocator(self) -> ep_sdk.Allocator:
        """The provider's device (:class:`~ortcore_cuda.device.CudaDevice`):
        CUDA tensors from the arena, and what kernels launch with."""
        return self.runtime

    def empty(self, shape: Sequence[int], dtype: Any) -> CudaTensor:
        """An uninitialized device tensor."""
        return self.runtime.empty(shape, dtype)

    def launch(self, kernel: Kernel, grid: int, block: int, *args: Any) -> None:
        """``kernel<<<grid, block, 0, stream>>>(args)``."""
        self.runtime.launch(kernel, grid, block, *args)

    def launch_over(self, kernel: Kernel, n: int, *args: Any, threads: int = 256) -> None:
        """Launch a grid-stride ``kernel`` over ``n`` elements (see
        :meth:`~ortcore_cuda.runtime.CudaRuntime.launch_over`)."""
        self.runtime.launch_over(kernel, n, *args, threads=threads)

    def copy(self, x: CudaTensor, shape: Sequence[int]) -> CudaTensor:
        """A device copy of ``x`` under ``shape`` (as many elements)."""
        return self.runtime.copy(x, shape)

    def copy_broadcast(self, x: CudaTensor, out: CudaTensor) -> None:
        """Fill ``out`` with ``x`` broadcast to its shape."""
        self.runtime.copy_broadcast(x, out)

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
        self.runtime.strided_copy(src, dst, dims, src_strides, dst_strides, itemsize)

    def transpose(self, x: CudaTensor, perm: Sequence[int]) -> CudaTensor:
        """``x`` with its axes permuted by ``perm``, as a new device tensor."""
        return self.runtime.transpose(x, perm)

    def add_inplace(self, y: CudaTensor, b: CudaTensor, shape: Sequence[int]) -> None:
        """``y += b`` with ``b`` viewed as ``shape`` and broadcast to ``y``."""
        self.runtime.add_inplace(y, b, shape)

    def matmul(self, a: CudaTensor, b: CudaTensor, info: Any = None) -> CudaTensor:
        """numpy's ``matmul`` of two device tensors (see
        :meth:`~ortcore_cuda.device.CudaDevice.matmul`)."""
        return self.runtime.matmul(a, b, info)

    # -- data movement ----------------------------------------------------------------

    def from_host(self, array: np.ndarray) -> CudaTensor:
        """Copy a numpy array to the device (on the provider's stream)."""
        return self.runtime.from_host(array)

    def to_host(self, value: Any) -> np.ndarray:
        """Copy a device tensor to a new numpy array (waits for the stream)."""
        return self.runtime.to_host(value)

    # -- capability ---------------------------------------------------------------------

    def kernel_registry(self) -> ep_sdk.KernelRegistry:
        """The kernels of :mod:`ortcore_cuda.registry` (built once per process)."""
        return _registry()

    def get_capability(self, graph: ep_sdk.GraphContext) -> ep_sdk.Capability:
        """The nodes the registry covers, less what
        :func:`~ortcore_cuda.registry.decline_reason` says the kernels do not handle."""
        from .registry import decline_reason

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
        if "runtime" in self.__dict__:
            self.runtime.close()


_REGISTRY: list[ep_sdk.KernelRegistry] = []
_REGISTRY_LOCK = threading.Lock()


def _registry() -> ep_sdk.KernelRegistry:
    with _REGISTRY_LOCK:
        if not _REGISTRY:
            from .registry import build_registry

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
