"""The little of CUDA's driver API the TensorRT provider needs, through ctypes.

TensorRT runs engines on device memory and a CUDA stream; without the CUDA
provider (``ortcore-cuda``) installed, this module is how values cross:
device buffers from ``cuMemAlloc``, copies on the provider's stream, all in
the device's primary context (the one cuBLAS, torch and pycuda share).

No CUDA toolkit or Python package is needed: ``libcuda.so.1`` comes with the
NVIDIA driver. :func:`probe` says what is there (used by
``unavailable_reason()``, so it never raises); :class:`CudaDriver` does the
work. Tests without a GPU use a host-memory stand-in with the same methods
(``tests/fake_trt.py``): the runtime path is written against this interface,
not against ctypes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["CudaDriver", "DeviceInfo", "Memory", "probe"]

_LIBS = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")
_CC_MAJOR, _CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*


class Memory(Protocol):
    """What the runtime needs of device memory (:class:`CudaDriver`, or a test's stand-in)."""

    def alloc(self, nbytes: int) -> int:
        """A device buffer of at least ``nbytes`` (> 0) bytes; its address."""

    def free(self, ptr: int) -> None:
        """Release a buffer :meth:`alloc` returned."""

    def stream(self) -> int:
        """A new stream's handle."""

    def to_device(self, ptr: int, array: np.ndarray, stream: int) -> None:
        """Copy a C-contiguous ``array`` to ``ptr`` (ordered on ``stream``)."""

    def to_host(self, array: np.ndarray, ptr: int, stream: int) -> None:
        """Copy ``array.nbytes`` from ``ptr`` into the C-contiguous ``array``."""

    def synchronize(self, stream: int) -> None:
        """Wait for everything queued on ``stream``."""

    def activate(self) -> None:
        """Make the device's context current on this thread."""


@dataclass(frozen=True)
class DeviceInfo:
    """What :func:`probe` found: the driver, the device and its compute capability."""

    ordinal: int
    name: str
    major: int
    minor: int

    @property
    def capability(self) -> str:
        """``"9.0"``."""
        return f"{self.major}.{self.minor}"


def _load() -> Any:
    first: OSError | None = None
    for name in (*_LIBS, ctypes.util.find_library("cuda")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            first = first or exc
    raise OSError(f"libcuda.so.1 cannot be loaded ({first})")


def _check(lib: Any, status: int, what: str) -> None:
    if status:
        text = ctypes.c_char_p()
        lib.cuGetErrorString(status, ctypes.byref(text))
        detail = text.value.decode() if text.value else f"CUresult {status}"
        raise RuntimeError(f"CUDA {what} failed: {detail}")


def probe(ordinal: int = 0) -> DeviceInfo | str:
    """The device ``ordinal`` and its compute capability, or why there is none
    (no driver, no device, too few devices). Never raises."""
    try:
        lib = _load()
    except OSError as exc:
        return f"no NVIDIA driver: {exc}"
    try:
        _check(lib, lib.cuInit(0), "cuInit")
        count = ctypes.c_int()
        _check(lib, lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value <= ordinal:
            return f"no CUDA device {ordinal} (the driver sees {count.value})"
        dev = ctypes.c_int()
        _check(lib, lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        major, minor = ctypes.c_int(), ctypes.c_int()
        _check(lib, lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, dev), "attribute")
        _check(lib, lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, dev), "attribute")
        name = ctypes.create_string_buffer(256)
        _check(lib, lib.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    except Exception as exc:  # a stub or broken driver
        return f"the NVIDIA driver answers no device: {exc}"
    return DeviceInfo(ordinal, name.value.decode(errors="replace"), major.value, minor.value)


class CudaDriver:
    """Device memory, streams and copies on one device's primary context."""

    def __init__(self, ordinal: int) -> None:
        self._lib = lib = _load()
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyHtoDAsync_v2.argtypes = [
            ctypes.c_uint64,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ]
        lib.cuMemcpyDtoHAsync_v2.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ]
        lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
        _check(lib, lib.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        _check(lib, lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self._dev = dev
        ctx = ctypes.c_void_p()
        _check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "primary context")
        self._ctx = ctx
        self._local = threading.local()

    def activate(self) -> None:
        """Make the primary context current on this thread (once per thread)."""
        if getattr(self._local, "active", False):
            return
        _check(self._lib, self._lib.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
        self._local.active = True

    def alloc(self, nbytes: int) -> int:
        """``cuMemAlloc``."""
        self.activate()
        ptr = ctypes.c_uint64()
        _check(self._lib, self._lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc")
        return int(ptr.value)

    def free(self, ptr: int) -> None:
        """``cuMemFree``."""
        self.activate()
        _check(self._lib, self._lib.cuMemFree_v2(ptr), "cuMemFree")

    def stream(self) -> int:
        """``cuStreamCreate`` (non-blocking with respect to the default stream)."""
        self.activate()
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.cuStreamCreate(ctypes.byref(handle), 1), "cuStreamCreate")
        return int(handle.value or 0)

    def to_device(self, ptr: int, array: np.ndarray, stream: int) -> None:
        """``cuMemcpyHtoDAsync``."""
        if array.nbytes:
            status = self._lib.cuMemcpyHtoDAsync_v2(ptr, array.ctypes.data, array.nbytes, stream)
            _check(self._lib, status, "host-to-device copy")

    def to_host(self, array: np.ndarray, ptr: int, stream: int) -> None:
        """``cuMemcpyDtoHAsync``."""
        if array.nbytes:
            status = self._lib.cuMemcpyDtoHAsync_v2(array.ctypes.data, ptr, array.nbytes, stream)
            _check(self._lib, status, "device-to-host copy")

    def synchronize(self, stream: int) -> None:
        """``cuStreamSynchronize``."""
        _check(self._lib, self._lib.cuStreamSynchronize(stream), "cuStreamSynchronize")
