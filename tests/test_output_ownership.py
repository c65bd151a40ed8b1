"""Two outputs of a run never share memory (onnxruntime hands back separate arrays).

A graph output that is a view of another (a Reshape or Identity of an output)
is copied silently: kernels may return views. One node or fused group
returning one buffer for two of its outputs breaks the provider contract:
the output is copied all the same and a ProviderContractWarning names the
provider and the node, once per session.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ep_sdk import ExecutionProvider, KernelRegistry
from ep_sdk.dtypes import DataType
from ep_sdk.testing import session

F = TensorProto.FLOAT


def _model(nodes: list[Any], outputs: list[str], inits: list[Any] = ()) -> onnx.ModelProto:  # type: ignore[assignment]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        list(inits),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("level", ["ORT_DISABLE_ALL", "ORT_ENABLE_ALL"])
def test_outputs_that_are_views_of_another_output_are_copied(level: str) -> None:
    shape = numpy_helper.from_array(np.array([4, 2], np.int64), "s")
    nodes = [
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("Reshape", ["h", "s"], ["y"]),
        helper.make_node("Identity", ["h"], ["z"]),
    ]
    so = ortcore.SessionOptions()
    so.graph_optimization_level = getattr(ortcore.GraphOptimizationLevel, level)
    sess = ortcore.InferenceSession(_model(nodes, ["h", "y", "z"], [shape]).SerializeToString(), so)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", ortcore.ProviderContractWarning)  # views are no fault
        h, y, z = sess.run(None, {"x": x})
    for a, b in ((h, y), (h, z), (y, z)):
        assert not np.shares_memory(a, b)
    h[...] = -1  # the caller owns each one
    np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(4, 2))
    np.testing.assert_array_equal(z, np.maximum(x, 0))


class _OneBufferSplit(ExecutionProvider):
    """Split returning one array for both of its outputs (halves that happen to be equal)."""

    name = "OneBufferSplitExecutionProvider"
    version = "1.0"
    priority = 1

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()

        @reg.kernel("Split", since=18, types={"T": {DataType.FLOAT}})
        def build(info: Any) -> Any:
            def split(x: np.ndarray, *_: Any) -> tuple[np.ndarray, np.ndarray]:
                half = np.ascontiguousarray(x[:, : x.shape[1] // 2])
                return half, half

            return split

        return reg


def test_one_buffer_for_two_outputs_of_a_node_is_copied_and_named() -> None:
    node = helper.make_node("Split", ["x"], ["a", "b"], name="halves", axis=1, num_outputs=2)
    sess = session(_OneBufferSplit, _model([node], ["a", "b"]), fallback=False)
    x = np.tile(np.arange(2, dtype=np.float32), (2, 2))
    with pytest.warns(ortcore.ProviderContractWarning) as caught:
        a, b = sess.run(None, {"x": x})
    message = str(caught[0].message)
    assert "OneBufferSplitExecutionProvider" in message and "'halves' (Split)" in message
    assert not np.shares_memory(a, b)
    np.testing.assert_array_equal(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ortcore.ProviderContractWarning)
        a2, b2 = sess.run(None, {"x": x})  # once per session: no second warning
    assert not np.shares_memory(a2, b2)
