"""ortcore: a Python runtime for ONNX models whose execution providers are plugins.

Code written for onnxruntime runs with ``import ortcore as onnxruntime``::

    import ortcore as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"x": x})

or, unchanged, after :func:`install_as_onnxruntime` (``import onnxruntime``
then gives ortcore; see ``docs/onnxruntime-compat.md``).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from ._deferred import defer_sympy
from .compat import install_as_onnxruntime
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

# Before anything imports onnx-ir (nothing above does: tests/test_cold_import.py):
# sympy, which onnx-ir imports and a session rarely uses, loads on first use
# instead (0.3-0.4 s of a cold start; see ortcore/_deferred.py).
defer_sympy()

if TYPE_CHECKING:
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
        OrtExternalInitializerInfo,
        get_compatibility_info_from_model,
        get_compatibility_info_from_model_bytes,
        get_model_compatibility_for_ep_devices,
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
    from .ep_library import (
        register_execution_provider_library,
        unregister_execution_provider_library,
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

    SessionIOBinding = IOBinding

# Each public name -> the module that defines it, imported on first access
# (PEP 562). ``import ortcore`` loads only the exceptions and
# ``install_as_onnxruntime``: the session machinery and what it imports (onnx,
# onnx-ir, numpy), the providers, the compile and device APIs, onnxruntime's
# ``capi`` package and the CLI load when a program first touches them.
_LAZY: dict[str, str] = {
    "OrtCompiledModelCompatibility": "compat_api",
    "create_and_register_allocator": "compat_api",
    "create_and_register_allocator_v2": "compat_api",
    "disable_telemetry_events": "compat_api",
    "enable_telemetry_events": "compat_api",
    "get_build_info": "compat_api",
    "has_collective_ops": "compat_api",
    "set_default_logger_callback": "compat_api",
    "set_default_logger_severity": "compat_api",
    "set_default_logger_verbosity": "compat_api",
    "set_global_thread_pool_sizes": "compat_api",
    "set_seed": "compat_api",
    "ModelCompiler": "compile_api",
    "OrtCompileApiFlags": "compile_api",
    "OrtExternalInitializerInfo": "compile_api",
    "get_compatibility_info_from_model": "compile_api",
    "get_compatibility_info_from_model_bytes": "compile_api",
    "get_model_compatibility_for_ep_devices": "compile_api",
    "CustomOp": "custom_ops",
    "Param": "custom_ops",
    "TensorType": "custom_ops",
    "custom_op": "custom_ops",
    "OrtAllocatorType": "devices",
    "OrtArenaCfg": "devices",
    "OrtDevice": "devices",
    "OrtDeviceMemoryType": "devices",
    "OrtDeviceVendorId": "devices",
    "OrtMemoryInfo": "devices",
    "OrtMemoryInfoDeviceType": "devices",
    "OrtMemType": "devices",
    "OrtEpAssignedNode": "ep_devices",
    "OrtEpAssignedSubgraph": "ep_devices",
    "OrtEpDevice": "ep_devices",
    "OrtExecutionProviderDevicePolicy": "ep_devices",
    "OrtHardwareDevice": "ep_devices",
    "OrtHardwareDeviceType": "ep_devices",
    "get_ep_devices": "ep_devices",
    "register_execution_provider_library": "ep_library",
    "unregister_execution_provider_library": "ep_library",
    "IOBinding": "iobinding",
    "ExecutionMode": "options",
    "ExecutionOrder": "options",
    "GraphOptimizationLevel": "options",
    "RunOptions": "options",
    "SessionOptions": "options",
    "OrtValue": "ortvalue",
    "AdapterFormat": "lora",
    "LoraAdapter": "lora",
    "register_plugin": "plugins",
    "InferenceSession": "session",
    "ModelMetadata": "session",
    "NodeArg": "session",
    "Partition": "session",
    "get_all_providers": "session",
    "get_available_providers": "session",
    "OrtSparseFormat": "sparse_tensor",
    "SparseTensor": "sparse_tensor",
    "SessionIOBinding": "iobinding",  # onnxruntime's name of the native binding class
}
_ALIASES = {"SessionIOBinding": "IOBinding"}
# onnxruntime's package exposes its native module as attributes once imported.
_CAPI = {"_pybind_state": "_pybind_state", "_native": "onnxruntime_pybind11_state"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), _ALIASES.get(name, name))
    elif name in _CAPI:
        value = importlib.import_module(f"{__name__}.capi.{_CAPI[name]}")
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")  # ortcore.capi, ortcore.session...
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


from ._version import __version__  # noqa: E402  (the one place it is written: _version.py)


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
    "OrtExternalInitializerInfo",
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
    "get_model_compatibility_for_ep_devices",
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
