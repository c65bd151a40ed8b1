"""``OrtValue``: a tensor that lives on the host or on a provider's device.

A host value wraps a numpy array (sharing its memory, as onnxruntime does).
A device value holds whatever the device's provider uses for tensors, and
moves with that provider's ``to_host``/``from_host``. Device types are
``"cpu"`` and the ``device.type`` of any installed provider (``"cuda"``,
or ``"fake"`` in ortcore's tests).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ep_sdk import HOST_DEVICE, Device, ExecutionProvider
from ep_sdk.dtypes import DataType, from_numpy, to_numpy, type_string

from .errors import InvalidArgument

__all__ = ["OrtValue", "device_of", "numpy_dtype"]

_movers: dict[Device, ExecutionProvider] = {}
_movers_lock = threading.Lock()


def device_of(device_type: str, device_id: int = 0) -> Device:
    """The :class:`ep_sdk.Device` for onnxruntime's ``device_type``/``device_id`` pair."""
    if not isinstance(device_type, str):
        raise InvalidArgument(f"device_type must be a string such as 'cpu', not {device_type!r}")
    kind = device_type.lower()
    return HOST_DEVICE if kind == "cpu" else Device(kind, int(device_id))


def numpy_dtype(element_type: Any) -> np.dtype:
    """A numpy dtype from a numpy type, dtype, or ONNX element type number."""
    if isinstance(element_type, (int, DataType)) and not isinstance(element_type, bool):
        return to_numpy(DataType(int(element_type)))
    try:
        return np.dtype(element_type)
    except TypeError:
        raise InvalidArgument(f"unsupported element type {element_type!r}") from None


def _mover_for(device: Device) -> ExecutionProvider:
    """A provider instance (default options) that moves data to and from ``device``."""
    with _movers_lock:
        mover = _movers.get(device)
        if mover is not None:
            return mover
        from .plugins import default_manager

        entries = [
            e
            for e in default_manager().available()
            if e.cls is not None and e.cls.device.type == device.type
        ]
        for e in entries:
            assert e.cls is not None
            if e.cls.device.id == device.id:
                mover = e.cls()
            elif "device_id" in e.cls.default_options:
                mover = e.cls({"device_id": str(device.id)})
            else:
                continue
            _movers[device] = mover
            return mover
    known = sorted({e.cls.device.type for e in default_manager().available() if e.cls})
    raise InvalidArgument(
        f"no available provider owns device {device}; device types available: {known}"
    )


class OrtValue:
    """A tensor on the host or a device (``onnxruntime.OrtValue``).

    Create one with :meth:`ortvalue_from_numpy` or
    :meth:`ortvalue_from_shape_and_type`; sessions return them from
    ``run_with_ort_values`` and ``IOBinding.get_outputs``.
    """

    __slots__ = ("_value", "_device", "_mover", "_shape", "_dtype")

    def __init__(
        self,
        value: Any,
        device: Device = HOST_DEVICE,
        mover: ExecutionProvider | None = None,
        shape: Sequence[int] | None = None,
        dtype: np.dtype | None = None,
    ) -> None:
        self._value = value
        self._device = device
        self._mover = mover
        if device.is_host and isinstance(value, (np.ndarray, np.generic)):
            shape, dtype = value.shape, value.dtype
        elif shape is None:
            shape, dtype = _peek(value)
        self._shape = tuple(int(d) for d in shape) if shape is not None else None
        self._dtype = np.dtype(dtype) if dtype is not None else None

    # -- construction ------------------------------------------------------

    @staticmethod
    def ortvalue_from_numpy(array: Any, device_type: str = "cpu", device_id: int = 0) -> OrtValue:
        """Wrap ``array`` (on the host: sharing its memory) or copy it onto a device."""
        device = device_of(device_type, device_id)
        arr = np.asarray(array)
        if device.is_host:
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            return OrtValue(arr)
        mover = _mover_for(device)
        return OrtValue(mover.from_host(arr), device, mover, arr.shape, arr.dtype)

    @staticmethod
    def ortvalue_from_shape_and_type(
        shape: Sequence[int],
        element_type: Any,
        device_type: str = "cpu",
        device_id: int = 0,
    ) -> OrtValue:
        """A new zero-filled tensor of ``shape`` and ``element_type`` (a numpy type)."""
        arr = np.zeros([int(d) for d in shape], dtype=numpy_dtype(element_type))
        return OrtValue.ortvalue_from_numpy(arr, device_type, device_id)

    # -- onnxruntime API ---------------------------------------------------

    def numpy(self) -> np.ndarray:
        """The tensor as a numpy array (a copy to the host for device values)."""
        if self._device.is_host:
            return np.asarray(self._value)
        assert self._mover is not None
        return self._mover.to_host(self._value)

    def shape(self) -> list[int]:
        """The tensor's dims."""
        if self._shape is None:
            host = self.numpy()
            self._shape, self._dtype = host.shape, host.dtype
        return list(self._shape)

    def data_type(self) -> str:
        """onnxruntime's type string, e.g. ``tensor(float)``."""
        return type_string(from_numpy(self._numpy_dtype()))

    def element_type(self) -> int:
        """The ONNX element type number (``1`` for float)."""
        return int(from_numpy(self._numpy_dtype()))

    def device_name(self) -> str:
        """``"cpu"``, or the device type of the provider holding the value."""
        return self._device.type

    def is_tensor(self) -> bool:
        """Always ``True``: ortcore's OrtValues are tensors."""
        return True

    def has_value(self) -> bool:
        """Whether the value holds data (``False`` only for an empty optional)."""
        return self._value is not None

    def data_ptr(self) -> int:
        """Address of a host tensor's data (for ``IOBinding.bind_input``)."""
        if not self._device.is_host:
            raise InvalidArgument(f"data_ptr() of a value on {self._device} is not available")
        return int(self._value.ctypes.data)

    def update_inplace(self, array: Any) -> None:
        """Overwrite the tensor's contents with ``array`` (same shape and type)."""
        arr = np.asarray(array, dtype=self._numpy_dtype())
        if list(arr.shape) != self.shape():
            raise InvalidArgument(f"update_inplace: shape {arr.shape} != {self.shape()}")
        if self._device.is_host:
            np.copyto(self._value, arr)
        else:
            assert self._mover is not None
            self._value = self._mover.from_host(arr)

    # -- ortcore internals -------------------------------------------------

    @property
    def device(self) -> Device:
        """Where the value lives."""
        return self._device

    @property
    def value(self) -> Any:
        """The raw value: a numpy array, or the device provider's tensor object."""
        return self._value

    def _numpy_dtype(self) -> np.dtype:
        if self._dtype is None:
            self.shape()
        assert self._dtype is not None
        return self._dtype

    def _store(self, value: Any) -> None:
        """Take a run's result into this (preallocated, bound) value."""
        if self._device.is_host:
            arr = np.asarray(value)
            if self._shape is not None and arr.shape != self._shape:
                raise InvalidArgument(
                    f"output of shape {list(arr.shape)} does not fit the bound buffer "
                    f"of shape {list(self._shape)}"
                )
            np.copyto(self._value, arr, casting="same_kind")
            return
        self._value = value
        self._shape, self._dtype = _peek(value)

    def __repr__(self) -> str:
        shape = self._shape if self._shape is not None else "?"
        return f"<OrtValue {shape} on {self._device}>"


def _peek(value: Any) -> tuple[Any, Any]:
    """Shape and dtype of a device value that exposes them, else ``(None, None)``."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None, None
    try:
        return tuple(int(d) for d in shape), np.dtype(dtype)
    except TypeError:
        return None, None
