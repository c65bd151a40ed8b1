"""The exceptions ortcore raises.

The names follow onnxruntime's (``onnxruntime.capi.onnxruntime_pybind11_state``)
so ``except InvalidArgument`` keeps working after ``import ortcore as ort``.
Each also derives from the closest built-in exception (``ValueError``,
``FileNotFoundError``, ``RuntimeError``, ...), so generic handlers catch them.

Where onnxruntime raises a plain built-in instead of one of its own classes
(its Python layer raises ``RuntimeError`` for an unknown config key or
provider, ``TypeError`` for an argument of the wrong type), ortcore raises a
class that is both: :class:`InvalidArgumentRuntimeError`,
:class:`InvalidArgumentTypeError`. A stopped run raises
:class:`RunTerminatedError`, onnxruntime's ``Fail`` and ep_sdk's
``RunTerminated`` at once. ``docs/onnxruntime-compat.md`` lists each situation.
"""

from __future__ import annotations

from ep_sdk import ProviderOptionError, RunTerminated

__all__ = [
    "AllocationError",
    "DeviceReset",
    "EPFail",
    "EngineError",
    "ExternalDataChanged",
    "Fail",
    "InvalidArgument",
    "InvalidArgumentRuntimeError",
    "InvalidArgumentTypeError",
    "InvalidProtobufRuntimeError",
    "NoSuchFileRuntimeError",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelLoadCanceled",
    "ModelLoaded",
    "ModelRequiresCompilation",
    "NoModel",
    "NoSuchFile",
    "NotFound",
    "NotImplementedOp",
    "OrtcoreError",
    "ProviderContractWarning",
    "ProviderOptionError",
    "RunInvalidArgument",
    "RunTerminated",
    "RunTerminatedError",
    "RuntimeException",
    "StaleSavedSession",
    "UndefinedInput",
]


class OrtcoreError(Exception):
    """Base class of every error ortcore raises on purpose."""


class InvalidArgument(OrtcoreError, ValueError):
    """A caller passed something wrong: a feed, a name, an option, a provider."""


class NoSuchFile(OrtcoreError, FileNotFoundError):
    """A model (or its external data) file does not exist."""


class InvalidProtobuf(OrtcoreError, ValueError):
    """The bytes given are not a readable ONNX model (malformed or truncated)."""


class InvalidGraph(OrtcoreError, ValueError):
    """The model parses but is not a valid graph (cycle, bad opset, bad types)."""


class NotImplementedOp(OrtcoreError, NotImplementedError):
    """No provider of the session can run a node."""


class Fail(OrtcoreError, RuntimeError):
    """A step failed while creating or running a session."""


class RuntimeException(Fail):
    """A kernel raised while a model was running."""


class EPFail(Fail):
    """An execution provider broke its contract (invalid claim, compile error)."""


class AllocationError(Fail, MemoryError):
    """A tensor too large for this machine was requested."""


class InvalidArgumentRuntimeError(InvalidArgument, RuntimeError):
    """A bad argument where onnxruntime raises a plain ``RuntimeError``: an
    unknown session or run config key, an unknown provider given to
    ``set_providers``, a name IO binding cannot find, a size mismatch in
    ``OrtValue.update_inplace``."""


class NoSuchFileRuntimeError(NoSuchFile, RuntimeError):
    """A missing file where onnxruntime raises a plain ``RuntimeError``
    (``get_compatibility_info_from_model`` of a path that does not exist)."""


class InvalidProtobufRuntimeError(InvalidProtobuf, RuntimeError):
    """Unreadable model bytes where onnxruntime raises a plain ``RuntimeError``
    (``get_compatibility_info_from_model_bytes``)."""


class InvalidArgumentTypeError(InvalidArgument, TypeError):
    """An argument of the wrong Python type, where onnxruntime raises ``TypeError``
    (a model that is neither a path nor bytes, a non-string config value)."""


class UndefinedInput(InvalidGraph, InvalidArgument):
    """A node reads a value that nothing defines (onnxruntime raises
    ``InvalidArgument``: "Node input 'x' is not a graph input, initializer, or
    output of a previous node")."""


class RunInvalidArgument(InvalidArgument, RuntimeException):
    """A running node's inputs do not fit each other (a per-channel parameter
    of the wrong length where the channels were symbolic at load):
    onnxruntime raises ``InvalidArgument`` with its "Non-zero status code
    returned while running ..." wording; also a :class:`RuntimeException`,
    as every other failure of a running node."""


class RunTerminatedError(Fail, RunTerminated):
    """A run stopped by ``RunOptions.terminate`` (onnxruntime raises ``Fail``)."""


class EngineError(Fail):
    """onnxruntime's ``EngineError``: the engine is in a state that cannot serve the call."""


class ExternalDataChanged(EngineError):
    """A memory-mapped external data file of the session's model was
    truncated, extended or written to after the session loaded it: the
    session refuses every run from then on (see :mod:`ortcore.external_data`);
    create it again."""


class NoModel(Fail):
    """onnxruntime's ``NoModel``: no model was loaded."""


class ModelLoaded(Fail):
    """onnxruntime's ``ModelLoaded``: a model is already loaded."""


class ModelLoadCanceled(Fail):
    """onnxruntime's ``ModelLoadCanceled``: loading was cancelled."""


class ModelRequiresCompilation(Fail):
    """onnxruntime's ``ModelRequiresCompilation``: the model must be compiled
    for its provider first (ortcore compiles when a session is created)."""


class DeviceReset(Fail):
    """onnxruntime's ``DeviceReset``: the device was reset under a session."""


class NotFound(OrtcoreError, LookupError):
    """onnxruntime's ``NotFound``: a named object does not exist."""


class ProviderContractWarning(UserWarning):
    """A provider broke a rule of the provider contract that the runtime could
    make harmless (for example, one array returned for two outputs of a node:
    the runtime copied it). The run's results are right; the provider should
    be fixed, and the conformance suite fails it."""


class StaleSavedSession(Exception):
    """A saved session that cannot be used (:mod:`ortcore.saved_session`):
    the session is created from the model instead. Internal: never raised to
    a caller of the session API."""
