"""ortcore: a Python runtime for ONNX models whose execution providers are plugins.

Code written for onnxruntime runs with ``import ortcore as onnxruntime``::

    import ortcore as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"x": x})
"""

from __future__ import annotations

from .custom_ops import CustomOp, Param, TensorType, custom_op
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
from .iobinding import IOBinding
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
from .ortvalue import OrtValue
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
    "CustomOp",
    "EPFail",
    "ExecutionMode",
    "Fail",
    "GraphOptimizationLevel",
    "IOBinding",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelMetadata",
    "NoSuchFile",
    "NodeArg",
    "NotImplementedOp",
    "OrtValue",
    "OrtcoreError",
    "Param",
    "Partition",
    "ProviderOptionError",
    "RunOptions",
    "RunTerminated",
    "RuntimeException",
    "SessionOptions",
    "TensorType",
    "__version__",
    "custom_op",
    "get_all_providers",
    "get_available_providers",
    "get_device",
    "get_version_string",
    "register_plugin",
]
