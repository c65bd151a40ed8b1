"""Devices and the protocols of device memory: allocators, data transfer, device tensors.

Every provider names the :class:`Device` its tensors live on
(``ExecutionProvider.device``, :data:`HOST_DEVICE` by default); the core
compares devices to decide where a value must be copied.

A host provider needs nothing else here: its tensors are numpy arrays. A provider
whose tensors live elsewhere (a GPU, an accelerator, another process) keeps
them in its own tensor type, which should satisfy :class:`DeviceTensor`, and
implements the methods of :class:`DataTransfer` on its provider class
(``to_host`` / ``from_host``; the core inserts a copy step wherever a value
crosses devices and calls them) and returns an :class:`Allocator` from
``ExecutionProvider.allocator()``.

Two providers on one device may share tensors without a copy (new in SDK
1.1): a provider that runs on another provider's device (a TensorRT bridge on
CUDA's) asks the host for a :class:`DevicePeer` of that device
(``SessionConfig.host.device_peer(Device("cuda", 0))``), the installed
provider that keeps its tensors there, and uses its copies and allocator as
its own; the tensors it reads in place satisfy :class:`ContiguousTensor`. It
names a device type, never a plugin: the host picks the provider from its
plugin table, or says why none can lend the device (:class:`NoDevicePeer`).

The protocols are ``runtime_checkable``: ``isinstance(x, ep_sdk.Allocator)``
checks that the methods exist (not their signatures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "HOST_DEVICE",
    "Allocator",
    "ContiguousTensor",
    "DataTransfer",
    "Device",
    "DevicePeer",
    "DeviceTensor",
    "HostAllocator",
    "NoDevicePeer",
]


@dataclass(frozen=True)
class Device:
    """Where a provider keeps its tensors.

    Attributes:
        type: ``"cpu"``, ``"cuda"``, or any name a provider chooses.
        id: device ordinal.
    """

    type: str = "cpu"
    id: int = 0

    @property
    def is_host(self) -> bool:
        """True for host (CPU) memory, which numpy can read directly."""
        return self.type == "cpu"

    def __str__(self) -> str:
        return f"{self.type}:{self.id}"


HOST_DEVICE = Device("cpu", 0)
"""The host (CPU) memory, device of every provider that keeps numpy arrays."""


@runtime_checkable
class DeviceTensor(Protocol):
    """What the core reads from a tensor that lives on a device.

    Attributes:
        shape: dims, as a tuple of ints.
        dtype: the numpy dtype of the elements once copied to the host.
    """

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's dims."""
        ...

    @property
    def dtype(self) -> Any:
        """The numpy dtype its elements have on the host."""
        ...


@runtime_checkable
class Allocator(Protocol):
    """Makes uninitialized tensors on one device.

    Kernels get one through ``NodeInfo.allocate``; a compiled function may use
    ``provider.allocator()`` directly.
    """

    def allocate(self, shape: Sequence[int], dtype: np.dtype) -> Any:
        """Return an uninitialized tensor of ``shape`` and ``dtype`` on the device."""
        ...


@runtime_checkable
class DataTransfer(Protocol):
    """Moves tensors between a device and the host.

    ``ExecutionProvider`` implements it; a provider whose device is not the
    host must override both methods. Copies between two devices go through
    the host (``from_host(other.to_host(x))``).
    """

    def to_host(self, value: Any) -> np.ndarray:
        """Copy a device tensor into a new numpy array."""
        ...

    def from_host(self, array: np.ndarray) -> Any:
        """Copy a numpy array into a new device tensor."""
        ...


@runtime_checkable
class ContiguousTensor(DeviceTensor, Protocol):
    """A device tensor whose elements are one C-contiguous block at a device
    address, which code on the same device may read and write in place (new
    in SDK 1.1).

    Attributes:
        ptr: the device address of the first element.
        nbytes: the bytes of the elements.
    """

    @property
    def ptr(self) -> int:
        """The device address of the first element."""
        ...

    @property
    def nbytes(self) -> int:
        """The bytes of the elements."""
        ...

    def wait(self) -> None:
        """Block until the work that makes the tensor's content is done (its
        provider's stream): call it before another stream reads the tensor."""
        ...


@runtime_checkable
class DevicePeer(DataTransfer, Protocol):
    """Another provider's device, lent by the host (new in SDK 1.1): where its
    tensors live, how they cross to and from the host, how new ones are made.

    The host hands the borrower a provider instance of its own (created with
    the session's config); the borrower uses only what this protocol names
    and closes it with :meth:`close` when it is closed itself.
    """

    @property
    def device(self) -> Device:
        """The device of the peer's tensors (the one asked for)."""
        ...

    def allocator(self) -> Allocator:
        """Makes uninitialized tensors on the device."""
        ...

    def close(self) -> None:
        """Release what the peer holds (cached device memory)."""
        ...


class NoDevicePeer(LookupError):
    """No installed provider can lend the device asked for (new in SDK 1.1).

    Attributes:
        device: the device asked for.
        installed: whether a provider of that device type is installed (it
            then cannot run here, or failed to start); ``False``: none is.
        reason: why not, in words (the provider's own reason when installed).
    """

    def __init__(self, device: Device, reason: str, *, installed: bool) -> None:
        super().__init__(reason)
        self.device = device
        self.reason = reason
        self.installed = installed


class HostAllocator:
    """The host's allocator: ``numpy.empty``."""

    __slots__ = ()

    def allocate(self, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
        """Return ``numpy.empty(shape, dtype)``."""
        return np.empty(tuple(shape), dtype=dtype)
