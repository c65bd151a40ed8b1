"""ai.onnx.preview.training optimizers against onnx.reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

DOMAIN = "ai.onnx.preview.training"
RNG = np.random.default_rng(3)


def run_both(op: str, n_groups: int, n_states: int, attrs: dict[str, Any], step: int) -> None:
    names = ["r", "t"] + [f"{k}{i}" for k in ["x", "g", "s", "h"][: 2 + n_states]
                          for i in range(n_groups)]  # fmt: skip
    outs = [f"o{k}{i}" for k in range(1 + n_states) for i in range(n_groups)]
    feeds: dict[str, np.ndarray] = {"r": np.array(0.1, np.float32), "t": np.array(step, np.int64)}
    inputs = [helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("t", TensorProto.INT64, [])]  # fmt: skip
    for name in names[2:]:
        feeds[name] = (RNG.random((2, 3)) + (0.1 if name[0] == "h" else -0.5)).astype(np.float32)
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]))
    node = helper.make_node(op, names, outs, domain=DOMAIN, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        inputs,
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 3]) for o in outs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(DOMAIN, 1)], ir_version=9)  # fmt: skip
    got = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert g.dtype == np.float32


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("step", [0, 3])
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(groups: int, step: int, mode: str) -> None:
    attrs = {"alpha": 0.9, "beta": 0.5, "mode": mode, "norm_coefficient": 0.01}
    run_both("Momentum", groups, 1, attrs, step)


@pytest.mark.parametrize("groups", [1, 2])
def test_adagrad(groups: int) -> None:
    run_both("Adagrad", groups, 1, {"decay_factor": 0.1, "epsilon": 1e-6,
                                    "norm_coefficient": 0.001}, 2)  # fmt: skip


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("step", [0, 4])
def test_adam(groups: int, step: int) -> None:
    attrs = {"alpha": 0.9, "beta": 0.99, "epsilon": 1e-6, "norm_coefficient": 0.001,
             "norm_coefficient_post": 0.01}  # fmt: skip
    run_both("Adam", groups, 2, attrs, step)


def test_model_is_valid() -> None:
    onnx.defs.get_schema("Adam", 1, DOMAIN)
