"""ortcore: a Python runtime for ONNX models whose execution providers are plugins.

Code written for onnxruntime runs with ``import ortcore as onnxruntime``::

    import ortcore as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"x": x})

or, unchanged, after :func:`install_as_onnxruntime` (``import onnxruntime``
then gives ortcore; see ``docs/onnxruntime-compat.md``).
"""

from __future__ import annotations

from .compat import install_as_onnxruntime
from .compat_api import (
    OrtCompiledModelCompatibility,
    create_and_register_allocator,
    create_and_register_allocator_v2,
    disable_telemetry_events,
    enable_telemetry_events,
    get_build_info,
    has_collective_ops,
    set_default_logger_callback,
    set_default_logger_severity,
    set_default_logger_verbosity,
    set_global_thread_pool_sizes,
    set_seed,
)
from .compile_api import (
    ModelCompiler,
    OrtCompileApiFlags,
    get_compatibility_info_from_model,
    get_compatibility_info_from_model_bytes,
)
from .custom_ops import CustomOp, Param, TensorType, custom_op
from .devices import (
    OrtAllocatorType,
    OrtArenaCfg,
    OrtDevice,
    OrtDeviceMemoryType,
    OrtDeviceVendorId,
    OrtMemoryInfo,
    OrtMemoryInfoDeviceType,
    OrtMemType,
)
from .ep_devices import (
    OrtEpAssignedNode,
    OrtEpAssignedSubgraph,
    OrtEpDevice,
    OrtExecutionProviderDevicePolicy,
    OrtHardwareDevice,
    OrtHardwareDeviceType,
    get_ep_devices,
)
from .ep_library import register_execution_provider_library, unregister_execution_provider_library
from .errors import (
    AllocationError,
    EPFail,
    ExternalDataChanged,
    Fail,
    InvalidArgument,
    InvalidArgumentRuntimeError,
    InvalidArgumentTypeError,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplementedOp,
    OrtcoreError,
    ProviderContractWarning,
    ProviderOptionError,
    RunTerminated,
    RunTerminatedError,
    RuntimeException,
)
from .iobinding import IOBinding
from .lora import AdapterFormat, LoraAdapter
from .options import (
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    RunOptions,
    SessionOptions,
)
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
from .sparse_tensor import OrtSparseFormat, SparseTensor

__version__ = "0.1.0"

SessionIOBinding = IOBinding  # onnxruntime's name of the native binding class


def get_version_string() -> str:
    """The ortcore version (onnxruntime's ``get_version_string``)."""
    return __version__


def get_device() -> str:
    """``"CPU"``, as onnxruntime's CPU build answers."""
    return "CPU"


def preload_dlls(
    cuda: bool = True, cudnn: bool = True, msvc: bool = True, directory: str | None = None
) -> None:
    """Accepted: ortcore's providers load their own libraries when first used."""


# onnxruntime's package exposes its native-module path as attributes once imported.
from .capi import _pybind_state as _pybind_state  # noqa: E402
from .capi import onnxruntime_pybind11_state as _native  # noqa: E402,F401

__all__ = [
    "AdapterFormat",
    "AllocationError",
    "CustomOp",
    "EPFail",
    "ExecutionMode",
    "ExecutionOrder",
    "ExternalDataChanged",
    "Fail",
    "GraphOptimizationLevel",
    "IOBinding",
    "InferenceSession",
    "InvalidArgument",
    "InvalidArgumentRuntimeError",
    "InvalidArgumentTypeError",
    "InvalidGraph",
    "InvalidProtobuf",
    "LoraAdapter",
    "ModelCompiler",
    "ModelMetadata",
    "NoSuchFile",
    "NodeArg",
    "NotImplementedOp",
    "OrtAllocatorType",
    "OrtArenaCfg",
    "OrtCompileApiFlags",
    "OrtCompiledModelCompatibility",
    "OrtDevice",
    "OrtEpAssignedNode",
    "OrtEpAssignedSubgraph",
    "OrtEpDevice",
    "OrtExecutionProviderDevicePolicy",
    "OrtHardwareDevice",
    "OrtHardwareDeviceType",
    "OrtDeviceMemoryType",
    "OrtDeviceVendorId",
    "OrtMemType",
    "OrtMemoryInfo",
    "OrtMemoryInfoDeviceType",
    "OrtSparseFormat",
    "OrtValue",
    "OrtcoreError",
    "Param",
    "Partition",
    "ProviderContractWarning",
    "ProviderOptionError",
    "RunOptions",
    "RunTerminated",
    "RunTerminatedError",
    "RuntimeException",
    "SessionIOBinding",
    "SessionOptions",
    "SparseTensor",
    "TensorType",
    "__version__",
    "create_and_register_allocator",
    "create_and_register_allocator_v2",
    "custom_op",
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_all_providers",
    "get_available_providers",
    "get_build_info",
    "get_compatibility_info_from_model",
    "get_compatibility_info_from_model_bytes",
    "get_device",
    "get_ep_devices",
    "get_version_string",
    "has_collective_ops",
    "install_as_onnxruntime",
    "preload_dlls",
    "register_execution_provider_library",
    "register_plugin",
    "set_default_logger_callback",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
    "set_global_thread_pool_sizes",
    "set_seed",
    "unregister_execution_provider_library",
]
