"""onnxruntime's LoRA adapter file (``.onnx_adapter``): a reader and a writer.

The file is a FlatBuffer of onnxruntime's schema ``adapter_schema.fbs``
(file identifier ``TORT``)::

    table Parameter { name:string; dims:[int64]; data_type:TensorDataType (int32);
                      raw_data:[uint8] (force_align: 8); }
    table Adapter   { format_version:int; adapter_version:int; model_version:int;
                      parameters:[Parameter]; }

The schema has two tables, so this module reads and writes the bytes itself
rather than depending on the ``flatbuffers`` runtime: reading checks every
offset and length against the buffer (as onnxruntime's FlatBuffers verifier
does) and hands back each parameter as a numpy view of the buffer, without a
copy; writing lays the buffer out front to back (every FlatBuffers offset
points forward) with each parameter's data 8-byte aligned, so the views need
no copy either. ``TensorDataType`` numbers are ONNX's ``TensorProto`` element
types.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ep_sdk.dtypes import from_numpy

from .errors import InvalidArgumentRuntimeError
from .ortvalue import numpy_dtype

__all__ = [
    "FILE_IDENTIFIER",
    "FORMAT_VERSION",
    "AdapterContents",
    "decode_adapter",
    "encode_adapter",
]

FILE_IDENTIFIER = b"TORT"
"""The FlatBuffers file identifier of adapter files (bytes 4-8)."""

FORMAT_VERSION = 1
"""The adapter format version onnxruntime writes and reads."""

_INVALID = "The buffer does not appear to be a valid lora parameter format"
SUPPORTED_TYPES = frozenset({1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 16, 17, 18, 19, 20})
"""Element types a parameter may have: the schema's numeric types (onnxruntime
refuses string, bool and complex parameters, and types newer than the schema)."""


@dataclass
class AdapterContents:
    """What an adapter file holds.

    Attributes:
        format_version: the file format's version (:data:`FORMAT_VERSION`).
        adapter_version: the adapter's own version, as its writer set it.
        model_version: the model version the adapter was made for.
        parameters: name -> (array, ONNX element type); read arrays are views
            of the buffer the file was read into.
    """

    format_version: int = FORMAT_VERSION
    adapter_version: int = 0
    model_version: int = 0
    parameters: dict[str, tuple[np.ndarray, int]] = field(default_factory=dict)


# -- reading -----------------------------------------------------------------


class _Reader:
    """Bounds-checked FlatBuffers access to one buffer."""

    def __init__(self, buf: Any) -> None:
        self.buf = buf
        self.size = len(buf)

    def _need(self, pos: int, n: int, align: int = 1) -> None:
        if pos < 0 or n < 0 or pos + n > self.size or pos % align:
            raise ValueError(f"{n} bytes at offset {pos} lie outside the {self.size}-byte buffer")

    def u16(self, pos: int) -> int:
        self._need(pos, 2, 2)
        return int(struct.unpack_from("<H", self.buf, pos)[0])

    def i32(self, pos: int) -> int:
        self._need(pos, 4, 4)
        return int(struct.unpack_from("<i", self.buf, pos)[0])

    def u32(self, pos: int) -> int:
        self._need(pos, 4, 4)
        return int(struct.unpack_from("<I", self.buf, pos)[0])

    def deref(self, pos: int) -> int:
        """The position a ``uoffset`` stored at ``pos`` points to."""
        return pos + self.u32(pos)

    def table(self, pos: int) -> list[int]:
        """Absolute positions of a table's fields (0 where a field is absent)."""
        vtable = pos - self.i32(pos)
        vt_size, tbl_size = self.u16(vtable), self.u16(vtable + 2)
        if vt_size < 4 or vt_size % 2:
            raise ValueError(f"bad vtable size {vt_size} at offset {vtable}")
        self._need(vtable, vt_size)
        self._need(pos, tbl_size)
        fields = []
        for k in range((vt_size - 4) // 2):
            off = self.u16(vtable + 4 + 2 * k)
            if off >= tbl_size and off:
                raise ValueError(f"field {k} at {off} lies outside its {tbl_size}-byte table")
            fields.append(pos + off if off else 0)
        return fields

    def vector(self, pos: int, item: int) -> tuple[int, int]:
        """Start and length of the vector a ``uoffset`` at ``pos`` points to."""
        start = self.deref(pos)
        n = self.u32(start)
        self._need(start + 4, n * item, min(item, 8))
        return start + 4, n

    def string(self, pos: int) -> str:
        start, n = self.vector(pos, 1)
        return bytes(self.buf[start : start + n]).decode("utf-8")


def _field(fields: list[int], k: int) -> int:
    return fields[k] if k < len(fields) else 0


def decode_adapter(buf: Any, source: str = "buffer") -> AdapterContents:
    """Read an adapter from ``buf`` (bytes, a bytearray or an mmap).

    Parameter arrays are numpy views of ``buf``: no data is copied, and a
    view keeps ``buf`` alive. A view is writable only if ``buf`` is.

    Args:
        buf: the file's bytes.
        source: what to name in errors (the file's path).

    Raises:
        InvalidArgumentRuntimeError: not an adapter file (wrong identifier,
            offsets outside the buffer), or a parameter without dimensions
            or of an element type numpy cannot hold; onnxruntime raises
            ``RuntimeError`` for these.
    """
    r = _Reader(buf)
    try:
        if r.size < 8 or bytes(buf[4:8]) != FILE_IDENTIFIER:
            raise ValueError(f"no {FILE_IDENTIFIER.decode()} file identifier")
        root = r.table(r.deref(0))
        versions = [r.i32(_field(root, k)) if _field(root, k) else 0 for k in range(3)]
        out = AdapterContents(versions[0], versions[1], versions[2])
        starts: list[int] = []
        if _field(root, 3):
            first, n = r.vector(root[3], 4)
            starts = [first + 4 * k for k in range(n)]
        raw = [_parameter(r, r.table(r.deref(p))) for p in starts]
    except (ValueError, UnicodeDecodeError, struct.error) as exc:
        raise InvalidArgumentRuntimeError(f"{source}: {_INVALID} ({exc})") from None
    for name, dims, dtype_num, (data_at, nbytes) in raw:
        out.parameters[name] = (
            _view(buf, name, dims, dtype_num, data_at, nbytes, source),
            dtype_num,
        )
    return out


def _parameter(r: _Reader, f: list[int]) -> tuple[str, list[int], int, tuple[int, int]]:
    name = r.string(f[0]) if _field(f, 0) else ""
    dims: list[int] = []
    if _field(f, 1):
        start, n = r.vector(f[1], 8)
        dims = list(struct.unpack_from(f"<{n}q", r.buf, start))
    dtype_num = r.i32(f[2]) if _field(f, 2) else 0
    data = r.vector(f[3], 1) if _field(f, 3) else (0, 0)
    return name, dims, dtype_num, data


def _view(
    buf: Any, name: str, dims: list[int], dtype_num: int, at: int, nbytes: int, source: str
) -> np.ndarray:
    if not dims:
        raise InvalidArgumentRuntimeError(
            f"{source}: Lora Param {name!r}: dims is missing or empty"
        )
    dtype = _dtype(name, dtype_num, source).newbyteorder("<")
    count = int(np.prod(dims, dtype=np.int64))
    if min(dims) < 0 or count * dtype.itemsize != nbytes:
        raise InvalidArgumentRuntimeError(
            f"{source}: Lora Param {name!r}: {nbytes} bytes of data do not hold a "
            f"{dims} tensor of {dtype} ({count * dtype.itemsize} bytes)"
        )
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=at).reshape(dims)
    return arr if arr.flags.aligned else arr.copy()  # kernels take aligned arrays


# -- writing -----------------------------------------------------------------


def encode_adapter(contents: AdapterContents) -> bytes:
    """The adapter file's bytes for ``contents``.

    Raises:
        InvalidArgumentRuntimeError: a parameter is a string tensor or a
            scalar (onnxruntime's reader refuses parameters without dimensions).
    """
    params = [_checked(name, arr, num) for name, (arr, num) in contents.parameters.items()]
    out = bytearray()
    patches: list[tuple[int, str]] = []  # (where an offset goes, what it points to)
    targets: dict[str, int] = {}

    def pad(align: int) -> None:
        out.extend(b"\0" * (-len(out) % align))

    def table(key: str, scalars: list[tuple[str, Any]]) -> None:
        # vtable first, then the table: soffset = table - vtable > 0
        nfields = len(scalars)
        pad(2)
        vtable = len(out)
        out.extend(struct.pack(f"<{2 + nfields}H", 4 + 2 * nfields, 4 + 4 * nfields,
                               *(4 + 4 * k for k in range(nfields))))  # fmt: skip
        pad(4)
        targets[key] = len(out)
        out.extend(struct.pack("<i", len(out) - vtable))
        for kind, value in scalars:
            if kind == "i32":
                out.extend(struct.pack("<i", value))
            else:  # a forward offset, patched once its target is written
                patches.append((len(out), value))
                out.extend(b"\0\0\0\0")

    def vector(key: str, payload: bytes, count: int, align: int) -> None:
        # the count sits right before the items, the items aligned to ``align``
        pad(4)
        out.extend(b"\0" * (-(len(out) + 4) % align))
        targets[key] = len(out)
        out.extend(struct.pack("<I", count))
        out.extend(payload)

    out.extend(b"\0\0\0\0" + FILE_IDENTIFIER)
    patches.append((0, "root"))
    table("root", [("i32", contents.format_version), ("i32", contents.adapter_version),
                   ("i32", contents.model_version), ("off", "params")])  # fmt: skip
    pad(4)
    targets["params"] = len(out)
    out.extend(struct.pack("<I", len(params)))
    for k in range(len(params)):
        patches.append((len(out), f"p{k}"))
        out.extend(b"\0\0\0\0")
    for k, (_name, _arr, num) in enumerate(params):
        table(f"p{k}", [("off", f"n{k}"), ("off", f"d{k}"), ("i32", num), ("off", f"r{k}")])
    for k, (name, arr, _num) in enumerate(params):
        encoded = name.encode("utf-8")
        vector(f"n{k}", encoded + b"\0", len(encoded), 1)  # strings end in a NUL
        vector(f"d{k}", struct.pack(f"<{arr.ndim}q", *arr.shape), arr.ndim, 8)
        data = arr.tobytes()
        vector(f"r{k}", data, len(data), 8)
    for at, key in patches:
        struct.pack_into("<I", out, at, targets[key] - at)
    return bytes(out)


def _dtype(name: str, num: int, source: str = "") -> np.dtype:
    where = f"{source}: " if source else ""
    if num not in SUPPORTED_TYPES:
        raise InvalidArgumentRuntimeError(
            f"{where}Lora Param {name!r}: data_type '{num}' is not a supported LoRA parameter "
            "type (numeric types but bool and complex)"
        )
    return numpy_dtype(num)


def _checked(name: str, arr: np.ndarray, num: int) -> tuple[str, np.ndarray, int]:
    _dtype(name, num)
    if arr.ndim == 0:
        raise InvalidArgumentRuntimeError(
            f"Lora Param {name!r}: a scalar cannot be an adapter parameter (onnxruntime reads "
            "only parameters with dimensions): give it shape [1]"
        )
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return name, np.ascontiguousarray(arr), int(num)


def element_type_of(arr: np.ndarray) -> int:
    """The ONNX element type number of a numpy array's dtype."""
    return int(from_numpy(arr.dtype))


def parameters_from(values: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, int]]:
    """``name -> (array, element type)`` from OrtValues or arrays (an
    OrtValue made with ``ortvalue_from_numpy_with_onnx_type`` keeps its type).

    Raises:
        InvalidArgumentRuntimeError: a name that is not a ``str``, or a value
            :func:`encode_adapter` would refuse.
    """
    out: dict[str, tuple[np.ndarray, int]] = {}
    for name, value in values.items():
        if not isinstance(name, str):
            raise InvalidArgumentRuntimeError(f"adapter parameter names are str, not {name!r}")
        if hasattr(value, "numpy") and hasattr(value, "element_type"):
            arr, num = np.asarray(value.numpy()), int(value.element_type())
        else:
            arr = np.asarray(value)
            try:
                num = element_type_of(arr)
            except TypeError:
                num = 0  # no ONNX type: refused below with the parameter's name
        _, arr, num = _checked(name, arr, num)
        out[name] = (arr, num)
    return out
