"""``SparseTensor``: onnxruntime's sparse tensor container, held on the host.

A sparse initializer or ``Constant`` is made dense when the model loads (see
:mod:`ortcore.tensor_data`); a graph output declared sparse comes back as a
COO ``SparseTensor``. A graph input declared sparse takes one (wrapped in an
``OrtValue``) and hands it to its kernels as it is: the CPU provider's
com.microsoft ``SparseToDenseMatMul`` reads it. :meth:`SparseTensor.to_dense`
gives the array a dense input takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ep_sdk.dtypes import from_numpy, type_string

from ._enum import OrtIntEnum
from .devices import OrtDevice
from .errors import InvalidArgument, InvalidArgumentRuntimeError

__all__ = ["OrtSparseFormat", "SparseTensor"]


class OrtSparseFormat(OrtIntEnum):
    """Storage format of a :class:`SparseTensor` (onnxruntime's numbers)."""

    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view of ``array`` that cannot be written through, as onnxruntime hands
    out a sparse tensor's buffers: the tensor shares them (with the arrays it
    was made from), so a write would change it behind its back."""
    view = array.view()
    view.flags.writeable = False
    return view


class _CooView:
    """COO indices of a sparse tensor (``as_coo_view()``)."""

    def __init__(self, indices: np.ndarray) -> None:
        self._indices = indices

    def indices(self) -> np.ndarray:
        """The COO indices: linear (1-D) or coordinates (2-D); read-only."""
        return _read_only(self._indices)


class _CsrView:
    """CSR indices of a sparse tensor (``as_csrc_view()``)."""

    def __init__(self, inner: np.ndarray, outer: np.ndarray) -> None:
        self._inner, self._outer = inner, outer

    def inner(self) -> np.ndarray:
        """Column index of each value; read-only."""
        return _read_only(self._inner)

    def outer(self) -> np.ndarray:
        """Row start offsets (rows + 1 entries); read-only."""
        return _read_only(self._outer)


class SparseTensor:
    """A sparse tensor in COO or CSR format (``onnxruntime.SparseTensor``).

    Create one with :meth:`sparse_coo_from_numpy` or :meth:`sparse_csr_from_numpy`.
    """

    def __init__(
        self,
        dense_shape: Any,
        values: np.ndarray,
        fmt: OrtSparseFormat,
        indices: tuple[np.ndarray, ...],
    ) -> None:
        self._shape = np.asarray(dense_shape, dtype=np.int64).reshape(-1)
        self._values = values
        self._format = fmt
        self._indices = indices

    @classmethod
    def sparse_coo_from_numpy(
        cls,
        dense_shape: Any,
        values: np.ndarray,
        coo_indices: np.ndarray,
        ort_device: OrtDevice | None = None,
    ) -> SparseTensor:
        """A COO sparse tensor: ``coo_indices`` holds one linear index per value
        (1-D), or one coordinate row per value (2-D, ``[nnz, rank]``).

        Raises:
            InvalidArgument: the indices do not match the values or the shape.
        """
        _host_only(ort_device)
        values = np.ascontiguousarray(values).reshape(-1)
        idx = np.ascontiguousarray(coo_indices, dtype=np.int64)
        shape = np.asarray(dense_shape, dtype=np.int64).reshape(-1)
        n = values.shape[0]
        if not (idx.ndim == 1 and idx.shape[0] == n) and idx.size != n * len(shape):
            raise InvalidArgument(
                f"sparse_coo_from_numpy: {idx.size} indices do not fit {n} values of a "
                f"tensor of rank {len(shape)} (give {n} linear or {n * len(shape)} coordinates)"
            )
        if idx.ndim == 1 and idx.shape[0] != n:
            idx = idx.reshape(n, len(shape))
        return cls(shape, values, OrtSparseFormat.ORT_SPARSE_COO, (idx,))

    @classmethod
    def sparse_csr_from_numpy(
        cls,
        dense_shape: Any,
        values: np.ndarray,
        inner_indices: np.ndarray,
        outer_indices: np.ndarray,
        ort_device: OrtDevice | None = None,
    ) -> SparseTensor:
        """A 2-D CSR sparse tensor.

        Raises:
            InvalidArgument: the shape is not 2-D, or the indices do not fit it.
        """
        _host_only(ort_device)
        shape = np.asarray(dense_shape, dtype=np.int64).reshape(-1)
        values = np.ascontiguousarray(values).reshape(-1)
        inner = np.ascontiguousarray(inner_indices, dtype=np.int64).reshape(-1)
        outer = np.ascontiguousarray(outer_indices, dtype=np.int64).reshape(-1)
        if len(shape) != 2 or inner.shape[0] != values.shape[0] or outer.shape[0] != shape[0] + 1:
            raise InvalidArgument(
                "sparse_csr_from_numpy: needs a 2-D shape, one inner index per value "
                "and rows + 1 outer indices"
            )
        return cls(shape, values, OrtSparseFormat.ORT_SPARSE_CSRC, (inner, outer))

    def values(self) -> np.ndarray:
        """The non-zero values: a read-only view of numbers (the tensor's own
        buffer, as onnxruntime gives it); strings as a copy."""
        if self._values.dtype.kind in "UO":
            return self._values.copy()
        return _read_only(self._values)

    def as_coo_view(self) -> _CooView:
        """The COO indices (``.indices()``).

        Raises:
            InvalidArgumentRuntimeError: the tensor is not in COO format.
        """
        if self._format != OrtSparseFormat.ORT_SPARSE_COO:
            raise InvalidArgumentRuntimeError("This sparse tensor does not contain COO format")
        return _CooView(self._indices[0])

    def as_csrc_view(self) -> _CsrView:
        """The CSR indices (``.inner()``, ``.outer()``).

        Raises:
            InvalidArgumentRuntimeError: the tensor is not in CSR format.
        """
        if self._format != OrtSparseFormat.ORT_SPARSE_CSRC:
            raise InvalidArgumentRuntimeError("This sparse tensor does not contain CSR(C) format")
        return _CsrView(*self._indices)

    def as_blocksparse_view(self) -> _CooView:
        """Block-sparse indices; ortcore builds no block-sparse tensors.

        Raises:
            InvalidArgumentRuntimeError: always.
        """
        raise InvalidArgumentRuntimeError("This sparse tensor does not contain BlockSparse format")

    def format(self) -> OrtSparseFormat:
        """The storage format."""
        return self._format

    def dense_shape(self) -> list[int]:
        """The dense shape, a list as onnxruntime returns it."""
        return [int(d) for d in self._shape]

    def data_type(self) -> str:
        """onnxruntime's type string of the sparse tensor, e.g. ``sparse_tensor(float)``."""
        return "sparse_" + type_string(from_numpy(self._values.dtype))

    def device_name(self) -> str:
        """``"cpu"``: ortcore keeps sparse tensors on the host."""
        return "cpu"

    def to_cuda(self, ort_device: OrtDevice) -> SparseTensor:
        """onnxruntime copies a sparse tensor to a CUDA device here.

        Raises:
            InvalidArgumentRuntimeError: always (ortcore keeps them on the host).
        """
        raise InvalidArgumentRuntimeError("ortcore keeps sparse tensors on the host")

    @classmethod
    def from_dense(cls, dense: np.ndarray) -> SparseTensor:
        """The COO sparse tensor (linear indices) of ``dense``'s non-zeros (an
        ortcore addition: a sparse output made dense at load comes back so)."""
        flat = np.flatnonzero(dense)
        values = np.ascontiguousarray(dense.reshape(-1)[flat])
        return cls(
            np.asarray(dense.shape, np.int64), values, OrtSparseFormat.ORT_SPARSE_COO, (flat,)
        )

    def to_dense(self) -> np.ndarray:
        """The dense array (an ortcore addition)."""
        shape = tuple(int(d) for d in self._shape)
        out = np.zeros(shape, dtype=self._values.dtype)
        if self._format == OrtSparseFormat.ORT_SPARSE_COO:
            idx = self._indices[0]
            flat = idx if idx.ndim == 1 else np.ravel_multi_index(tuple(idx.T), shape)
            out.reshape(-1)[flat] = self._values
        else:
            inner, outer = self._indices
            rows = np.repeat(np.arange(shape[0]), np.diff(outer))
            out[rows, inner] = self._values
        return out


def _host_only(device: OrtDevice | None) -> None:
    if device is not None and device.device_type() != OrtDevice.cpu():
        raise InvalidArgumentRuntimeError(
            f"ortcore keeps sparse tensors on the host, not on {device!r}"
        )
