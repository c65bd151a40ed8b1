"""A bridge to a foreign engine (onnxruntime itself) on ep_sdk.BridgeExecutionProvider.

A plugin module: ``bridge_run.py`` registers it and runs a model with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnxruntime as ort
from onnxruntime.capi import _pybind_state as ort_state

import ep_sdk

# --8<-- [start:provider]
# onnxruntime's CPU kernels as (domain, op type): its per-node "can you run this?"
ORT_KERNELS = {
    (k.domain, k.op_name)
    for k in ort_state.get_all_opkernel_def()
    if k.provider == "CPUExecutionProvider"
}


class OrtBridgeExecutionProvider(ep_sdk.BridgeExecutionProvider):
    """Hands groups to onnxruntime's CPU provider as standalone models."""

    name = "OrtBridgeExecutionProvider"
    aliases = ("ortbridge",)
    version = "0.1.0"
    engine_name = "onnxruntime"

    def supports_node(self, node: Any, graph: ep_sdk.GraphContext) -> bool | str:
        if (node.domain, node.op_type) in ORT_KERNELS:
            return True
        return f"onnxruntime has no CPU kernel for {node.domain or 'ai.onnx'}::{node.op_type}"

    def engine_version(self) -> str:
        return str(ort.__version__)

    def build(self, model: bytes, group: ep_sdk.FusedGroup) -> Any:
        # the engine: an onnxruntime session, and the model it was built from
        return ort.InferenceSession(model, providers=["CPUExecutionProvider"]), model

    def run(self, engine: Any, inputs: Sequence[Any]) -> Sequence[Any]:
        names = [i.name for i in engine[0].get_inputs()]
        return engine[0].run(None, dict(zip(names, inputs)))  # type: ignore[no-any-return]

    def serialize(self, engine: Any) -> bytes:
        return bytes(engine[1])  # the group's model, its constants included

    def deserialize(self, data: bytes, group: ep_sdk.FusedGroup) -> Any:
        return self.build(data, group)


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    return [OrtBridgeExecutionProvider]


# --8<-- [end:provider]
