"""onnxruntime's native-module path ``onnxruntime.capi.onnxruntime_pybind11_state``.

onnxruntime's exceptions (``Fail``, ``InvalidArgument``, ``NoSuchFile``, ...)
and the classes and functions its C extension defines, under the names code
imports them by. Each is ortcore's own object (the same class
``ortcore.InvalidArgument`` is), so ``except`` clauses written against these
names catch what ortcore raises.
"""

from __future__ import annotations

from .._version import __version__
from ..compat_api import (
    OrtCompiledModelCompatibility,
    create_and_register_allocator,
    create_and_register_allocator_v2,
    disable_telemetry_events,
    enable_telemetry_events,
    get_build_info,
    get_default_session_options,
    has_collective_ops,
    set_default_logger_callback,
    set_default_logger_severity,
    set_default_logger_verbosity,
    set_global_thread_pool_sizes,
    set_seed,
)
from ..compile_api import (
    OrtCompileApiFlags,
    OrtExternalInitializerInfo,
    get_compatibility_info_from_model,
    get_compatibility_info_from_model_bytes,
    get_model_compatibility_for_ep_devices,
)
from ..devices import (
    ArenaExtendStrategy,
    OrtAllocatorType,
    OrtArenaCfg,
    OrtDevice,
    OrtDeviceMemoryType,
    OrtMemoryInfo,
    OrtMemoryInfoDeviceType,
    OrtMemType,
)
from ..ep_devices import (
    OrtDeviceEpIncompatibilityReason,
    OrtEpAssignedNode,
    OrtEpAssignedSubgraph,
    OrtEpDevice,
    OrtExecutionProviderDevicePolicy,
    OrtHardwareDevice,
    OrtHardwareDeviceType,
    get_ep_devices,
    get_hardware_device_ep_incompatibility_details,
    get_hardware_devices,
)
from ..ep_library import (
    register_execution_provider_library,
    unregister_execution_provider_library,
)
from ..errors import (
    DeviceReset,
    EngineError,
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    ModelLoadCanceled,
    ModelLoaded,
    ModelRequiresCompilation,
    NoModel,
    NoSuchFile,
    NotFound,
    NotImplementedOp,
    RuntimeException,
)
from ..iobinding import IOBinding
from ..lora import AdapterFormat, LoraAdapter
from ..options import (
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    RunOptions,
    SessionOptions,
)
from ..ortvalue import OrtValue, OrtValueVector
from ..session import (
    InferenceSession,
    ModelMetadata,
    NodeArg,
    get_all_providers,
    get_available_providers,
)
from ..sparse_tensor import OrtSparseFormat, SparseTensor

NotImplemented = NotImplementedOp
SessionIOBinding = IOBinding
kNextPowerOfTwo = ArenaExtendStrategy.kNextPowerOfTwo
kSameAsRequested = ArenaExtendStrategy.kSameAsRequested


def get_device() -> str:
    """``"CPU"``, as onnxruntime's CPU build answers."""
    return "CPU"


def get_version_string() -> str:
    """The ortcore version (onnxruntime's ``get_version_string``)."""
    return __version__


__all__ = [
    "AdapterFormat",
    "ArenaExtendStrategy",
    "DeviceReset",
    "EPFail",
    "EngineError",
    "ExecutionMode",
    "ExecutionOrder",
    "Fail",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "LoraAdapter",
    "ModelLoadCanceled",
    "ModelLoaded",
    "ModelMetadata",
    "ModelRequiresCompilation",
    "NoModel",
    "NoSuchFile",
    "NodeArg",
    "NotFound",
    "NotImplemented",
    "OrtAllocatorType",
    "OrtArenaCfg",
    "OrtCompileApiFlags",
    "OrtCompiledModelCompatibility",
    "OrtDevice",
    "OrtDeviceEpIncompatibilityReason",
    "OrtEpAssignedNode",
    "OrtEpAssignedSubgraph",
    "OrtEpDevice",
    "OrtExecutionProviderDevicePolicy",
    "OrtExternalInitializerInfo",
    "OrtHardwareDevice",
    "OrtHardwareDeviceType",
    "OrtDeviceMemoryType",
    "OrtMemType",
    "OrtMemoryInfo",
    "OrtMemoryInfoDeviceType",
    "OrtSparseFormat",
    "OrtValue",
    "OrtValueVector",
    "RunOptions",
    "RuntimeException",
    "SessionIOBinding",
    "SessionOptions",
    "SparseTensor",
    "create_and_register_allocator",
    "create_and_register_allocator_v2",
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_all_providers",
    "get_available_providers",
    "get_build_info",
    "get_default_session_options",
    "get_device",
    "get_compatibility_info_from_model",
    "get_compatibility_info_from_model_bytes",
    "get_model_compatibility_for_ep_devices",
    "get_ep_devices",
    "get_hardware_device_ep_incompatibility_details",
    "get_hardware_devices",
    "get_version_string",
    "has_collective_ops",
    "kNextPowerOfTwo",
    "kSameAsRequested",
    "register_execution_provider_library",
    "set_default_logger_callback",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
    "set_global_thread_pool_sizes",
    "set_seed",
    "unregister_execution_provider_library",
]
