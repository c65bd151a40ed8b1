"""ep_sdk: everything an execution-provider author imports.

A provider is an :class:`ExecutionProvider` subclass with a
:class:`KernelRegistry`, announced to ortcore by a plugin module whose
``@hookimpl`` function ``ortcore_providers`` returns the class, and an entry
point in group ``ortcore.providers`` that names that module.

What is here:

* the provider: :class:`ExecutionProvider`, :class:`Device`, :class:`SessionConfig`;
* kernels: :class:`KernelRegistry` and its ``kernel`` decorator, :class:`NodeInfo`
  (what a kernel is built from; :func:`make_node_info` builds it from a node,
  as the core does), :class:`ProviderView` (what a kernel sees of its
  provider), :class:`RunContext` (what it runs in);
* the fused operators the core's optimizer emits: ``ep_sdk.fused_ops``
  (their domain, activations and schemas; :func:`register_fused_schemas`);
* :func:`reset_schema_cache`, for code that changes onnx's schema table;
* capability: :class:`Capability`, :class:`Claim`, :class:`GraphContext`,
  :func:`claim_registered_nodes`, :func:`group_nodes`, :func:`group_io`,
  :func:`group_model`, :class:`FusedGroup`;
* bridges to foreign engines: :class:`BridgeExecutionProvider`;
* compiled models (SDK 1.1): :class:`OrtCompiledModelCompatibility` and
  :class:`Compatibility`, what a provider's
  ``validate_compiled_model_compatibility_info`` answers (``ep_sdk.compiled_context``);
* hardware (new in 1.1): :class:`HardwareDevice`, :class:`HardwareDeviceType`
  and :class:`EpDevice`, what ``ExecutionProvider.ep_devices()`` lists
  (``ep_sdk.hardware``: :func:`~ep_sdk.hardware.host_cpu`,
  :func:`~ep_sdk.hardware.cuda_devices`);
* memory: the :class:`Allocator`, :class:`DataTransfer` and
  :class:`DeviceTensor` protocols; another provider's device, lent by the
  host: :class:`DevicePeer`, :class:`ContiguousTensor`, :class:`NoDevicePeer`;
* what the host lends (``SessionConfig.host``, :class:`Host`): the
  compiled-artifact store (:class:`ArtifactStore`, :func:`artifact_key`,
  also ``SessionConfig.artifact_store``) and device peers;
* custom operators: :func:`custom_op`, :class:`CustomOp`, :class:`Param`,
  :class:`TensorType` (what a plugin's ``ortcore_custom_ops`` hook returns);
* :func:`check_terminate`, which a long-running kernel polls to honour
  ``RunOptions.terminate``, and :func:`current_run`;
* :func:`check_tensor_size`, which a kernel calls before allocating an output
  whose size comes from data (:class:`TensorTooLarge`, :func:`tensor_byte_limit`);
* :data:`hookimpl`, the marker of a plugin's hook functions;
* :data:`__version__`, this SDK's version (distribution ``ortcore-ep-sdk``;
  semantic versioning, see docs/provider-contract.md);
* ``ep_sdk.testing`` (imported on its own): pytest helpers that run nodes and
  models through a provider, or a provider's kernels on their own
  (``KernelKit``), and compare with onnx's reference evaluator.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

import pluggy

from ._version import __version__

if TYPE_CHECKING:
    from . import fused_ops, hardware
    from .artifacts import ArtifactStore, artifact_key
    from .bridge import BridgeExecutionProvider
    from .capability import (
        Capability,
        Claim,
        FusedGroup,
        GraphContext,
        claim_registered_nodes,
        node_types,
    )
    from .compiled_context import Compatibility, OrtCompiledModelCompatibility
    from .custom_ops import CustomOp, Param, TensorType, custom_op
    from .device import (
        HOST_DEVICE,
        Allocator,
        ContiguousTensor,
        DataTransfer,
        Device,
        DevicePeer,
        DeviceTensor,
        HostAllocator,
        NoDevicePeer,
    )
    from .dtypes import (
        ALL_TENSOR_TYPES,
        FLOAT_TYPES,
        INT_TYPES,
        NUMERIC_TYPES,
        from_numpy,
        to_numpy,
        type_string,
    )
    from .fused_ops import register_fused_schemas
    from .graph import group_io, group_model, group_nodes
    from .hardware import EpDevice, HardwareDevice, HardwareDeviceType
    from .host import Host
    from .kernel import (
        Compute,
        NodeInfo,
        ProviderView,
        RunContext,
        RunTerminated,
        SessionConfig,
        SubgraphRunner,
    )
    from .limits import TensorTooLarge, check_tensor_size, tensor_byte_limit
    from .nodeinfo import make_node_info
    from .provider import ExecutionProvider, ProviderOptionError
    from .registry import (
        KernelBuilder,
        KernelDef,
        KernelMiss,
        KernelRegistry,
        attribute_defaults,
        reset_schema_cache,
    )
    from .terminate import check_terminate, current_run

hookimpl = pluggy.HookimplMarker("ortcore")
"""Marker for a plugin's hook implementations (``@ep_sdk.hookimpl``)."""

# Each public name -> the module that defines it, imported on first access
# (PEP 562): a plugin module that only needs ``hookimpl`` and the host's
# ``import ortcore`` do not pay for onnx, onnx-ir and numpy, which the kernel,
# registry and capability modules import.
_LAZY: dict[str, str] = {
    "ArtifactStore": "artifacts",
    "artifact_key": "artifacts",
    "BridgeExecutionProvider": "bridge",
    "Capability": "capability",
    "Claim": "capability",
    "FusedGroup": "capability",
    "GraphContext": "capability",
    "claim_registered_nodes": "capability",
    "node_types": "capability",
    "Compatibility": "compiled_context",
    "OrtCompiledModelCompatibility": "compiled_context",
    "CustomOp": "custom_ops",
    "Param": "custom_ops",
    "TensorType": "custom_ops",
    "custom_op": "custom_ops",
    "HOST_DEVICE": "device",
    "Allocator": "device",
    "ContiguousTensor": "device",
    "DataTransfer": "device",
    "Device": "device",
    "DevicePeer": "device",
    "DeviceTensor": "device",
    "HostAllocator": "device",
    "NoDevicePeer": "device",
    "ALL_TENSOR_TYPES": "dtypes",
    "FLOAT_TYPES": "dtypes",
    "INT_TYPES": "dtypes",
    "NUMERIC_TYPES": "dtypes",
    "from_numpy": "dtypes",
    "to_numpy": "dtypes",
    "type_string": "dtypes",
    "register_fused_schemas": "fused_ops",
    "group_io": "graph",
    "group_model": "graph",
    "group_nodes": "graph",
    "EpDevice": "hardware",
    "HardwareDevice": "hardware",
    "HardwareDeviceType": "hardware",
    "Host": "host",
    "Compute": "kernel",
    "NodeInfo": "kernel",
    "ProviderView": "kernel",
    "RunContext": "kernel",
    "RunTerminated": "_errors",
    "SessionConfig": "kernel",
    "SubgraphRunner": "kernel",
    "TensorTooLarge": "limits",
    "check_tensor_size": "limits",
    "tensor_byte_limit": "limits",
    "make_node_info": "nodeinfo",
    "ExecutionProvider": "provider",
    "ProviderOptionError": "_errors",
    "KernelBuilder": "registry",
    "KernelDef": "registry",
    "KernelMiss": "registry",
    "KernelRegistry": "registry",
    "attribute_defaults": "registry",
    "reset_schema_cache": "registry",
    "check_terminate": "terminate",
    "current_run": "terminate",
}
def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    elif not name.startswith("__") and _is_submodule(name):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _is_submodule(name: str) -> bool:
    """Whether ``ep_sdk.<name>`` is a module of this package (``ep_sdk.fused_ops``,
    ``ep_sdk.hardware``, ...), which ``ep_sdk.<name>`` imports as before."""
    return importlib.util.find_spec(f"{__name__}.{name}") is not None


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "__version__",
    "ALL_TENSOR_TYPES",
    "EpDevice",
    "HardwareDevice",
    "HardwareDeviceType",
    "FLOAT_TYPES",
    "HOST_DEVICE",
    "INT_TYPES",
    "NUMERIC_TYPES",
    "Allocator",
    "ArtifactStore",
    "BridgeExecutionProvider",
    "Capability",
    "Claim",
    "Compatibility",
    "Compute",
    "ContiguousTensor",
    "CustomOp",
    "DataTransfer",
    "Device",
    "DevicePeer",
    "DeviceTensor",
    "ExecutionProvider",
    "FusedGroup",
    "GraphContext",
    "Host",
    "HostAllocator",
    "KernelBuilder",
    "KernelDef",
    "KernelMiss",
    "KernelRegistry",
    "NoDevicePeer",
    "NodeInfo",
    "OrtCompiledModelCompatibility",
    "Param",
    "ProviderOptionError",
    "ProviderView",
    "RunContext",
    "RunTerminated",
    "SessionConfig",
    "SubgraphRunner",
    "TensorTooLarge",
    "TensorType",
    "artifact_key",
    "attribute_defaults",
    "check_tensor_size",
    "check_terminate",
    "claim_registered_nodes",
    "current_run",
    "custom_op",
    "from_numpy",
    "fused_ops",
    "group_io",
    "group_model",
    "group_nodes",
    "hardware",
    "hookimpl",
    "make_node_info",
    "node_types",
    "register_fused_schemas",
    "reset_schema_cache",
    "tensor_byte_limit",
    "to_numpy",
    "type_string",
]
