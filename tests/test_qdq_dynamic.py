"""Dynamic quantization's MatMulInteger chains fuse into
DynamicQuantizeMatMul (or MatMulIntegerToFloat where the
DynamicQuantizeLinear is shared or the provider lacks the former), and a
CNN quantized by onnxruntime's quantize_static in QDQ form runs on integer
ops end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .qdq_models import Builder, ContribProvider, L, check, rng_input, run, within_one_unit
from .qdq_provider import without

RNG = np.random.default_rng(5)


def _dynamic_matmuls(count: int, per_column: bool, bias: bool) -> bytes:
    """What onnxruntime's quantize_dynamic writes for ``count`` MatMuls of
    one input (one DynamicQuantizeLinear for all)."""
    b = Builder()
    b.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8]))
    b.nodes.append(helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]))
    outs = []
    for i in range(count):
        w = RNG.standard_normal((8, 5)).astype(np.float32)
        s = (np.abs(w).max(axis=0 if per_column else None) / 127).astype(np.float32)
        b.const(f"w{i}", np.rint(w / s), np.int8)
        b.const(f"ws{i}", s)
        b.const(f"wz{i}", np.zeros(s.shape, np.int8), np.int8)
        b.node("Mul", ["xs", f"ws{i}"], f"scale{i}")
        b.nodes.append(
            helper.make_node("MatMulInteger", ["xq", f"w{i}", "xz", f"wz{i}"], [f"mi{i}"])
        )
        b.node("Cast", [f"mi{i}"], f"mc{i}", to=TensorProto.FLOAT)
        out = b.node("Mul", [f"mc{i}", f"scale{i}"], f"m{i}")
        if bias:
            b.const(f"bias{i}", RNG.standard_normal(5))
            out = b.node("Add", [out, f"bias{i}"], f"y{i}")
        outs.append((out, TensorProto.FLOAT))
    return b.model(outs)


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_chain_becomes_dynamic_quantize_matmul(
    cpu: str, tmp_path: Path, per_column: bool, bias: bool
) -> None:
    feeds = {"x": rng_input(2, 3, 8)}
    model = _dynamic_matmuls(1, per_column, bias)
    assert check(model, feeds, tmp_path, ContribProvider) == ["com.microsoft:DynamicQuantizeMatMul"]
    lacking = check(model, feeds, tmp_path, without("DynamicQuantizeMatMul"))
    assert lacking == ["DynamicQuantizeLinear", "com.microsoft:MatMulIntegerToFloat"]


def test_shared_dynamic_quantize_linear_feeds_matmul_integer_to_float(
    cpu: str, tmp_path: Path
) -> None:
    feeds = {"x": rng_input(2, 3, 8)}
    ops = check(_dynamic_matmuls(3, True, True), feeds, tmp_path, ContribProvider)
    assert ops == ["DynamicQuantizeLinear"] + ["com.microsoft:MatMulIntegerToFloat"] * 3


def test_chain_left_alone_without_either_kernel(cpu: str, tmp_path: Path) -> None:
    feeds = {"x": rng_input(2, 3, 8)}
    provider = without("DynamicQuantizeMatMul", "MatMulIntegerToFloat")
    ops = check(_dynamic_matmuls(1, False, True), feeds, tmp_path, provider)
    assert "MatMulInteger" in ops and not any(o.startswith("com.microsoft") for o in ops)


def _float_matmul(tmp: Path) -> Path:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(RNG.standard_normal((16, 8)).astype(np.float32), "w"),
         numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "b")],
    )  # fmt: skip
    path = tmp / "mm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("per_channel", [False, True])
def test_onnxruntime_quantize_dynamic_output_fuses(
    cpu: str, tmp_path: Path, per_channel: bool
) -> None:
    quantization = pytest.importorskip("onnxruntime.quantization")
    out = tmp_path / "mm_dyn.onnx"
    quantization.quantize_dynamic(_float_matmul(tmp_path), out, per_channel=per_channel)
    feeds = {"x": rng_input(2, 3, 16)}
    ops = check(out.read_bytes(), feeds, tmp_path, ContribProvider)
    assert ops == ["com.microsoft:DynamicQuantizeMatMul"]


def _small_cnn(tmp: Path) -> Path:
    """Conv-Relu, depthwise Conv-Relu, residual Add, MaxPool,
    GlobalAveragePool, Flatten, Gemm."""

    def init(name: str, *shape: int, k: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((RNG.standard_normal(shape) * k).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Add", ["r1", "r2"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [init("w1", 8, 3, 3, 3), init("b1", 8, k=0.1), init("w2", 8, 1, 3, 3),
         init("b2", 8, k=0.1), init("wf", 10, 8), init("bf", 10, k=0.1)],
    )  # fmt: skip
    path = tmp / "cnn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("activation", ["QUInt8", "QInt8"])
def test_quantize_static_cnn_runs_on_integer_ops(cpu: str, tmp_path: Path, activation: str) -> None:
    quantization = pytest.importorskip("onnxruntime.quantization")
    ort = pytest.importorskip("onnxruntime")
    data = [{"x": rng_input(1, 3, 16, 16, seed=i)} for i in range(8)]

    class Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it = iter(data)

        def get_next(self) -> Any:
            return next(self.it, None)

    out = tmp_path / "cnn_qdq.onnx"
    quantization.quantize_static(
        _small_cnn(tmp_path), out, Reader(), quant_format=quantization.QuantFormat.QDQ,
        per_channel=True, activation_type=getattr(quantization.QuantType, activation),
        weight_type=quantization.QuantType.QInt8,
    )  # fmt: skip
    model = out.read_bytes()
    feeds = {"x": rng_input(1, 3, 16, 16, seed=99)}
    got, ops = run(model, feeds, tmp_path, L.ORT_ENABLE_ALL, ContribProvider)
    # what stays float: quantizing the input and dequantizing the logits
    floats = [o for o in ops if not o.startswith("com.microsoft") and not o.startswith("QLinear")]
    assert floats == ["QuantizeLinear", "MaxPool", "Flatten", "DequantizeLinear"]
    assert ops.count("QLinearConv") == 2
    assert {"com.microsoft:QLinearAdd", "com.microsoft:QLinearGlobalAveragePool",
            "com.microsoft:QGemm"} <= set(ops)  # fmt: skip
    # MaxPool and Flatten run on the 8-bit tensors (their DQ/Q pairs dropped)
    want, unfused_ops = run(model, feeds, tmp_path, L.ORT_DISABLE_ALL)
    assert "Conv" in unfused_ops
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    y_scale = _output_scale(out)
    for what, other in (("unfused", want[0]), ("onnxruntime", ref[0])):
        units = np.rint(np.asarray(got[0], np.float64) / y_scale)
        within_one_unit(units.astype(np.int64), np.rint(other / y_scale).astype(np.int64), what)


def _output_scale(path: Path) -> float:
    """The scale of the model's last DequantizeLinear (its output's)."""
    model = onnx.load(path)
    last = model.graph.node[-1]
    assert last.op_type == "DequantizeLinear"
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return float(inits[last.input[1]])
