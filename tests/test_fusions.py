"""Extended-level fusions: each pattern is fused, each counter-pattern is not,
and outputs are the same with optimizations on and off.

Here: Conv and BatchNormalization with an activation, Conv + Add, the
providers' passes, whole models. The concatenation chains are in
test_fusions_concat.py, the transformer patterns in
test_fusions_transformer.py, the channel shuffle and Conv + MaxPool in
test_fusions_layout.py; their helpers in fusion_helpers.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import ortcore
from ortcore.optimizer import _run_provider_passes

from .fusion_helpers import LEVELS, L, _check, _init, _model, _run, _x

# -- Conv + activation -------------------------------------------------------

ACTS = [
    ("Relu", {}, []),
    ("LeakyRelu", {"alpha": 0.1}, []),
    ("Sigmoid", {}, []),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []),
    ("Tanh", {}, []),
    ("Clip", {}, ["lo", "hi"]),
]


def _act_node(op: str, attrs: dict[str, Any], extra: list[str], src: str) -> onnx.NodeProto:
    return helper.make_node(op, [src, *extra], ["y"], **attrs)


@pytest.mark.parametrize(("op", "attrs", "extra"), ACTS, ids=[a[0] for a in ACTS])
def test_conv_activation(cpu: str, tmp_path: Path, op: str, attrs: Any, extra: Any) -> None:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             _act_node(op, attrs, extra, "c")]  # fmt: skip
    inits = [_init("w", _x(4, 3, 3, 3)), _init("b", _x(4)), _init("lo", -0.5), _init("hi", 0.5)]
    ops = _check(_model(nodes, {"x": [1, 3, 6, 6]}, ["y"], inits), {"x": _x(1, 3, 6, 6)}, tmp_path)
    assert ops == ["com.ortcore:FusedConv"]


def test_conv_activation_not_fused_when_conv_output_is_read(cpu: str, tmp_path: Path) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, {"x": [1, 3, 5, 5]}, ["y", "c"], [_init("w", _x(2, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 5, 5)}, tmp_path)
    assert ops == ["Conv", "Relu"]


# -- BatchNormalization + activation: FusedBatchNorm --------------------------


def _bn_inits(c: int) -> list[onnx.TensorProto]:
    return [_init("s", _x(c)), _init("bb", _x(c)), _init("m", _x(c)),
            _init("v", np.abs(_x(c)) + 0.5), _init("lo", -0.5), _init("hi", 0.5)]  # fmt: skip


@pytest.mark.parametrize(("op", "attrs", "extra"), ACTS, ids=[a[0] for a in ACTS])
def test_batchnorm_activation(cpu: str, tmp_path: Path, op: str, attrs: Any, extra: Any) -> None:
    """A pre-activation block's BatchNormalization -> activation (DenseNet's)
    becomes one FusedBatchNorm."""
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"],
                              epsilon=1e-3),
             _act_node(op, attrs, extra, "n")]  # fmt: skip
    x = _x(2, 3, 5, 5)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    ops = _check(_model(nodes, {"x": [2, 3, 5, 5]}, ["y"], _bn_inits(3)), {"x": x}, tmp_path)
    assert ops == ["com.ortcore:FusedBatchNorm"]


def test_batchnorm_activation_left_alone(cpu: str, tmp_path: Path) -> None:
    """Not fused: a BatchNormalization whose output is read elsewhere too, one
    in training mode, and one after a Conv (folded into the Conv instead,
    the Relu then fused with the Conv)."""
    bn = helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"])
    read = _model([bn, helper.make_node("Relu", ["n"], ["y"])], {"x": [1, 3, 4, 4]}, ["y", "n"],
                  _bn_inits(3))  # fmt: skip
    assert _check(read, {"x": _x(1, 3, 4, 4)}, tmp_path) == ["BatchNormalization", "Relu"]
    train = helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n", "rm", "rv"],
                             training_mode=1)  # fmt: skip
    model = _model([train, helper.make_node("Relu", ["n"], ["y"])], {"x": [2, 3, 4, 4]}, ["y"],
                   _bn_inits(3))  # fmt: skip
    assert "com.ortcore:FusedBatchNorm" not in _check(model, {"x": _x(2, 3, 4, 4)}, tmp_path)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]  # fmt: skip
    model = _model(nodes, {"x": [1, 3, 5, 5]}, ["y"], [_init("w", _x(3, 3, 3, 3)), *_bn_inits(3)])
    assert _check(model, {"x": _x(1, 3, 5, 5)}, tmp_path) == ["com.ortcore:FusedConv"]


def test_fusion_needs_one_provider_for_the_pattern(cpu: str, tmp_path: Path) -> None:
    # Mini (listed first) has Relu but no Conv: the Relu goes to Mini, so the
    # pair is not one provider's pattern and stays as it is.
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, {"x": [1, 3, 5, 5]}, ["y"], [_init("w", _x(2, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 5, 5)}, tmp_path, providers=["mini", cpu])
    assert ops == ["Conv", "Relu"]


# -- Conv + Add (+ activation): FusedConvAdd ---------------------------------


@pytest.mark.parametrize(
    ("op", "attrs", "extra"), [*ACTS, ("", {}, [])], ids=[*(a[0] for a in ACTS), "none"]
)
@pytest.mark.parametrize("add", ["Add", "Add-swapped", "Sum"])
def test_conv_add_activation(
    cpu: str, tmp_path: Path, op: str, attrs: Any, extra: Any, add: str
) -> None:
    # the residual is another branch's output, as in ResNet's shortcut
    ins = ["z", "c"] if add == "Add-swapped" else ["c", "z"]
    nodes = [
        helper.make_node("Conv", ["x", "w2"], ["z"], strides=[2, 2]),
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node(add.split("-")[0], ins, ["s" if op else "y"]),
    ]
    if op:
        nodes.append(_act_node(op, attrs, extra, "s"))
    inits = [_init("w", _x(4, 3, 3, 3)), _init("b", _x(4)), _init("w2", _x(4, 3, 1, 1)),
             _init("lo", -0.5), _init("hi", 0.5)]  # fmt: skip
    ops = _check(_model(nodes, {"x": [2, 3, 7, 7]}, ["y"], inits), {"x": _x(2, 3, 7, 7)}, tmp_path)
    assert ops == ["Conv", "com.ortcore:FusedConvAdd"]


def test_conv_add_without_bias_and_a_graph_input_residual(cpu: str, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "z"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = _model(
        nodes, {"x": [1, 4, 5, 5], "z": [1, 6, 5, 5]}, ["y"], [_init("w", _x(6, 2, 3, 3))]
    )
    ops = _check(model, {"x": _x(1, 4, 5, 5), "z": _x(1, 6, 5, 5)}, tmp_path)
    assert ops == ["com.ortcore:FusedConvAdd"]


@pytest.mark.parametrize(
    "case", ["broadcast", "conv-read-twice", "sum-of-three", "dynamic-shape", "residual-is-conv"]
)
def test_conv_add_not_fused(cpu: str, tmp_path: Path, case: str) -> None:
    z_shape = [1, 2, 1, 1] if case == "broadcast" else [1, 2, 3, 3]
    x_shape: list[Any] = ["N", 3, 5, 5] if case == "dynamic-shape" else [1, 3, 5, 5]
    add_inputs = ["c", "z", "z"] if case == "sum-of-three" else ["c", "z"]
    if case == "residual-is-conv":
        add_inputs = ["c", "c"]
    add = "Sum" if case == "sum-of-three" else "Add"
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node(add, add_inputs, ["y"])]
    outputs = ["y", "c"] if case == "conv-read-twice" else ["y"]
    model = _model(nodes, {"x": x_shape, "z": z_shape}, outputs, [_init("w", _x(2, 3, 3, 3))])
    ops = _check(model, {"x": _x(1, 3, 5, 5), "z": _x(*z_shape)}, tmp_path)
    assert "com.ortcore:FusedConvAdd" not in ops


def test_fused_conv_add_kernel_float16_and_float64() -> None:
    from ep_sdk.fused_ops import register_fused_schemas

    register_fused_schemas()
    for dtype, elem in ((np.float16, TensorProto.FLOAT16), (np.float64, TensorProto.DOUBLE)):
        x, w = _x(1, 3, 6, 6).astype(dtype), _x(4, 3, 3, 3).astype(dtype)
        z, b = _x(1, 4, 4, 4).astype(dtype), _x(4).astype(dtype)
        node = helper.make_node(
            "FusedConvAdd", ["x", "w", "z", "b"], ["y"], domain="com.ortcore", activation="Relu"
        )
        graph = helper.make_graph(
            [node], "g",
            [helper.make_tensor_value_info(n, elem, a.shape) for n, a in
             (("x", x), ("w", w), ("z", z), ("b", b))],
            [helper.make_tensor_value_info("y", elem, None)],
        )  # fmt: skip
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.ortcore", 1)],
        )
        sess = ortcore.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        (y,) = sess.run(None, {"x": x, "w": w, "z": z, "b": b})
        ref = onnx.reference.ReferenceEvaluator(
            helper.make_model(
                helper.make_graph(
                    [
                        helper.make_node("Conv", ["x", "w", "b"], ["c"]),
                        helper.make_node("Add", ["c", "z"], ["s"]),
                        helper.make_node("Relu", ["s"], ["y"]),
                    ],
                    "r",
                    graph.input,
                    graph.output,
                ),
                opset_imports=[helper.make_opsetid("", 17)],
            )
        )
        (want,) = ref.run(None, {"x": x, "w": w, "z": z, "b": b})  # test oracle
        assert y.dtype == dtype
        tol = 1e-2 if dtype == np.float16 else 1e-9
        np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


# -- provider passes ---------------------------------------------------------


def test_provider_passes_run_in_order() -> None:
    seen: list[str] = []

    class Stub:
        def __init__(self, name: str) -> None:
            self.name = name

        def graph_passes(self) -> list[Any]:
            return [lambda model: seen.append(self.name)]

    model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=8)
    _run_provider_passes(model, [Stub("a"), Stub("b")])  # type: ignore[list-item]
    assert seen == ["a", "b"]


# -- whole models at every level ---------------------------------------------

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _logits(model: onnx.ModelProto) -> bytes:
    """``model`` with its final Softmax's input as the output: light_squeezenet's
    logits are about 9.5e9 and tied to a few ulps, so its softmax is decided by
    rounding (onnxruntime gives 0.001 everywhere, the onnx reference 1.0 at
    one class); the logits themselves agree to 1e-6 and are what is compared."""
    last = model.graph.node[-1]
    if last.op_type == "Softmax":
        del model.graph.node[-1]
        del model.graph.output[:]
        model.graph.output.append(onnx.helper.make_tensor_value_info(last.input[0], 1, None))
    return model.SerializeToString()


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(LIGHT.glob("light_*.onnx")), ids=lambda p: p.stem)
def test_light_model_same_at_every_level(cpu: str, path: Path, tmp_path: Path) -> None:
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    feeds = {inp.name: _x(*shape)}
    data = _logits(model)
    want, _ = _run(data, feeds, L.ORT_DISABLE_ALL, tmp_path)
    for level in LEVELS[1:]:
        got, _ = _run(data, feeds, level, tmp_path)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4, err_msg=str(level))


def test_fused_batchnorm_profiles_under_its_model_node() -> None:
    """A profile names a FusedBatchNorm's event after the BatchNormalization
    it replaced, with that op type, as for FusedConv."""
    from ortcore.profiling import model_node

    assert model_node("node", "FusedBatchNorm", "bn3_fused") == ("bn3", "BatchNormalization")
    assert model_node("node", "FusedConv", "c_fused") == ("c", "Conv")
    assert model_node("node", "FusedConvConcat", "c_fused") == ("c", "Conv")
    assert model_node("node", "FusedConvShuffle", "c_fused") == ("c", "Conv")
