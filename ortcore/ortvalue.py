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
from typing import TYPE_CHECKING, Any

import numpy as np

from ep_sdk import HOST_DEVICE, Device, ExecutionProvider
from ep_sdk.dtypes import DataType, from_numpy, to_numpy, type_string

from .errors import InvalidArgument, InvalidArgumentRuntimeError, InvalidArgumentTypeError

if TYPE_CHECKING:
    from .sparse_tensor import SparseTensor

__all__ = ["OrtValue", "OrtValueVector", "device_of", "numpy_dtype"]

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
    # onnxruntime raises RuntimeError for a device its build cannot allocate on.
    raise InvalidArgumentRuntimeError(
        f"no available provider owns device {device}; device types available: {known}"
    )


class OrtValue:
    """A tensor on the host or a device (``onnxruntime.OrtValue``).

    Create one with :meth:`ortvalue_from_numpy` or
    :meth:`ortvalue_from_shape_and_type`; sessions return them from
    ``run_with_ort_values`` and ``IOBinding.get_outputs``.
    """

    __slots__ = ("_value", "_device", "_mover", "_shape", "_dtype", "_sparse", "_onnx_type")
    _value: Any
    _device: Device
    _mover: ExecutionProvider | None
    _shape: tuple[int, ...] | None
    _dtype: np.dtype | None

    def __init__(
        self,
        value: Any,
        device: Device = HOST_DEVICE,
        mover: ExecutionProvider | None = None,
        shape: Sequence[int] | None = None,
        dtype: np.dtype | None = None,
    ) -> None:
        self._sparse: SparseTensor | None = None
        self._onnx_type: int | None = None
        if isinstance(value, OrtValue):  # onnxruntime's OrtValue(c_value) wraps another
            src = value
            value, device, mover = src._value, src._device, src._mover
            shape = src._shape if shape is None else shape
            dtype = src._dtype if dtype is None else dtype
            self._sparse, self._onnx_type = src._sparse, src._onnx_type
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
    def ortvalue_from_numpy(
        array: Any, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1
    ) -> OrtValue:
        """Wrap ``array`` (on the host: sharing its memory) or copy it onto a device.

        ``vendor_id`` is accepted for onnxruntime's signature; ortcore finds a
        device by its type and number.
        """
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
        vendor_id: int = -1,
    ) -> OrtValue:
        """A new zero-filled tensor of ``shape`` and ``element_type`` (a numpy
        type or an ONNX element type number)."""
        arr = np.zeros([int(d) for d in shape], dtype=numpy_dtype(element_type))
        return OrtValue.ortvalue_from_numpy(arr, device_type, device_id)

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data: np.ndarray, onnx_element_type: int) -> OrtValue:
        """Wrap ``data`` (no copy) as a tensor of ONNX element type
        ``onnx_element_type``, reinterpreting its bytes: a ``uint16`` array
        becomes ``bfloat16``, for types numpy has no native dtype for.

        Raises:
            InvalidArgumentRuntimeError: the element sizes differ (onnxruntime
                raises ``RuntimeError``).
        """
        arr = np.ascontiguousarray(data)
        target = numpy_dtype(int(onnx_element_type))
        if target.itemsize != arr.dtype.itemsize:
            raise InvalidArgumentRuntimeError(
                f"Items size in the incoming array: {arr.dtype.itemsize} specified by onnxtype: "
                f"{target.itemsize}"
            )
        value = OrtValue(arr.view(target))
        value._onnx_type = int(onnx_element_type)
        return value

    @staticmethod
    def ort_value_from_sparse_tensor(sparse_tensor: SparseTensor) -> OrtValue:
        """An OrtValue holding a :class:`~ortcore.SparseTensor`."""
        values = sparse_tensor.values()
        value = OrtValue(
            None, shape=[int(d) for d in sparse_tensor.dense_shape()], dtype=values.dtype
        )
        value._sparse = sparse_tensor
        return value

    @staticmethod
    def from_dlpack(data: Any, is_bool_tensor: bool = False) -> OrtValue:
        """An OrtValue sharing the memory of a DLPack tensor (an object with
        ``__dlpack__``, such as a torch tensor or numpy array, or a DLPack
        capsule). Only host (CPU) memory is taken.

        Args:
            data: the tensor or capsule.
            is_bool_tensor: reinterpret ``uint8`` data as ``bool`` (older
                exporters write booleans as bytes).
        """
        source = data if hasattr(data, "__dlpack__") else _Capsule(data)
        arr = np.from_dlpack(source)
        if is_bool_tensor and arr.dtype == np.uint8:
            arr = arr.view(np.bool_)
        return OrtValue(arr)

    # -- onnxruntime API ---------------------------------------------------

    def _get_c_value(self) -> OrtValue:
        """The native-layer value onnxruntime's Python ``OrtValue`` wraps: ortcore's
        OrtValue is its own native value, so this is the value itself."""
        return self

    @property
    def _ortvalue(self) -> OrtValue:
        """onnxruntime's attribute for :meth:`_get_c_value`: the value itself."""
        return self

    def numpy(self) -> np.ndarray:
        """The tensor as a numpy array (a copy to the host for device values)."""
        if self._sparse is not None:
            raise InvalidArgumentRuntimeError(
                "numpy() of a sparse tensor: use as_sparse_tensor().values()"
            )
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
        if self._sparse is not None:
            return self._sparse.data_type()
        return type_string(DataType(self.element_type()))

    def element_type(self) -> int:
        """The ONNX element type number (``1`` for float)."""
        if self._onnx_type is not None:
            return self._onnx_type
        return int(from_numpy(self._numpy_dtype()))

    def device_name(self) -> str:
        """``"cpu"``, or the device type of the provider holding the value."""
        return self._device.type

    def is_tensor(self) -> bool:
        """Whether the value is a dense tensor (not a sparse tensor)."""
        return self._sparse is None

    def is_sparse_tensor(self) -> bool:
        """Whether the value holds a :class:`~ortcore.SparseTensor`."""
        return self._sparse is not None

    def is_tensor_sequence(self) -> bool:
        """Whether the value is a sequence of tensors (a list)."""
        return isinstance(self._value, list)

    def as_sparse_tensor(self) -> SparseTensor:
        """The :class:`~ortcore.SparseTensor` held.

        Raises:
            InvalidArgumentRuntimeError: the value is not a sparse tensor.
        """
        if self._sparse is None:
            raise InvalidArgumentRuntimeError("the OrtValue does not hold a sparse tensor")
        return self._sparse

    def tensor_size_in_bytes(self) -> int:
        """Bytes of the tensor's data (elements times element size)."""
        count = int(np.prod(self.shape())) if self.shape() else 1
        return count * self._numpy_dtype().itemsize

    def has_value(self) -> bool:
        """Whether the value holds data (``False`` only for an empty optional)."""
        return self._value is not None or self._sparse is not None

    def data_ptr(self) -> int:
        """Address of a host tensor's data (for ``IOBinding.bind_input``)."""
        if not self._device.is_host:
            raise InvalidArgument(f"data_ptr() of a value on {self._device} is not available")
        return int(self._value.ctypes.data)

    def update_inplace(self, array: Any) -> None:
        """Overwrite the tensor's contents with ``array`` (a numpy array or an
        OrtValue of the same shape and type).

        Raises:
            InvalidArgumentRuntimeError: the sizes differ (onnxruntime raises
                ``RuntimeError``).
        """
        if isinstance(array, OrtValue):
            array = array.numpy()
        arr = np.asarray(array, dtype=self._numpy_dtype())
        if arr.size != int(np.prod(self.shape())):
            raise InvalidArgumentRuntimeError(
                "The input size of numpy arrays does not match the size of the OrtValue: "
                f"shape {list(arr.shape)} != {self.shape()}"
            )
        if list(arr.shape) != self.shape():
            arr = arr.reshape(self.shape())
        if self._device.is_host:
            np.copyto(self._value, arr)
        else:
            assert self._mover is not None
            self._value = self._mover.from_host(arr)

    # -- numpy and DLPack protocols ---------------------------------------

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """``np.asarray(ortvalue)``: the tensor as an array (shares host memory)."""
        arr = self.numpy()
        if copy:
            return np.array(arr, dtype=dtype, copy=True)
        return arr if dtype is None else np.asarray(arr, dtype=dtype)

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule sharing the tensor's memory (``torch.from_dlpack(v)``)."""
        if not self._device.is_host:
            fn = getattr(self._value, "__dlpack__", None)
            if fn is None:
                raise InvalidArgumentRuntimeError(
                    f"the tensor on {self._device} does not support DLPack"
                )
            return fn(stream=stream, **kwargs)
        arr = self.numpy()
        try:
            return arr.__dlpack__(stream=stream, **kwargs)
        except TypeError:  # an older numpy, without the newer keywords
            return arr.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device type, device id)`` as DLPack numbers (1 is the CPU)."""
        if self._device.is_host:
            return (1, 0)
        fn = getattr(self._value, "__dlpack_device__", None)
        return fn() if fn is not None else (2, self._device.id)

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the tensor (onnxruntime's training API spelling)."""
        return self.__dlpack__()

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
        if self._sparse is not None:
            return self._sparse.values().dtype
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


class _Capsule:
    """Presents a bare DLPack capsule to ``np.from_dlpack`` (host memory)."""

    def __init__(self, capsule: Any) -> None:
        if type(capsule).__name__ != "PyCapsule":
            raise InvalidArgumentTypeError(
                f"from_dlpack takes an object with __dlpack__ or a DLPack capsule, "
                f"not {type(capsule).__name__}"
            )
        self._capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class OrtValueVector(list):  # type: ignore[type-arg]
    """A list of :class:`OrtValue` s (onnxruntime's ``OrtValueVector``)."""

    def push_back(self, value: OrtValue) -> None:
        """Append ``value``."""
        self.append(value)

    def push_back_batch(self, values: Sequence[Any], *args: Any) -> None:
        """Append several values (arrays are wrapped as host OrtValues)."""
        for v in values:
            self.append(v if isinstance(v, OrtValue) else OrtValue.ortvalue_from_numpy(v))

    def reserve(self, n: int) -> None:
        """Reserve room (nothing to do for a Python list)."""

    def shrink_to_fit(self) -> None:
        """Release spare room (nothing to do for a Python list)."""

    def element_type_at(self, index: int) -> int:
        """The ONNX element type of value ``index``."""
        return int(self[index].element_type())

    def dlpack_at(self, index: int) -> Any:
        """A DLPack capsule of value ``index``."""
        return self[index].__dlpack__()

    def to_dlpacks(self, to_tensor: Any = None) -> list[Any]:
        """DLPack capsules of every value, each passed through ``to_tensor`` when given."""
        caps = [v.__dlpack__() for v in self]
        return [to_tensor(c) for c in caps] if to_tensor is not None else caps
