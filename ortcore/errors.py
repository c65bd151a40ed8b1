"""The exceptions ortcore raises.

The names follow onnxruntime's (``onnxruntime.capi.onnxruntime_pybind11_state``)
so ``except InvalidArgument`` keeps working after ``import ortcore as ort``.
Each also derives from the closest built-in exception (``ValueError``,
``FileNotFoundError``, ``RuntimeError``, ...), so generic handlers catch them.
"""

from __future__ import annotations

from ep_sdk import ProviderOptionError, RunTerminated

__all__ = [
    "AllocationError",
    "EPFail",
    "Fail",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "NoSuchFile",
    "NotImplementedOp",
    "OrtcoreError",
    "ProviderOptionError",
    "RunTerminated",
    "RuntimeException",
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
