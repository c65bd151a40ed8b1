"""onnxruntime's compile API: ``ModelCompiler``, ``OrtCompileApiFlags``, the
``ep.context_*`` session config entries, ``get_compatibility_info_from_model``.

A model is compiled by creating a session of it (through the ordinary
:class:`~ortcore.InferenceSession` path: the providers come from the
session options, or, in ortcore, from the ``providers=`` keyword) and
writing its compiled groups as ``com.microsoft::EPContext`` nodes
(:mod:`ortcore.epcontext_write`; the format: :mod:`ortcore.epcontext`).
A session whose config has ``ep.context_enable`` = ``"1"`` writes its
compiled model when it is created, as onnxruntime's does
(:func:`~ortcore.epcontext_write.write_session_context`).
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ep_sdk.compiled_context import COMPATIBILITY_INFO_PREFIX, OrtCompiledModelCompatibility

from .epcontext import (
    CONTEXT_ENABLE_KEY,
)
from .epcontext_write import (
    ContextModel,
    ExternalInitializers,
    context_exists_error,
    context_of,
    default_context_path,
    write_context_files,
    write_session_context,
)
from .errors import (
    Fail,
    InvalidArgument,
    InvalidArgumentRuntimeError,
    InvalidArgumentTypeError,
    InvalidProtobufRuntimeError,
    NoSuchFileRuntimeError,
)
from .options import GraphOptimizationLevel, SessionOptions

__all__ = [
    "ModelCompiler",
    "OrtCompileApiFlags",
    "OrtExternalInitializerInfo",
    "get_compatibility_info_from_model",
    "get_compatibility_info_from_model_bytes",
    "get_model_compatibility_for_ep_devices",
    "write_session_context",
]

log = logging.getLogger("ortcore.epcontext")


class OrtCompileApiFlags(enum.IntFlag):
    """Options of :class:`ModelCompiler` (onnxruntime's names and numbers)."""

    NONE = 0
    ERROR_IF_NO_NODES_COMPILED = 1
    ERROR_IF_OUTPUT_FILE_EXISTS = 2


class OrtExternalInitializerInfo:
    """Where an initializer's bytes lie in a file (``onnxruntime.OrtExternalInitializerInfo``):
    what a ``get_initializer_location_func`` of :class:`ModelCompiler` is given
    for an initializer the input model keeps in a file, and returns to have the
    compiled model read one from a file.

    Args:
        filepath: the file, as the model's ``location`` names it (relative to
            the model's folder, or absolute).
        file_offset: where the bytes start.
        byte_size: how many bytes.
    """

    __slots__ = ("_path", "_offset", "_size")

    def __init__(self, filepath: str | os.PathLike[str], file_offset: int, byte_size: int) -> None:
        self._path = os.fspath(filepath)
        self._offset = int(file_offset)
        self._size = int(byte_size)
        if self._offset < 0 or self._size < 0:
            raise InvalidArgument("file_offset and byte_size must not be negative")

    @property
    def filepath(self) -> str:
        """The file."""
        return self._path

    @property
    def file_offset(self) -> int:
        """Where the bytes start in the file."""
        return self._offset

    @property
    def byte_size(self) -> int:
        """How many bytes."""
        return self._size

    def __repr__(self) -> str:
        return (
            f"OrtExternalInitializerInfo({self._path!r}, file_offset={self._offset}, "
            f"byte_size={self._size})"
        )


LocationFunc = Callable[
    [str, Any, "OrtExternalInitializerInfo | None"], "OrtExternalInitializerInfo | None"
]
"""``get_initializer_location_func(name, value, external_info)``."""


class ModelCompiler:
    """Compiles a model into onnxruntime's EPContext form (``onnxruntime.ModelCompiler``).

    Args:
        sess_options: the session options; the providers come from them
            (``add_provider``, a selection policy) or from ``providers=``.
        input_model_path_or_bytes: the model's path, or its bytes.
        embed_compiled_data_into_model: binaries in the EPContext nodes, else
            (the default) in files ``<model>_<provider>.bin`` beside the
            compiled model.
        external_initializers_file_path: a file for the initializers of the
            nodes left uncompiled (those over ``external_initializers_size_threshold``
            bytes), relative to the compiled model's folder; default: in the model.
        flags: :class:`OrtCompileApiFlags`, or'ed.
        graph_optimization_level: the compile session's (default: none).
        get_initializer_location_func: called as ``func(name, value,
            external_info)`` for each initializer of the compiled model's
            main graph (``value`` an :class:`~ortcore.OrtValue`;
            ``external_info`` an :class:`OrtExternalInitializerInfo` where the
            input model keeps it in a file, else ``None``); it returns where
            the compiled model reads it from (an :class:`OrtExternalInitializerInfo`,
            whose bytes it must have written), or ``None`` to keep it in the
            model. Not with ``external_initializers_file_path``.
        providers: ortcore only: the providers, as ``InferenceSession`` takes
            them (for programs and tests that do not set them on the options).
        provider_options: ortcore only: with ``providers``.
        plugin_manager: ortcore only: the plugin manager (tests).

    Raises:
        InvalidArgumentTypeError: the model is neither a path nor bytes.
        InvalidArgument: an empty model path or bytes, a bad argument.
    """

    def __init__(
        self,
        sess_options: SessionOptions | None,
        input_model_path_or_bytes: str | os.PathLike[str] | bytes,
        embed_compiled_data_into_model: bool = False,
        external_initializers_file_path: str | os.PathLike[str] | None = None,
        external_initializers_size_threshold: int = 1024,
        flags: int = OrtCompileApiFlags.NONE,
        graph_optimization_level: int = GraphOptimizationLevel.ORT_DISABLE_ALL,
        get_initializer_location_func: Callable[..., Any] | None = None,
        *,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        plugin_manager: Any = None,
    ) -> None:
        if isinstance(input_model_path_or_bytes, (str, os.PathLike)):
            if not os.fspath(input_model_path_or_bytes):
                raise InvalidArgument("Input model path is empty")
        elif isinstance(input_model_path_or_bytes, (bytes, bytearray, memoryview)):
            if not len(input_model_path_or_bytes):
                raise InvalidArgument("Input model bytes array is empty")
            input_model_path_or_bytes = bytes(input_model_path_or_bytes)
        else:
            raise InvalidArgumentTypeError(
                f"Unable to load from type '{type(input_model_path_or_bytes)}'"
            )
        if get_initializer_location_func is not None:
            if not callable(get_initializer_location_func):
                raise InvalidArgumentTypeError("get_initializer_location_func must be callable")
            if external_initializers_file_path:
                raise InvalidArgument(
                    "give get_initializer_location_func or external_initializers_file_path, "
                    "not both"
                )
        self._options = sess_options or SessionOptions()
        self._model = input_model_path_or_bytes
        self._embed = bool(embed_compiled_data_into_model)
        self._external = (
            os.fspath(external_initializers_file_path) if external_initializers_file_path else ""
        )
        self._threshold = int(external_initializers_size_threshold)
        self._flags = OrtCompileApiFlags(int(flags))
        self._level = GraphOptimizationLevel(int(graph_optimization_level))
        self._providers = providers
        self._provider_options = provider_options
        self._manager = plugin_manager
        self._binary_dir: Path | None = None
        self._binary_name = ""
        self._location_func: LocationFunc | None = get_initializer_location_func

    def set_ep_context_binary_information(
        self, output_directory: str | os.PathLike[str], model_name: str
    ) -> None:
        """The folder and model name the binaries (``<model_name>_<provider>.bin``)
        are written with, for :meth:`compile_to_bytes` and :meth:`compile_to_stream`.

        Raises:
            InvalidArgument: an empty argument, or a folder that does not exist.
        """
        folder = os.fspath(output_directory)
        if not folder or not model_name:
            raise InvalidArgument("output_directory and model_name must not be empty")
        if not Path(folder).is_dir():
            raise InvalidArgument(f"{folder!r} is not a folder")
        self._binary_dir, self._binary_name = Path(folder), model_name

    def compile_to_file(self, output_model_path: str | os.PathLike[str] | None = None) -> None:
        """Compile and write the model to ``output_model_path`` (default: the
        input's path with ``.onnx`` replaced by ``_ctx.onnx``), its binaries beside it.

        Raises:
            InvalidArgument: no output path for a model given as bytes, or its folder is missing.
            Fail: the file exists under ``ERROR_IF_OUTPUT_FILE_EXISTS``, or no node
                was compiled under ``ERROR_IF_NO_NODES_COMPILED``.
        """
        if output_model_path:
            out = Path(os.fspath(output_model_path))
        elif isinstance(self._model, bytes):
            raise InvalidArgument("compile_to_file needs an output path for a model given as bytes")
        else:
            out = default_context_path(self._model)
        if self._flags & OrtCompileApiFlags.ERROR_IF_OUTPUT_FILE_EXISTS and out.exists():
            raise context_exists_error(out)
        if not out.parent.is_dir():
            raise InvalidArgument(f"open file {str(out)!r} failed: its folder does not exist")
        ctx = self._compile(out.parent, out.stem)
        self._place_initializers(ctx.proto)
        write_context_files(out.parent, ctx, out)

    def compile_to_bytes(self) -> bytes:
        """Compile and return the model's bytes. Binaries that are not embedded go
        to the folder :meth:`set_ep_context_binary_information` set, else
        beside the input model.

        Raises:
            InvalidArgument: binaries not embedded and nowhere to write them.
            Fail: as :meth:`compile_to_file`.
        """
        folder, stem = self._binary_place()
        ctx = self._compile(folder, stem)
        self._place_initializers(ctx.proto)
        if folder is not None:
            write_context_files(folder, ctx, None)
        return bytes(ctx.proto.SerializeToString())

    def compile_to_stream(self, write_function: Callable[[bytes], Any]) -> None:
        """Compile and hand the model's bytes to ``write_function`` (as
        :meth:`compile_to_bytes`).

        Raises:
            Fail: ``write_function`` raised (its type and message, as
                onnxruntime words it; the original is the ``__cause__``).
        """
        data = self.compile_to_bytes()
        try:
            write_function(data)
        except Exception as exc:
            raise Fail(f"{type(exc).__name__}: {exc}") from exc

    def _place_initializers(self, proto: Any) -> None:
        """Ask ``get_initializer_location_func`` where each initializer goes and
        point those it places in a file there.

        Raises:
            Fail: the function raised.
            InvalidArgumentTypeError: it returned something else than an
                :class:`OrtExternalInitializerInfo` or ``None``.
        """
        func = self._location_func
        if func is None:
            return
        from onnx import TensorProto, numpy_helper

        from .ortvalue import OrtValue

        originals = self._external_infos()
        for tensor in proto.graph.initializer:
            if tensor.data_location == TensorProto.EXTERNAL:
                continue  # placed already (a provider's own file)
            value = OrtValue.ortvalue_from_numpy(numpy_helper.to_array(tensor))
            try:
                place = func(tensor.name, value, originals.get(tensor.name))
            except Exception as exc:
                raise Fail(f"{type(exc).__name__}: {exc}") from exc
            if place is None:
                continue
            if not isinstance(place, OrtExternalInitializerInfo):
                raise InvalidArgumentTypeError(
                    "get_initializer_location_func must return an OrtExternalInitializerInfo "
                    f"or None, not {type(place).__name__} (initializer {tensor.name!r})"
                )
            for data_field in _DATA_FIELDS:
                tensor.ClearField(data_field)
            del tensor.external_data[:]
            tensor.data_location = TensorProto.EXTERNAL
            for key, text in (
                ("location", place.filepath),
                ("offset", str(place.file_offset)),
                ("length", str(place.byte_size)),
            ):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, text

    def _external_infos(self) -> dict[str, OrtExternalInitializerInfo]:
        """The input model's initializers that live in files, by name."""
        import onnx
        from onnx import TensorProto

        if isinstance(self._model, bytes):
            proto = onnx.load_model_from_string(self._model)
        else:
            proto = onnx.load(os.fspath(self._model), load_external_data=False)
        out: dict[str, OrtExternalInitializerInfo] = {}
        for tensor in proto.graph.initializer:
            if tensor.data_location != TensorProto.EXTERNAL:
                continue
            fields = {e.key: e.value for e in tensor.external_data}
            if "location" not in fields:
                continue
            size = fields.get("length")
            if size is None:  # the rest of the file
                where = (
                    Path(os.fspath(self._model)).parent
                    if not isinstance(self._model, bytes)
                    else Path()
                )
                try:
                    length = (where / fields["location"]).stat().st_size
                except OSError:  # the session built from it would have failed already
                    continue
                size = str(length - int(fields.get("offset", 0)))
            out[tensor.name] = OrtExternalInitializerInfo(
                fields["location"], int(fields.get("offset", 0)), int(size)
            )
        return out

    # -- helpers ---------------------------------------------------------------

    def _binary_place(self) -> tuple[Path | None, str]:
        if self._binary_dir is not None:
            return self._binary_dir, self._binary_name
        if isinstance(self._model, bytes):
            return None, "model"
        return Path(self._model).parent, default_context_path(self._model).stem

    def _compile(self, folder: Path | None, stem: str) -> ContextModel:
        from .session import InferenceSession

        options = self._options.with_model_config({})
        options.graph_optimization_level = self._level
        for key in (CONTEXT_ENABLE_KEY, "ortcore.save_session"):
            options._config.pop(key, None)  # the compile session writes nothing of its own
        kwargs: dict[str, Any] = {}
        if self._manager is not None:
            kwargs["plugin_manager"] = self._manager
        if isinstance(self._model, (str, os.PathLike)) and not Path(self._model).exists():
            raise InvalidArgument(f"Input model path does not exist: {os.fspath(self._model)!r}")
        session = InferenceSession(
            self._model, options, self._providers, self._provider_options, **kwargs
        )
        try:
            external = None
            if self._external:
                external = ExternalInitializers(self._location(folder), self._threshold)
            if not self._embed and folder is None:
                raise InvalidArgument(
                    "the model came as bytes and its binaries are not embedded: call "
                    "set_ep_context_binary_information(folder, name) or embed them "
                    "(embed_compiled_data_into_model=True)"
                )
            ctx = context_of(session, self._embed, stem, external)
        finally:
            session.close()
        if ctx.compiled == 0 and self._flags & OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED:
            raise Fail(
                "Unable to compile any nodes. Check that the session's providers support "
                "compilation (serialize_compiled) and can execute at least one subgraph "
                f"of the model (providers: {', '.join(session.get_providers())})"
            )
        return ctx

    def _location(self, folder: Path | None) -> str:
        """The external initializers file, relative to the compiled model's folder."""
        path = Path(self._external)
        if folder is None or not path.is_absolute():
            location = path.as_posix()
        else:
            location = os.path.relpath(path, folder)
        if os.path.isabs(location) or location.startswith(".."):
            raise InvalidArgument(
                f"external_initializers_file_path {self._external!r} must lie in the "
                "compiled model's folder"
            )
        return location


_DATA_FIELDS = (
    "raw_data",
    "float_data",
    "int32_data",
    "string_data",
    "int64_data",
    "double_data",
    "uint64_data",
)


def _info(proto: Any, ep_type: str) -> str | None:
    for prop in proto.metadata_props:
        if prop.key == COMPATIBILITY_INFO_PREFIX + ep_type:
            return str(prop.value)
    return None


def get_compatibility_info_from_model(
    model_path: str | os.PathLike[str], ep_type: str
) -> str | None:
    """The compatibility string a compiled model holds for provider ``ep_type``
    (metadata ``ep_compatibility_info.<ep_type>``), or ``None``.

    Every error is a ``RuntimeError`` too, as onnxruntime raises a plain one.

    Raises:
        InvalidArgumentRuntimeError: an empty ``ep_type``.
        NoSuchFileRuntimeError: no such file.
        InvalidProtobufRuntimeError: not a model.
    """
    if not ep_type:
        raise InvalidArgumentRuntimeError(
            "Invalid argument provided to GetCompatibilityInfoFromModel."
        )
    path = os.fspath(model_path)
    try:
        if not path:  # not Path(""), which is the current folder
            raise FileNotFoundError(path)
        data = Path(path).read_bytes()
    except OSError as exc:
        raise NoSuchFileRuntimeError(f"Load model {path} failed. File doesn't exist") from exc
    return _info(_parse(data), ep_type)


def get_compatibility_info_from_model_bytes(model_data: bytes, ep_type: str) -> str | None:
    """:func:`get_compatibility_info_from_model` of a model's bytes.

    Raises:
        InvalidArgumentRuntimeError: empty bytes or an empty ``ep_type``.
        InvalidProtobufRuntimeError: not a model.
    """
    if not model_data or not ep_type:
        raise InvalidArgumentRuntimeError(
            "Invalid argument provided to GetCompatibilityInfoFromModelBytes."
        )
    return _info(_parse(bytes(model_data)), ep_type)


def _parse(data: bytes) -> Any:
    import onnx
    from google.protobuf.message import DecodeError

    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError) as exc:
        raise InvalidProtobufRuntimeError("Protobuf parsing failed.") from exc
    return proto


def get_model_compatibility_for_ep_devices(
    ep_devices: Sequence[Any], compatibility_info: str
) -> OrtCompiledModelCompatibility:
    """Judge a compiled model's compatibility string for a provider's devices
    (onnxruntime's ``get_model_compatibility_for_ep_devices``).

    ``ep_devices``: :class:`~ortcore.OrtEpDevice` objects of one provider
    (from :func:`~ortcore.get_ep_devices`); ``compatibility_info``: the string
    the compiled model stores for that provider
    (:func:`get_compatibility_info_from_model`). A provider that compiles
    nothing (it has no ``compile``), or an empty string, is
    ``EP_NOT_APPLICABLE``, as onnxruntime answers for its CPU provider; else
    the provider, created with the first device's ``ep_options``, judges it
    (``ExecutionProvider.validate_compiled_model_compatibility_info``).

    Raises:
        InvalidArgumentRuntimeError: no devices, devices of several
            providers, or something that is not an ``OrtEpDevice``.
        InvalidArgumentTypeError: ``compatibility_info`` is not a string.
        EPFail: the provider could not be created or its judgement raised.
    """
    from ep_sdk import ExecutionProvider

    from .ep_devices import OrtEpDevice
    from .errors import EPFail

    if not isinstance(compatibility_info, str):
        raise InvalidArgumentTypeError(
            "get_model_compatibility_for_ep_devices: compatibility_info must be a str, "
            f"got {type(compatibility_info).__name__}"
        )
    devices = list(ep_devices)
    if not devices or not all(isinstance(d, OrtEpDevice) for d in devices):
        raise InvalidArgumentRuntimeError(
            "Invalid argument provided to GetModelCompatibilityForEpDevices."
        )
    names = sorted({d.ep_name for d in devices})
    if len(names) > 1:
        raise InvalidArgumentRuntimeError(
            "Invalid argument provided to GetModelCompatibilityForEpDevices: the devices "
            f"belong to several execution providers ({', '.join(names)})"
        )
    cls = devices[0]._cls
    if not compatibility_info or cls.compile is ExecutionProvider.compile:
        return OrtCompiledModelCompatibility.EP_NOT_APPLICABLE
    try:
        provider = cls(dict(devices[0].ep_options))
        try:
            verdict = provider.validate_compiled_model_compatibility_info(compatibility_info, [])
        finally:
            close = getattr(provider, "close", None)
            if callable(close):
                close()
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # the provider's failure, named
        raise EPFail(
            f"{names[0]}: judging a compatibility string failed: {type(exc).__name__}: {exc}"
        ) from exc
    return verdict.status
