"""The fused operators' domain and schemas, for the core's optimizer.

They are part of the contract between the core and the providers, so they
live in :mod:`ep_sdk.fused_ops`; this module only re-exports them.
"""

from __future__ import annotations

from ep_sdk.fused_ops import (
    ACTIVATIONS,
    DOMAIN,
    POOL_ATTRIBUTES,
    VERSION,
    register_fused_schemas,
)

__all__ = ["ACTIVATIONS", "DOMAIN", "POOL_ATTRIBUTES", "VERSION", "register_fused_schemas"]
