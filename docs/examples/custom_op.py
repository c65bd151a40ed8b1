"""A custom operator with a shape function and kernels for two providers."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper

import ep_sdk
import ortcore

# --8<-- [start:define]
clip_scale = ortcore.custom_op(
    domain="example.ops",
    name="ClipScale",
    inputs=["X: T"],
    outputs=["Y: T"],
    attributes={"alpha": 1.0, "limit": 6.0},
    types={"T": ["float", "double"]},
    doc="Y = min(X * alpha, limit)",
)


@clip_scale.shape_function
def clip_scale_shape(
    inputs: list[ortcore.TensorType], attrs: dict[str, Any]
) -> list[ortcore.TensorType]:
    (x,) = inputs
    return [ortcore.TensorType(x.dtype, x.shape)]  # same type and shape as X


@clip_scale.kernel("CPUExecutionProvider")
@clip_scale.kernel("TutorialExecutionProvider")
def clip_scale_kernel(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
    alpha, limit = info.attrs["alpha"], info.attrs["limit"]  # defaults applied

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        return (np.minimum(x * alpha, limit).astype(x.dtype, copy=False),)

    return compute


# --8<-- [end:define]


def make_model() -> bytes:
    # --8<-- [start:model]
    node = helper.make_node("ClipScale", ["x"], ["y"], domain="example.ops", alpha=3.0)
    graph = helper.make_graph(
        [node],
        "uses_clip_scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.ops", 1)]
    # --8<-- [end:model]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def main() -> np.ndarray:
    # --8<-- [start:session]
    so = ortcore.SessionOptions()
    so.register_custom_ops(clip_scale)
    sess = ortcore.InferenceSession(make_model(), so, providers=["cpu"])
    (y,) = sess.run(None, {"x": np.array([[1.0, 2.0], [-1.0, 3.0]], np.float32)})
    print(y)  # [[3. 6.] [-3. 6.]]
    # --8<-- [end:session]
    assert y.tolist() == [[3.0, 6.0], [-3.0, 6.0]]
    return y


if __name__ == "__main__":
    main()
