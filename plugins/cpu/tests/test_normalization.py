"""Normalization kernels against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node

RNG = np.random.default_rng(3)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def bn_inputs(shape: tuple, dtype: type = np.float32) -> list[np.ndarray]:
    c = shape[1]
    var = (np.abs(rand(c)) + 0.5).astype(dtype)
    return [rand(*shape, dtype=dtype), rand(c, dtype=dtype), rand(c, dtype=dtype),
            rand(c, dtype=dtype), var]  # fmt: skip


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3), (1, 3, 4), (2, 3, 2, 2, 2), (0, 3, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_inference(opset: int, shape: tuple, dtype: type) -> None:
    # onnx.reference's BatchNormalization before opset 14 is wrong: use onnxruntime.
    oracle = "onnxruntime" if opset < 14 else "reference"
    check_node("BatchNormalization", bn_inputs(shape, dtype), {"epsilon": 1e-3}, opset=opset,
               rtol=1e-5, atol=1e-5, oracle=oracle)  # fmt: skip


def test_batch_norm_spatial0_opset7() -> None:
    x = rand(2, 3, 4)
    params = [rand(3, 4), rand(3, 4), rand(3, 4), np.abs(rand(3, 4)) + 0.5]
    mean, var = params[2], params[3]
    want = (x - mean) / np.sqrt(var + 1e-5) * params[0] + params[1]
    check_node("BatchNormalization", [x, *params], {"spatial": 0}, opset=7, expected=[want],
               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_batch_norm_training_opset15() -> None:
    check_node("BatchNormalization", bn_inputs((4, 3, 5, 5)), {"training_mode": 1}, opset=15,
               num_outputs=3, rtol=1e-4, atol=1e-5)  # fmt: skip


def test_batch_norm_training_outputs_opset9() -> None:
    inputs = bn_inputs((4, 3, 5, 5))
    y, mean, var, saved_mean, _saved_inv_std = run_node(
        "BatchNormalization", inputs, opset=9, num_outputs=5
    )
    x = inputs[0].astype(np.float64)
    bmean, bvar = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(saved_mean, bmean, rtol=1e-5)
    np.testing.assert_allclose(mean, inputs[3] * 0.9 + bmean * 0.1, rtol=1e-5)
    np.testing.assert_allclose(var, inputs[4] * 0.9 + bvar * 0.1, rtol=1e-5)
    assert y.dtype == np.float32 and y.shape == inputs[0].shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 7)])
def test_instance_norm(dtype: type, shape: tuple) -> None:
    check_node("InstanceNormalization", [rand(*shape, dtype=dtype), rand(3, dtype=dtype),
               rand(3, dtype=dtype)], opset=6, rtol=1e-4, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_layer_norm(axis: int, with_bias: bool, n_outputs: int) -> None:
    x = rand(2, 3, 4)
    norm_shape = x.shape[axis:] if axis >= 0 else x.shape[x.ndim + axis :]
    inputs = [x, rand(*norm_shape)]
    if with_bias:
        inputs.append(rand(*norm_shape))
    check_node("LayerNormalization", inputs, {"axis": axis}, opset=17, num_outputs=n_outputs,
               rtol=1e-4, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("size", [1, 3, 5])
@pytest.mark.parametrize("opset", [1, 13])
def test_lrn(size: int, opset: int) -> None:
    attrs = {"size": size, "alpha": 2e-4, "beta": 0.75, "bias": 1.5}
    # onnx.reference's LRN sums a shifted channel window: use onnxruntime.
    check_node("LRN", [rand(2, 7, 4, 4)], attrs, opset=opset, rtol=1e-5, atol=1e-6,
               oracle="onnxruntime")  # fmt: skip


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_softmax(op: str, opset: int, axis: int | None) -> None:
    if axis is not None and axis < 0 and opset < 11:
        pytest.skip("negative axis is opset 11+")
    attrs = {} if axis is None else {"axis": axis}
    # onnx.reference ignores the 2-D coercion of opset < 13: use onnxruntime.
    oracle = "onnxruntime" if opset < 13 else "reference"
    check_node(op, [rand(2, 3, 4)], attrs, opset=opset, rtol=1e-5, atol=1e-6, oracle=oracle)


def test_softmax_versions_differ() -> None:
    x = rand(2, 3, 4)
    old = run_node("Softmax", [x], {"axis": 1}, opset=11)[0]
    new = run_node("Softmax", [x], {"axis": 1}, opset=13)[0]
    np.testing.assert_allclose(old.reshape(2, -1).sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(new.sum(axis=1), 1, rtol=1e-5)


def test_softmax_empty() -> None:
    check_node("Softmax", [rand(0, 4)], opset=13)


def _bn_model(params_as: str) -> bytes:
    """One BatchNormalization whose parameters are initializers (``"const"``)
    or graph inputs (``"fed"``)."""
    from onnx import TensorProto, helper, numpy_helper

    names = ["scale", "bias", "mean", "var"]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])]
    inits = []
    if params_as == "fed":
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in names]
    else:
        values = bn_inputs((1, 3, 4, 4))[1:]
        inits = [numpy_helper.from_array(v, n) for v, n in zip(values, names, strict=True)]
    node = helper.make_node("BatchNormalization", ["x", *names], ["y"], epsilon=1e-3)
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    return model.SerializeToString()


def _bn_want(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
             var: np.ndarray) -> np.ndarray:  # fmt: skip
    c = (1, -1, 1, 1)
    return (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-3) * scale.reshape(c) + bias.reshape(
        c
    )


def test_batch_norm_keeps_the_affine_form_of_constant_parameters_only() -> None:
    """A node keeps the per-channel form of constant parameters between runs;
    fed parameters, even the same arrays written in place between runs, are
    taken anew at every run."""
    import onnx
    import ortcore

    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    blob = _bn_model("const")
    const = ortcore.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    model = onnx.load_from_string(blob)
    params = [onnx.numpy_helper.to_array(t) for t in model.graph.initializer]
    for _ in range(2):
        x = rand(1, 3, 4, 4)
        (y,) = const.run(None, {"x": x})
        np.testing.assert_allclose(y, _bn_want(x, *params), rtol=1e-5, atol=1e-5)

    fed = ortcore.InferenceSession(_bn_model("fed"), so, providers=["CPUExecutionProvider"])
    x = rand(1, 3, 4, 4)
    scale, bias, mean, var = bn_inputs((1, 3, 4, 4))[1:]
    feeds = {"x": x, "scale": scale, "bias": bias, "mean": mean, "var": var}
    for step in range(3):
        (y,) = fed.run(None, feeds)
        np.testing.assert_allclose(y, _bn_want(x, scale, bias, mean, var), rtol=1e-5, atol=1e-5)
        scale *= 2.0  # the same arrays, new values
        mean += float(step + 1)
