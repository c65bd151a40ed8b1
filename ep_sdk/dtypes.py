"""ONNX element types, numpy dtypes and onnxruntime-style type strings.

Every provider and the core speak about tensor types through this one module so
that ``tensor(float)`` means the same thing everywhere.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import onnx_ir as ir

__all__ = [
    "FLOAT_TYPES",
    "INT_TYPES",
    "NUMERIC_TYPES",
    "ALL_TENSOR_TYPES",
    "constant_array",
    "from_numpy",
    "to_numpy",
    "type_string",
    "type_string_of_array",
]

DataType = ir.DataType

FLOAT_TYPES: Final = frozenset(
    {DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BFLOAT16}
)
INT_TYPES: Final = frozenset(
    {
        DataType.INT8,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.UINT8,
        DataType.UINT16,
        DataType.UINT32,
        DataType.UINT64,
    }
)
NUMERIC_TYPES: Final = FLOAT_TYPES | INT_TYPES
ALL_TENSOR_TYPES: Final = NUMERIC_TYPES | {DataType.BOOL, DataType.STRING}

# onnxruntime's spelling of element types in ``NodeArg.type``.
_TYPE_NAMES: Final[dict[DataType, str]] = {
    DataType.FLOAT: "float",
    DataType.DOUBLE: "double",
    DataType.FLOAT16: "float16",
    DataType.BFLOAT16: "bfloat16",
    DataType.INT8: "int8",
    DataType.INT16: "int16",
    DataType.INT32: "int32",
    DataType.INT64: "int64",
    DataType.UINT8: "uint8",
    DataType.UINT16: "uint16",
    DataType.UINT32: "uint32",
    DataType.UINT64: "uint64",
    DataType.BOOL: "bool",
    DataType.STRING: "string",
    DataType.COMPLEX64: "complex64",
    DataType.COMPLEX128: "complex128",
}


def to_numpy(dtype: DataType) -> np.dtype:
    """Return the numpy dtype that holds tensors of ONNX element type ``dtype``.

    Raises:
        TypeError: the element type has no numpy representation.
    """
    if dtype == DataType.STRING:
        return np.dtype(object)
    try:
        return np.dtype(dtype.numpy())
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise TypeError(f"ONNX element type {dtype.name} has no numpy dtype") from exc


def from_numpy(dtype: np.dtype) -> DataType:
    """Return the ONNX element type of numpy dtype ``dtype``.

    Object and unicode arrays map to ``STRING``.

    Raises:
        TypeError: numpy dtype has no ONNX element type.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in ("O", "U", "S"):
        return DataType.STRING
    try:
        return DataType.from_numpy(dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"numpy dtype {dtype} has no ONNX element type") from exc


def type_string(dtype: DataType | None) -> str:
    """Return onnxruntime's type string, e.g. ``tensor(float)``, for ``dtype``."""
    if dtype is None:
        return "tensor(unknown)"
    return f"tensor({_TYPE_NAMES.get(dtype, dtype.name.lower())})"


def type_string_of_array(array: object) -> str:
    """Return the onnxruntime type string of a numpy array (or array-like)."""
    dtype = getattr(array, "dtype", None)
    if dtype is None:
        return f"{type(array).__name__}"
    try:
        return type_string(from_numpy(dtype))
    except TypeError:
        return f"numpy({dtype})"


_BY_TYPE_STRING: Final[dict[str, DataType]] = {
    f"tensor({name})": dt for dt, name in _TYPE_NAMES.items()
}


def from_type_string(text: str) -> DataType | None:
    """Return the element type of an onnxruntime type string (``tensor(float)``).

    ``None`` for non-tensor or unknown types.
    """
    return _BY_TYPE_STRING.get(text)


def constant_array(tensor: ir.TensorProtocol) -> np.ndarray:
    """A constant tensor's content as kernels and users see it.

    Numeric tensors as ``tensor.numpy()`` gives them; a STRING tensor as an
    object array of ``str`` (onnxruntime's form, and what a string feed is),
    not onnx-ir's array of ``bytes``, which a string kernel would otherwise
    concatenate, compare or return as ``b'...'``.
    """
    array = tensor.numpy()
    if tensor.dtype == DataType.STRING:
        flat = [b.decode("utf-8") if isinstance(b, bytes) else str(b) for b in array.reshape(-1)]
        return np.array(flat, dtype=object).reshape(array.shape)
    return array
