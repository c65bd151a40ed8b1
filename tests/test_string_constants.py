"""String constants reach kernels and users as ``str`` objects, as feeds do.

onnx-ir gives a STRING tensor's content as an array of ``bytes``; a kernel
that concatenates or compares strings would then mix ``b'...'`` into its
results, and a string initializer returned as an output would come back as
bytes where onnxruntime gives ``str``.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ep_sdk.dtypes import constant_array

STR = TensorProto.STRING


def _session(model: onnx.ModelProto, optimize: bool) -> ortcore.InferenceSession:
    so = ortcore.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ortcore.InferenceSession(model.SerializeToString(), so)


@pytest.mark.parametrize("optimize", [False, True])
def test_string_initializer_and_constant_are_str(optimize: bool) -> None:
    init = numpy_helper.from_array(np.array(["s", "é"], dtype=object), "y")
    attr = helper.make_tensor("v", STR, [2], [b"x", b"yz"])
    nodes = [
        helper.make_node("Identity", ["y"], ["z"]),
        helper.make_node("StringConcat", ["x", "y"], ["w"]),
        helper.make_node("Constant", [], ["c"], value=attr),
    ]
    outs = [helper.make_tensor_value_info(n, STR, None) for n in ("z", "w", "c")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", STR, [2])], outs, [init]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    z, w, c = _session(model, optimize).run(None, {"x": np.array(["cat", "dog"], object)})
    assert z.dtype == object and z.tolist() == ["s", "é"]
    assert w.tolist() == ["cats", "dogé"]
    assert c.dtype == object and c.tolist() == ["x", "yz"]


def test_constant_array_keeps_numbers_and_shapes() -> None:
    import onnx_ir as ir

    t = ir.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert constant_array(t).dtype == np.float32
    s = ir.StringTensor(np.array([[b"a", b"b"]], dtype=object), shape=ir.Shape([1, 2]))
    out = constant_array(s)
    assert out.shape == (1, 2) and out.tolist() == [["a", "b"]]
