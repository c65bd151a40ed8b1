"""Model builders of the scale-out tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
from onnx import TensorProto, helper


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    ir_version: int = 8,
) -> bytes:
    """Serialize a one-graph model."""
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(initializers))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version
    )
    return model.SerializeToString()


def fvi(name: str, shape: Sequence[int | str | None] | None, elem: int = TensorProto.FLOAT) -> Any:
    """A tensor value info."""
    return helper.make_tensor_value_info(name, elem, shape)
