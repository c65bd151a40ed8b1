"""Conv + BatchNormalization / Mul / Add folding (extended level)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import ortcore

from .conftest import fvi, make_model

Level = ortcore.GraphOptimizationLevel
RNG = np.random.default_rng(0)
C_IN, C_OUT = 3, 4


def _init(name: str, array: np.ndarray) -> object:
    return numpy_helper.from_array(array.astype(np.float32), name)


def _conv_then(ops: list[str], bias: bool = True, extra_use: bool = False) -> bytes:
    """x -> Conv -> ops... -> y, with constant per-channel parameters."""
    inits = [_init("w", RNG.standard_normal((C_OUT, C_IN, 3, 3)))]
    conv_in = ["x", "w"]
    if bias:
        inits.append(_init("b", RNG.standard_normal(C_OUT)))
        conv_in.append("b")
    nodes = [helper.make_node("Conv", conv_in, ["c0"], pads=[1, 1, 1, 1], name="conv")]
    prev = "c0"
    for i, op in enumerate(ops):
        out = f"c{i + 1}"
        if op == "BatchNormalization":
            for p, v in (
                ("scale", RNG.standard_normal(C_OUT)),
                ("bias", RNG.standard_normal(C_OUT)),
                ("mean", RNG.standard_normal(C_OUT)),
                ("var", RNG.uniform(0.5, 2.0, C_OUT)),
            ):
                inits.append(_init(f"{p}{i}", v))
            ins = [prev, f"scale{i}", f"bias{i}", f"mean{i}", f"var{i}"]
            nodes.append(helper.make_node(op, ins, [out], epsilon=1e-3, name=f"bn{i}"))
        else:
            inits.append(_init(f"k{i}", RNG.standard_normal((C_OUT, 1, 1))))
            nodes.append(helper.make_node(op, [prev, f"k{i}"], [out], name=f"{op}{i}"))
        prev = out
    nodes.append(helper.make_node("Relu", [prev], ["y"], name="relu"))
    outputs = [fvi("y", [1, C_OUT, 5, 5])]
    if extra_use:
        outputs.append(fvi("c0", [1, C_OUT, 5, 5]))
    return make_model(nodes, [fvi("x", [1, C_IN, 5, 5])], outputs, inits, opset=15)


def _run(model: bytes, level: Level, cpu: str) -> tuple[list[np.ndarray], list[str]]:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = level
    sess = ortcore.InferenceSession(model, so, providers=[cpu])
    x = RNG.standard_normal((1, C_IN, 5, 5)).astype(np.float32)
    ops = [r.op_type for r in sess.get_partition().nodes]
    return sess.run(None, {"x": x}), ops


X = np.random.default_rng(1).standard_normal((1, C_IN, 5, 5)).astype(np.float32)


@pytest.mark.parametrize(
    "ops,bias",
    [
        (["BatchNormalization"], True),
        (["BatchNormalization"], False),
        (["Mul", "Add"], True),
        (["BatchNormalization", "Mul", "Add"], False),
    ],
)
def test_affine_ops_fold_into_conv_with_equal_outputs(cpu: str, ops: list[str], bias: bool) -> None:
    model = _conv_then(ops, bias=bias)
    outs = {}
    for level in (Level.ORT_DISABLE_ALL, Level.ORT_ENABLE_EXTENDED):
        so = ortcore.SessionOptions()
        so.graph_optimization_level = level
        sess = ortcore.InferenceSession(model, so, providers=[cpu])
        outs[level] = (sess.run(None, {"x": X})[0], [r.op_type for r in sess.get_partition().nodes])
    (plain, plain_ops), (fused, fused_ops) = (
        outs[Level.ORT_DISABLE_ALL],
        outs[Level.ORT_ENABLE_EXTENDED],
    )
    assert plain_ops == ["Conv", *ops, "Relu"]
    assert fused_ops == ["FusedConv"]  # the Relu then fuses too (conv_activation)
    np.testing.assert_allclose(fused, plain, rtol=1e-4, atol=1e-5)


def test_basic_level_does_not_fold(cpu: str) -> None:
    _, ops = _run(_conv_then(["BatchNormalization"]), Level.ORT_ENABLE_BASIC, cpu)
    assert "BatchNormalization" in ops


def test_conv_output_read_elsewhere_is_not_folded(cpu: str) -> None:
    """Counter-pattern: the Conv's own output is a graph output, so BN must stay
    (with the Relu after it fused into it: FusedBatchNorm)."""
    model = _conv_then(["BatchNormalization"], extra_use=True)
    so = ortcore.SessionOptions()
    sess = ortcore.InferenceSession(model, so, providers=[cpu])
    ops = [r.op_type for r in sess.get_partition().nodes]
    assert "Conv" in ops and ("BatchNormalization" in ops or "FusedBatchNorm" in ops), ops
    so0 = ortcore.SessionOptions()
    so0.graph_optimization_level = Level.ORT_DISABLE_ALL
    ref = ortcore.InferenceSession(model, so0, providers=[cpu])
    for a, b in zip(sess.run(None, {"x": X}), ref.run(None, {"x": X}), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_non_constant_scale_is_not_folded(cpu: str) -> None:
    """Counter-pattern: Mul by a graph input cannot be folded."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Mul", ["c", "s"], ["y"], name="mul"),
    ]
    model = make_model(
        nodes,
        [fvi("x", [1, C_IN, 3, 3]), fvi("s", [C_OUT, 1, 1])],
        [fvi("y", [1, C_OUT, 1, 1])],
        [_init("w", RNG.standard_normal((C_OUT, C_IN, 3, 3)))],
    )
    sess = ortcore.InferenceSession(model, providers=[cpu])
    assert [r.op_type for r in sess.get_partition().nodes] == ["Conv", "Mul"]
