"""Run x -> Mul -> Add -> ClipScale -> Relu -> Tanh with the onnxruntime bridge first.

``ClipScale`` is the custom operator guide's op (``custom_op.py``): only ortcore
knows it, so the bridge declines it and the CPU provider runs it.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import ortcore


def make_model() -> bytes:
    """y = tanh(relu(ClipScale(x * w + x)))."""
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["a"], name="mul"),
        helper.make_node("Add", ["a", "x"], ["b"], name="add"),
        helper.make_node("ClipScale", ["b"], ["c"], name="clip", domain="example.ops"),
        helper.make_node("Relu", ["c"], ["d"], name="relu"),
        helper.make_node("Tanh", ["d"], ["y"], name="tanh"),
    ]
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [2.0, -1.0, 0.5])
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 3]) for n in "xy")
    graph = helper.make_graph(nodes, "bridged", [x], [y], [w])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.ops", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def main() -> dict[str, int]:
    from custom_op import clip_scale

    # --8<-- [start:run]
    if "OrtBridgeExecutionProvider" not in ortcore.get_available_providers():
        import bridge_provider  # not pip-installed: register the module by hand

        ortcore.register_plugin(bridge_provider, name="bridge_provider_example")

    so = ortcore.SessionOptions()
    so.register_custom_ops(clip_scale)
    sess = ortcore.InferenceSession(make_model(), so, providers=["ortbridge", "cpu"])
    x = np.array([[-2.0, 0.5, 1.0], [3.0, -0.1, 4.0]], np.float32)
    (y,) = sess.run(None, {"x": x})

    for r in sess.get_partition().nodes:
        print(f"{r.node:5} {r.provider:27} {r.group or r.declined['OrtBridgeExecutionProvider']}")
    # --8<-- [end:run]
    expected = np.tanh(np.maximum(np.minimum(x * [2, -1, 0.5] + x, 6), 0))
    assert np.allclose(y, expected, atol=1e-6)
    return sess.get_partition().counts()


if __name__ == "__main__":
    print(main())
