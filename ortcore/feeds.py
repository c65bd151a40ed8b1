"""Feed checking: a run's inputs validated against the model, with onnxruntime's messages.

A :class:`FeedValidator` is built once per session. It makes lists, tuples and
Python numbers arrays of their input's declared type, checks names (unknown
and missing inputs), element types, ranks and fixed dimensions, and lays the
feeds out in the order the plan takes them (graph inputs, then the
initializers a feed may override, which default to their stored values).
The messages are onnxruntime's, word for word, so code that matches on them
keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import onnx_ir as ir

from ep_sdk import HOST_DEVICE, Device, type_string
from ep_sdk.dtypes import (
    constant_array,
    from_numpy,
    from_type_string,
    to_numpy,
    type_string_of_array,
)

from .errors import InvalidArgument
from .ortvalue import OrtValue
from .records import NodeArg, node_arg
from .sparse_tensor import SparseTensor

__all__ = ["FeedCheck", "FeedValidator"]


class FeedValidator:
    """Validates a run's feeds and orders them as the plan takes them.

    Args:
        inputs: the model's graph inputs that are not initializers.
        overridable: initializers a feed may replace (IR version 4 and later).
        map_types: type strings of map-typed values, by name.

    Attributes:
        required: names of the inputs every run must feed, in the model's order.
    """

    __slots__ = ("required", "_index", "_defaults", "_checks", "_n_inputs")

    def __init__(
        self,
        inputs: Sequence[ir.Value],
        overridable: Sequence[ir.Value],
        map_types: Mapping[str, str],
    ) -> None:
        self._n_inputs = len(inputs)
        self._index: dict[str | None, int] = {v.name: i for i, v in enumerate(inputs)}
        for j, v in enumerate(overridable):
            self._index[v.name] = self._n_inputs + j
        self._defaults = [
            constant_array(v.const_value) if v.const_value is not None else None
            for v in overridable
        ]
        self._checks = [
            FeedCheck(node_arg(v, map_types), v.shape is not None) for v in [*inputs, *overridable]
        ]
        self.required = [c.name for c in self._checks[: self._n_inputs]]

    def check_name(self, name: str) -> None:
        """Raise unless ``name`` is an input a feed may set.

        Raises:
            InvalidArgument: onnxruntime's "Invalid input name" message.
        """
        if name not in self._index:
            raise self._invalid_name(name)

    def prepare(
        self, input_feed: Mapping[str, Any], required: Sequence[str] | None = None
    ) -> list[Any]:
        """The feeds in plan order, each checked (``run``'s ``input_feed``).

        Args:
            input_feed: input name -> array (or anything ``np.asarray`` takes).
            required: names that must be present (default: every input).

        Raises:
            InvalidArgument: not a mapping, a missing or unknown input, a wrong
                element type, rank or fixed dimension.
        """
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument(
                f"input_feed must be a dict of input name to array, not {type(input_feed).__name__}"
            )
        feeds: list[Any] = [None] * self._n_inputs + list(self._defaults)
        self.check_required(input_feed, required)
        for name, value in input_feed.items():
            i = self._index.get(name)
            if i is None:
                raise self._invalid_name(name)
            feeds[i] = self._checks[i](value)
        return feeds

    def check_required(
        self, input_feed: Mapping[str, Any], required: Sequence[str] | None = None
    ) -> None:
        """Raise unless ``input_feed`` has every name of ``required`` (default:
        every input).

        Raises:
            InvalidArgument: onnxruntime's "Required inputs ... are missing" message.
        """
        names = self.required if required is None else required
        missing = [name for name in names if name not in input_feed]
        if missing:
            raise InvalidArgument(
                f"Required inputs ({missing}) are missing from input feed ({list(input_feed)})."
            )

    def as_declared(self, input_feed: Mapping[str, Any]) -> Mapping[str, Any]:
        """``input_feed`` with lists, tuples and Python numbers made arrays of
        their input's declared element type, as onnxruntime converts them
        (other values, and feeds that are not a mapping, as they are).

        Raises:
            InvalidArgument: a value that cannot become that type.
        """
        if not isinstance(input_feed, Mapping):
            return input_feed
        if not any(isinstance(v, _PYTHON_VALUES) for v in input_feed.values()):
            return input_feed
        out = dict(input_feed)
        for name, value in input_feed.items():
            i = self._index.get(name)
            dtype = self._checks[i].np_dtype if i is not None else None
            if dtype is not None and isinstance(value, _PYTHON_VALUES):
                try:
                    out[name] = np.asarray(value, dtype=dtype)
                except (TypeError, ValueError) as exc:
                    raise InvalidArgument(
                        f"input {name!r}: cannot convert the {type(value).__name__} given "
                        f"to {dtype}: {exc}"
                    ) from exc
        return out

    def prepare_ortvalues(self, inputs: Mapping[str, Any]) -> tuple[list[Any], list[Device]]:
        """Feeds and the devices they are on, from :class:`OrtValue` s (or arrays).

        Host values are checked as :meth:`prepare` checks them; a value on a
        device is checked by its dtype and shape only, without copying it.

        Raises:
            InvalidArgument: as :meth:`prepare`.
        """
        host = {k: v for k, v in inputs.items() if not _on_device(v)}
        feeds = self._prepare_partial(host, skip=[k for k in inputs if k not in host])
        devices = [HOST_DEVICE] * len(feeds)
        for name, ov in inputs.items():
            if name in host:
                continue
            i = self._index.get(name)
            if i is None:
                raise self._invalid_name(name)
            if ov._shape is not None and ov._dtype is not None:
                # a device tensor that hides its shape is not copied to check it
                self._checks[i].check_meta(ov._dtype, ov._shape)
            feeds[i] = ov.value
            devices[i] = ov.device
        return feeds, devices

    def _prepare_partial(self, host: Mapping[str, Any], skip: Sequence[str]) -> list[Any]:
        """:meth:`prepare` for the host values, with the names in ``skip`` fed later."""
        self.check_required({**host, **{k: None for k in skip}})
        return self.prepare(dict(host), required=[n for n in self.required if n in host])

    def _invalid_name(self, name: str) -> InvalidArgument:
        return InvalidArgument(f"Invalid input name: {name}. Model inputs: {self.required}")


class FeedCheck:
    """Validates one feed against the model's declared type and shape.

    Args:
        arg: the input as the session describes it.
        rank_known: whether the model declares the input's shape (rank and
            fixed dims are checked only then).
    """

    __slots__ = ("name", "type", "dims", "is_tensor", "is_sparse", "np_dtype")

    def __init__(self, arg: NodeArg, rank_known: bool) -> None:
        self.name = arg.name
        self.type = arg.type
        self.is_tensor = arg.type.startswith("tensor(")
        self.is_sparse = arg.type.startswith("sparse_tensor(")
        self.dims: list[int | str | None] | None = arg.shape if rank_known else None
        self.np_dtype: np.dtype | None = None
        elem = from_type_string(arg.type.removeprefix("sparse_"))
        if elem is not None:
            try:
                self.np_dtype = to_numpy(elem)
            except TypeError:
                self.np_dtype = None

    def __call__(self, value: Any) -> Any:
        """``value`` as the plan takes it (an array for tensor inputs), checked.

        Raises:
            InvalidArgument: wrong element type, rank or fixed dimension.
        """
        if self.is_sparse:
            return self._sparse(value)
        if not self.is_tensor:
            return value
        if not isinstance(value, np.ndarray):
            if hasattr(value, "numpy") and callable(value.numpy):
                value = value.numpy()  # OrtValue-like
            else:
                value = np.asarray(value)
        if self.type == "tensor(string)" and value.dtype.kind in "USVO":
            value = self._strings(value)
        if self.np_dtype is not None and value.dtype != self.np_dtype:
            try:
                same = from_numpy(value.dtype) == from_numpy(self.np_dtype)
            except TypeError:
                same = False
            if not same:
                raise InvalidArgument(
                    f"Unexpected input data type. Actual: ({type_string_of_array(value)}) , "
                    f"expected: ({self.type}) for input {self.name!r}"
                )
        if self.dims is not None:
            self._check_shape(value)
        return value

    def _sparse(self, value: Any) -> SparseTensor:
        """A sparse input's :class:`SparseTensor`, from one or an OrtValue holding one.

        Raises:
            InvalidArgument: a dense value, or values of another element type
                or a dense shape the input does not take.
        """
        if isinstance(value, OrtValue) and value.is_sparse_tensor():
            value = value.as_sparse_tensor()
        if not isinstance(value, SparseTensor):
            got = "a tensor" if hasattr(value, "shape") else type(value).__name__
            raise InvalidArgument(
                f"input with name: '{self.name}' expected to be of type: {self.type} but "
                f"received {got}: feed an OrtValue.ort_value_from_sparse_tensor(...)"
            )
        dtype = value.values().dtype
        if self.np_dtype is not None and dtype != self.np_dtype:
            raise InvalidArgument(
                f"Unexpected input data type. Actual: ({value.data_type()}) , "
                f"expected: ({self.type}) for input {self.name!r}"
            )
        if self.dims is not None:
            self._check_shape(cast(np.ndarray, _Shaped(tuple(int(d) for d in value.dense_shape()))))
        return value

    def _strings(self, value: np.ndarray) -> np.ndarray:
        """A string input's array of ``str`` objects, from numpy's ``U`` (str),
        ``S`` (bytes), ``V`` (void: raw bytes) or ``O`` arrays, as onnxruntime
        takes them: bytes are UTF-8 (trailing NULs of ``S``/``V`` items dropped,
        as numpy reads them).

        Raises:
            InvalidArgument: bytes that are not UTF-8.
        """
        kind = value.dtype.kind
        if kind == "U":
            return value.astype(object)
        if kind == "O" and not any(isinstance(x, (bytes, bytearray)) for x in value.flat):
            return value
        if kind == "V":
            value = np.ascontiguousarray(value).view(f"S{value.dtype.itemsize}")
        out = np.empty(value.shape, object)
        try:
            out.flat[:] = [
                x.decode("utf-8") if isinstance(x, (bytes, bytearray)) else x for x in value.flat
            ]
        except UnicodeDecodeError as exc:
            raise InvalidArgument(
                f"string input {self.name!r} has bytes that are not UTF-8: {exc}"
            ) from exc
        return out

    def check_meta(self, dtype: np.dtype, shape: Sequence[int]) -> None:
        """Validate a value known only by dtype and shape (a tensor on a device)."""
        if not self.is_tensor:
            return
        if self.np_dtype is not None and from_numpy(dtype) != from_numpy(self.np_dtype):
            raise InvalidArgument(
                f"Unexpected input data type. Actual: ({type_string(from_numpy(dtype))}) , "
                f"expected: ({self.type}) for input {self.name!r}"
            )
        if self.dims is not None:
            self._check_shape(cast(np.ndarray, _Shaped(tuple(shape))))

    def _check_shape(self, value: np.ndarray) -> None:
        dims = self.dims
        assert dims is not None
        if value.ndim != len(dims):
            raise InvalidArgument(
                f"Invalid rank for input: {self.name} Got: {value.ndim} Expected: {len(dims)} "
                "Please fix either the inputs/outputs or the model."
            )
        bad = [
            (i, got, want)
            for i, (got, want) in enumerate(zip(value.shape, dims))
            if isinstance(want, int) and got != want
        ]
        if bad:
            lines = "\n".join(f" index: {i} Got: {g} Expected: {w}" for i, g, w in bad)
            raise InvalidArgument(
                f"Got invalid dimensions for input: {self.name} for the following indices\n"
                f"{lines}\n Please fix either the inputs/outputs or the model."
            )


_PYTHON_VALUES = (list, tuple, int, float, bool, complex)
"""Feed values converted to the input's declared type (numpy scalars and arrays are not)."""


class _Shaped:
    """Stands in for an array where only ``shape`` and ``ndim`` are read."""

    __slots__ = ("shape", "ndim")

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.ndim = len(shape)


def _on_device(value: Any) -> bool:
    return isinstance(value, OrtValue) and not value.device.is_host
