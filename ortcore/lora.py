"""LoRA adapters, as onnxruntime has them: ``AdapterFormat`` and ``LoraAdapter``.

An adapter file (:mod:`ortcore.adapter_format`) holds named parameters.
``AdapterFormat`` writes and reads such files; ``LoraAdapter.Load`` memory-maps
one, and ``RunOptions.add_active_adapter(adapter)`` makes a run feed each of
its parameters as the model input (or overridable initializer) of that name::

    adapter = ort.LoraAdapter()
    adapter.Load("model.onnx_adapter")
    ro = ort.RunOptions()
    ro.add_active_adapter(adapter)
    sess.run(None, {"input_ids": ids}, ro)

The parameters are numpy views of the mapped file: a run reads them where
they are, with no copy, and the session's own weights are not copied either
(a parameter replaces the initializer's default for that run only).

onnxruntime 1.32's rules, which ortcore keeps: an adapter parameter wins over
a feed of the same name; of several active adapters holding one name, the
first added wins; a parameter no input takes is an ``Invalid input name``
error; a parameter of the wrong element type or shape fails as a feed would,
naming the input; required inputs are checked against the run's own feeds
(an adapter cannot supply them); ``run_with_iobinding`` ignores active
adapters with a warning.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .adapter_format import (
    AdapterContents,
    decode_adapter,
    encode_adapter,
    parameters_from,
)
from .errors import InvalidArgumentRuntimeError, InvalidArgumentTypeError
from .ortvalue import OrtValue

if TYPE_CHECKING:
    from .feeds import FeedValidator
    from .options import RunOptions

__all__ = ["AdapterFormat", "LoraAdapter", "adapter_feeds", "with_adapters"]

_log = logging.getLogger("ortcore.run")


class AdapterFormat:
    """Writes and reads onnxruntime's adapter files (``onnxruntime.AdapterFormat``).

    ::

        fmt = ort.AdapterFormat()
        fmt.set_adapter_version(1)
        fmt.set_parameters({"lora_A": ort.OrtValue.ortvalue_from_numpy(a)})
        fmt.export_adapter("model.onnx_adapter")
        params = ort.AdapterFormat.read_adapter("model.onnx_adapter").get_parameters()
    """

    def __init__(self, adapter: AdapterContents | None = None) -> None:
        self._contents = adapter if adapter is not None else AdapterContents()

    @staticmethod
    def read_adapter(file_path: str | os.PathLike[str]) -> AdapterFormat:
        """Read an adapter file; its parameters are views of the bytes read (no copy).

        Raises:
            InvalidArgumentRuntimeError: the file is missing or unreadable, or
                is not an adapter file (onnxruntime raises ``RuntimeError``).
        """
        path = _path(file_path)
        try:
            with open(path, "rb") as f:
                buf = bytearray(f.read())  # writable, as onnxruntime's views are
        except OSError as exc:
            raise InvalidArgumentRuntimeError(
                f"cannot read the adapter file {path!r}: {exc.strerror or exc}"
            ) from None
        return AdapterFormat(decode_adapter(buf, path))

    def export_adapter(self, file_path: str | os.PathLike[str]) -> None:
        """Write the adapter to ``file_path`` in onnxruntime's adapter format.

        Raises:
            InvalidArgumentRuntimeError: the file cannot be written.
        """
        path = _path(file_path)
        data = encode_adapter(self._contents)
        try:
            with open(path, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise InvalidArgumentRuntimeError(
                f"cannot write the adapter file {path!r}: {exc.strerror or exc}"
            ) from None

    def get_format_version(self) -> int:
        """The file format's version (1)."""
        return self._contents.format_version

    def set_adapter_version(self, adapter_version: int) -> None:
        """Set the adapter's own version number."""
        self._contents.adapter_version = _int32(adapter_version, "adapter_version")

    def get_adapter_version(self) -> int:
        """The adapter's own version number (0 unless set)."""
        return self._contents.adapter_version

    def set_model_version(self, model_version: int) -> None:
        """Set the version of the model the adapter is for."""
        self._contents.model_version = _int32(model_version, "model_version")

    def get_model_version(self) -> int:
        """The version of the model the adapter is for (0 unless set)."""
        return self._contents.model_version

    def set_parameters(self, params: Mapping[str, OrtValue | np.ndarray]) -> None:
        """Set the parameters to export: name -> :class:`OrtValue` (a numpy
        array is taken too). The values are kept, not copied, until export.

        Raises:
            InvalidArgumentRuntimeError: a string, bool or complex value, a
                scalar, or a name that is not a ``str``.
        """
        if not isinstance(params, Mapping):
            raise InvalidArgumentTypeError(
                f"set_parameters takes a dict of name -> OrtValue, not {type(params).__name__}"
            )
        self._contents.parameters = parameters_from(params)

    def get_parameters(self) -> dict[str, OrtValue]:
        """The parameters as name -> :class:`OrtValue`; for a read adapter each
        is a view of the bytes read (no copy)."""
        # the arrays' dtypes are their element types' (bfloat16 and float8 from ml_dtypes)
        return {name: OrtValue(arr) for name, (arr, _num) in self._contents.parameters.items()}


class LoraAdapter:
    """A loaded adapter whose parameters a run can feed (``onnxruntime.LoraAdapter``).

    Create it empty and :meth:`Load` a file, then pass it to
    ``RunOptions.add_active_adapter``. One adapter may be active in any
    number of runs and sessions at once: it is read-only.
    """

    def __init__(self) -> None:
        self._params: dict[str, np.ndarray] = {}
        self._contents: AdapterContents | None = None

    def Load(self, file_path: str | os.PathLike[str]) -> None:
        """Memory-map the adapter file ``file_path`` (read-only): parameters are
        views of the mapping, so loading copies no data and a run reads the
        file's pages directly.

        Raises:
            InvalidArgumentRuntimeError: the file is missing or unreadable, or
                is not an adapter file (onnxruntime raises ``RuntimeError``).
        """
        path = _path(file_path)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                buf: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except OSError as exc:
            raise InvalidArgumentRuntimeError(
                f"cannot open the adapter file {path!r}: {exc.strerror or exc}"
            ) from None
        contents = decode_adapter(buf, path)
        self._contents = contents
        self._params = {name: arr for name, (arr, _num) in contents.parameters.items()}

    def parameters(self) -> dict[str, np.ndarray]:
        """The loaded parameters, name -> read-only array (an ortcore addition)."""
        return dict(self._params)

    def __repr__(self) -> str:
        if self._contents is None:
            return "LoraAdapter(<not loaded>)"
        c = self._contents
        return (
            f"LoraAdapter({len(self._params)} parameters, format {c.format_version}, "
            f"adapter version {c.adapter_version}, model version {c.model_version})"
        )


def adapter_feeds(run_options: RunOptions | None) -> dict[str, np.ndarray]:
    """The parameters the active adapters of ``run_options`` feed; of two
    adapters holding one name, the first added wins (as in onnxruntime)."""
    adapters = getattr(run_options, "_active_adapters", None)
    if not adapters:
        return {}
    feeds: dict[str, np.ndarray] = {}
    for adapter in adapters:
        for name, arr in adapter._params.items():
            feeds.setdefault(name, arr)
    return feeds


def with_adapters(validator: FeedValidator, input_feed: Any, run_options: RunOptions | None) -> Any:
    """``input_feed`` with the active adapters' parameters added, over any feed
    of the same name (onnxruntime's precedence). Required inputs are checked
    against ``input_feed`` itself first, as onnxruntime checks them.

    Raises:
        InvalidArgument: a required input is missing from ``input_feed``.
    """
    params = adapter_feeds(run_options)
    if not params or not isinstance(input_feed, Mapping):
        return input_feed
    validator.check_required(input_feed)
    return {**input_feed, **params}


def warn_ignored(run_options: RunOptions | None) -> None:
    """Log onnxruntime's warning when ``run_with_iobinding`` gets active adapters."""
    if getattr(run_options, "_active_adapters", None):
        _log.warning("run_with_iobinding has active adapters specified, but won't have an effect")


def _path(file_path: Any) -> str:
    try:
        return os.fsdecode(file_path)
    except TypeError:
        raise InvalidArgumentTypeError(
            f"an adapter file path is a str or os.PathLike, not {type(file_path).__name__}"
        ) from None


def _int32(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentTypeError(f"{what} takes an int, not {value!r}")
    if not -(2**31) <= int(value) < 2**31:
        raise InvalidArgumentRuntimeError(f"{what} {value} does not fit the format's int32")
    return int(value)
