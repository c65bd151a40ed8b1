"""ortcore: a Python runtime for ONNX models whose execution providers are plugins.

Code written for onnxruntime runs with ``import ortcore as onnxruntime``::

    import ortcore as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"x": x})
"""

from __future__ import annotations

from .errors import (
    AllocationError,
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplementedOp,
    OrtcoreError,
    ProviderOptionError,
    RunTerminated,
    RuntimeException,
)
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
from .plugins import register_plugin
from .session import (
    InferenceSession,
    ModelMetadata,
    NodeArg,
    Partition,
    get_all_providers,
    get_available_providers,
)

__version__ = "0.1.0"


def get_version_string() -> str:
    """The ortcore version (onnxruntime's ``get_version_string``)."""
    return __version__


def get_device() -> str:
    """``"CPU"``, as onnxruntime's CPU build answers."""
    return "CPU"


__all__ = [
    "AllocationError",
    "EPFail",
    "ExecutionMode",
    "Fail",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelMetadata",
    "NoSuchFile",
    "NodeArg",
    "NotImplementedOp",
    "OrtcoreError",
    "Partition",
    "ProviderOptionError",
    "RunOptions",
    "RunTerminated",
    "RuntimeException",
    "SessionOptions",
    "__version__",
    "get_all_providers",
    "get_available_providers",
    "get_device",
    "get_version_string",
    "register_plugin",
]
