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
from .errors import Fail, InvalidArgument, InvalidArgumentTypeError, InvalidProtobuf, NoSuchFile
from .options import GraphOptimizationLevel, SessionOptions

__all__ = [
    "ModelCompiler",
    "OrtCompileApiFlags",
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
        get_initializer_location_func: not supported by ortcore (refused).
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
            raise InvalidArgument(
                "ortcore.ModelCompiler does not support get_initializer_location_func; "
                "use external_initializers_file_path"
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
        if folder is not None:
            write_context_files(folder, ctx, None)
        return bytes(ctx.proto.SerializeToString())

    def compile_to_stream(self, write_function: Callable[[bytes], Any]) -> None:
        """Compile and hand the model's bytes to ``write_function`` (as
        :meth:`compile_to_bytes`)."""
        write_function(self.compile_to_bytes())

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


def _info(proto: Any, ep_type: str) -> str | None:
    if not ep_type:
        raise InvalidArgument("Invalid argument provided to GetCompatibilityInfoFromModel.")
    for prop in proto.metadata_props:
        if prop.key == COMPATIBILITY_INFO_PREFIX + ep_type:
            return str(prop.value)
    return None


def get_compatibility_info_from_model(
    model_path: str | os.PathLike[str], ep_type: str
) -> str | None:
    """The compatibility string a compiled model holds for provider ``ep_type``
    (metadata ``ep_compatibility_info.<ep_type>``), or ``None``.

    Raises:
        NoSuchFile: no such file. InvalidProtobuf: not a model.
        InvalidArgument: an empty ``ep_type``.
    """
    path = Path(os.fspath(model_path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NoSuchFile(f"Load model {path!s} failed. File doesn't exist") from exc
    return get_compatibility_info_from_model_bytes(data, ep_type)


def get_compatibility_info_from_model_bytes(model_data: bytes, ep_type: str) -> str | None:
    """:func:`get_compatibility_info_from_model` of a model's bytes."""
    import onnx
    from google.protobuf.message import DecodeError

    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(bytes(model_data))
    except (DecodeError, ValueError) as exc:
        raise InvalidProtobuf("Protobuf parsing failed.") from exc
    return _info(proto, ep_type)


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
        EPFail: the provider could not be created or its judgement raised.
    """
    from ep_sdk import ExecutionProvider

    from .ep_devices import OrtEpDevice
    from .errors import EPFail, InvalidArgumentRuntimeError

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
