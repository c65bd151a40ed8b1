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

The protocols are ``runtime_checkable``: ``isinstance(x, ep_sdk.Allocator)``
checks that the methods exist (not their signatures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["HOST_DEVICE", "Allocator", "DataTransfer", "Device", "DeviceTensor", "HostAllocator"]


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


class HostAllocator:
    """The host's allocator: ``numpy.empty``."""

    __slots__ = ()

    def allocate(self, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
        """Return ``numpy.empty(shape, dtype)``."""
        return np.empty(tuple(shape), dtype=dtype)
