"""ep_sdk: everything an execution-provider author imports.

A provider is an :class:`ExecutionProvider` subclass with a
:class:`KernelRegistry`, announced to ortcore by a plugin module whose
``@hookimpl`` function ``ortcore_providers`` returns the class, and an entry
point in group ``ortcore.providers`` that names that module.
"""

from __future__ import annotations

import pluggy

from .capability import GraphContext, claim_registered_nodes, node_types
from .dtypes import (
    ALL_TENSOR_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    NUMERIC_TYPES,
    from_numpy,
    to_numpy,
    type_string,
)
from .kernel import Compute, NodeInfo, RunContext, RunTerminated, SubgraphRunner
from .provider import (
    HOST_DEVICE,
    Capability,
    Claim,
    Device,
    ExecutionProvider,
    FusedGroup,
    ProviderOptionError,
    SessionConfig,
)
from .registry import KernelBuilder, KernelDef, KernelMiss, KernelRegistry, attribute_defaults

hookimpl = pluggy.HookimplMarker("ortcore")
"""Marker for a plugin's hook implementations (``@ep_sdk.hookimpl``)."""

__all__ = [
    "ALL_TENSOR_TYPES",
    "FLOAT_TYPES",
    "HOST_DEVICE",
    "INT_TYPES",
    "NUMERIC_TYPES",
    "Capability",
    "Claim",
    "Compute",
    "Device",
    "ExecutionProvider",
    "FusedGroup",
    "GraphContext",
    "KernelBuilder",
    "KernelDef",
    "KernelMiss",
    "KernelRegistry",
    "NodeInfo",
    "ProviderOptionError",
    "RunContext",
    "RunTerminated",
    "SessionConfig",
    "SubgraphRunner",
    "attribute_defaults",
    "claim_registered_nodes",
    "from_numpy",
    "hookimpl",
    "node_types",
    "to_numpy",
    "type_string",
]
