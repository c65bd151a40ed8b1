"""Run a model with the tutorial provider first and the CPU provider as fallback.

Run it with ``python tutorial_run.py`` once the provider is installed (or from
this folder: it registers ``tutorial_provider`` by hand if it is not).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import ortcore


def make_model() -> bytes:
    """y = Softmax(Relu(x @ w + b) * 2): MatMul and Softmax are not ours."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
        helper.make_node("Add", ["xw", "b"], ["h"], name="add"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "two"], ["s"], name="mul"),
        helper.make_node("Softmax", ["s"], ["y"], name="softmax", axis=-1),
    ]
    rng = np.random.default_rng(0)
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [4, 3], rng.standard_normal(12).tolist()),
        helper.make_tensor("b", TensorProto.FLOAT, [3], [0.1, -0.2, 0.3]),
        helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
    ]
    graph = helper.make_graph(
        nodes,
        "tutorial",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def main() -> dict[str, int]:
    # --8<-- [start:run]
    if "TutorialExecutionProvider" not in ortcore.get_available_providers():
        import tutorial_provider  # not pip-installed: register the module by hand

        ortcore.register_plugin(tutorial_provider)

    sess = ortcore.InferenceSession(make_model(), providers=["tutorial", "cpu"])
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})

    partition = sess.get_partition()
    for record in partition.nodes:
        declined = "; ".join(f"{p}: {why}" for p, why in record.declined.items())
        print(f"{record.node:8} {record.op_type:8} -> {record.provider:28} {declined}")
    print(partition.counts())
    # --8<-- [end:run]
    assert np.allclose(y.sum(axis=-1), 1.0, atol=1e-6)
    return partition.counts()


if __name__ == "__main__":
    main()
