"""A provider that fuses chains of elementwise ops into one generated function.

The kernel path (``tutorial_provider.py``) runs one kernel per node. This
provider takes the compile path instead: ``get_capability`` claims groups of
elementwise nodes (``ep_sdk.group_nodes`` keeps every group free of cycles),
and ``compile`` turns each group into the source of one Python function,
compiled once with ``compile()``, that the core calls in place of the nodes.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from onnx import TensorProto, helper

import ep_sdk
import ortcore

# --8<-- [start:provider]
# op type -> numpy expression over the node's inputs {0}, {1}
EXPRESSIONS = {
    "Add": "np.add({0}, {1})",
    "Sub": "np.subtract({0}, {1})",
    "Mul": "np.multiply({0}, {1})",
    "Div": "np.divide({0}, {1})",
    "Relu": "np.maximum({0}, 0)",
    "Neg": "np.negative({0})",
    "Abs": "np.abs({0})",
    "Exp": "np.exp({0})",
    "Tanh": "np.tanh({0})",
    "Sigmoid": "(1 / (1 + np.exp(-{0})))",
}


def fusable(node: Any) -> bool:
    """Float32 elementwise nodes without omitted inputs."""
    return (
        node.domain == ""
        and node.op_type in EXPRESSIONS
        and all(v is not None and v.dtype == ep_sdk.dtypes.DataType.FLOAT for v in node.inputs)
    )


class FusingExecutionProvider(ep_sdk.ExecutionProvider):
    """Fuses chains of float32 elementwise ops; declines everything else."""

    name = "FusingExecutionProvider"
    aliases = ("fusing",)
    version = "0.1.0"

    def get_capability(self, graph: ep_sdk.GraphContext) -> ep_sdk.Capability:
        claims = ep_sdk.group_nodes(graph, fusable, min_size=2)
        taken = {n for c in claims for n in c.nodes}
        declined = {
            n: "not a float32 elementwise op" if not fusable(n) else "nothing to fuse it with"
            for n in graph.nodes
            if n not in taken
        }
        return ep_sdk.Capability(claims=claims, declined=declined)

    def compile(self, group: ep_sdk.FusedGroup) -> ep_sdk.Compute:
        names = {v: f"v{i}" for i, v in enumerate(group.inputs)}
        lines = [f"def fused({', '.join(names.values())}):"]
        namespace: dict[str, Any] = {"np": np}
        for i, c in enumerate(group.constants):  # weights: baked in, not arguments
            names[c] = f"c{i}"
            namespace[f"c{i}"] = c.const_value.numpy()
        for node in group.nodes:  # topological order
            args = [names[v] for v in node.inputs]
            out = names[node.outputs[0]] = f"v{len(names)}"
            lines.append(f"    {out} = {EXPRESSIONS[node.op_type].format(*args)}")
        results = ", ".join(f"{names[v]}.astype(np.float32, copy=False)" for v in group.outputs)
        lines.append(f"    return ({results},)")
        source = "\n".join(lines)
        exec(compile(source, f"<{group.name}>", "exec"), namespace)
        fused = namespace["fused"]
        fused.source = source  # kept for the curious
        return fused  # type: ignore[no-any-return]


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    return [FusingExecutionProvider]


# --8<-- [end:provider]


def main() -> dict[str, int]:
    """Run x -> Mul -> Add -> Relu -> MatMul -> Tanh -> Neg with fusing first."""
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["a"], name="mul"),
        helper.make_node("Add", ["a", "x"], ["b"], name="add"),
        helper.make_node("Relu", ["b"], ["c"], name="relu"),
        helper.make_node("MatMul", ["c", "w"], ["d"], name="matmul"),
        helper.make_node("Tanh", ["d"], ["e"], name="tanh"),
        helper.make_node("Neg", ["e"], ["y"], name="neg"),
    ]
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3], np.eye(3).ravel().tolist())
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if "FusingExecutionProvider" not in ortcore.get_available_providers():
        ortcore.register_plugin(sys.modules[__name__], name="fused_provider_example")
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["fusing", "cpu"])
    x = np.array([[-2.0, 0.5, 1.0], [3.0, -0.1, 0.0]], np.float32)
    (y,) = sess.run(None, {"x": x})
    assert np.allclose(y, -np.tanh(np.maximum(x * x + x, 0)), atol=1e-6)
    for r in sess.get_partition().nodes:
        print(f"{r.node:7} {r.provider:25} {r.group}")
    return sess.get_partition().counts()


if __name__ == "__main__":
    print(main())
