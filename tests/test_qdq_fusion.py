"""QDQ fusion of Conv, MatMul and Gemm: each pattern fuses into the
quantized op, matches the unfused float path within one quantization unit
and onnxruntime; each counter-pattern stays as it is, and still computes
the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto

from .qdq_models import I8, U8, Builder, ContribProvider, calibrated, check, qparams, rng_input
from .qdq_provider import without

ELEM = {U8: TensorProto.UINT8, I8: TensorProto.INT8}
RNG = np.random.default_rng(3)


def _x_params(dtype: Any) -> tuple[float, int]:
    return qparams(-3.0, 3.0, dtype)


def _conv_model(
    dtype: Any, wtype: Any, per_channel: bool, bias: bool, group: int, y: Any, *,
    act: str = "", expose: bool = False,
) -> bytes:  # fmt: skip
    c, m = 4, 4
    b = Builder()
    s, z = _x_params(dtype)
    x = b.input("x", [1, c, 6, 6], s, z, dtype)
    w = RNG.standard_normal((m, c // group, 3, 3)).astype(np.float32) * 0.3
    wd = b.weight("w", w, wtype, 0 if per_channel else None)
    ins = [x, wd]
    if bias:
        scale = np.float32(s) * _scales(b)  # x_scale * w_scale, as the quantizer writes it
        ins.append(b.bias("b", RNG.standard_normal(m).astype(np.float32), scale))
    out = b.node("Conv", ins, "c", pads=[1, 1, 1, 1], group=group)
    if act:
        out = b.node(act, [out], "a") if act == "Relu" else _clip(b, out)
    if y is None:
        return b.model([(out, TensorProto.FLOAT)])
    b.q(out, *y, dtype, "y")
    outputs = [("y", ELEM[dtype])] + ([(out, TensorProto.FLOAT)] if expose else [])
    return b.model(outputs)


def _scales(b: Builder) -> np.ndarray:
    return next(np.frombuffer(i.raw_data, np.float32) for i in b.inits if i.name == "w_dq_s")


def _clip(b: Builder, src: str) -> str:
    b.const("lo", 0.0)
    b.const("hi", 6.0)
    return b.node("Clip", [src, "lo", "hi"], "a")


CONV_CASES = [
    (dtype, wtype, pc, bias, group)
    for dtype, wtype in ((U8, I8), (I8, I8), (U8, U8))
    for pc in (False, True)
    for bias in (False, True)
    for group in (1, 4)  # dense, depthwise
] + [(U8, I8, True, False, 2), (I8, I8, False, True, 2)]  # grouped


@pytest.mark.parametrize(("dtype", "wtype", "per_channel", "bias", "group"), CONV_CASES)
def test_conv_becomes_qlinear_conv(
    cpu: str, tmp_path: Path, dtype: Any, wtype: Any, per_channel: bool, bias: bool, group: int
) -> None:
    feeds = {"x": rng_input(1, 4, 6, 6)}
    model = calibrated(
        lambda y: _conv_model(dtype, wtype, per_channel, bias, group, y), feeds, tmp_path, dtype
    )
    assert check(model, feeds, tmp_path) == ["QuantizeLinear", "QLinearConv"]


@pytest.mark.parametrize("act", ["Relu", "Clip"])
@pytest.mark.parametrize("dtype", [U8, I8])
def test_activation_before_q_folds_when_q_saturates(
    cpu: str, tmp_path: Path, act: str, dtype: Any
) -> None:
    feeds = {"x": rng_input(1, 4, 6, 6)}
    lo = np.iinfo(dtype).min
    # Relu's zero is the type's minimum; Clip's 0..6 covers the output range
    y = (6.0 / 255, lo) if act == "Clip" else (0.01, lo)
    model = _conv_model(dtype, I8, True, True, 1, y, act=act)
    assert check(model, feeds, tmp_path) == ["QuantizeLinear", "QLinearConv"]


def test_relu_stays_when_it_clips_inside_the_range(cpu: str, tmp_path: Path) -> None:
    feeds = {"x": rng_input(1, 4, 6, 6)}
    model = _conv_model(U8, I8, True, False, 1, (0.02, 128), act="Relu")
    ops = check(model, feeds, tmp_path)
    assert "QLinearConv" not in ops  # the Relu clamps at 128: it stays (in FusedConv)


def test_conv_output_read_elsewhere_is_not_fused(cpu: str, tmp_path: Path) -> None:
    feeds = {"x": rng_input(1, 4, 6, 6)}
    model = _conv_model(U8, I8, True, True, 1, (0.05, 128), expose=True)
    ops = check(model, feeds, tmp_path)
    assert "Conv" in ops and "QLinearConv" not in ops


def test_relu_output_in_between_is_a_graph_output(cpu: str, tmp_path: Path) -> None:
    feeds = {"x": rng_input(1, 4, 6, 6)}
    model = _conv_model(U8, I8, False, False, 1, (0.02, 0), act="Relu", expose=True)
    ops = check(model, feeds, tmp_path)
    assert "QLinearConv" not in ops


def _matmul_model(dtype: Any, per_column: bool, y: Any, scale_input: bool = False) -> bytes:
    b = Builder()
    s, z = _x_params(dtype)
    a = b.input("a", [2, 3, 8], s, z, dtype)
    w = RNG.standard_normal((8, 5)).astype(np.float32)
    wd = b.weight("w", w, I8, 1 if per_column else None)
    out = b.node("MatMul", [a, wd], "m")
    if y is None:
        return b.model([(out, TensorProto.FLOAT)])
    b.q(out, *y, dtype, "y")
    if scale_input:  # the output scale fed at run time: not a constant
        b.inits = [i for i in b.inits if i.name != "y_s"]
        b.inputs.append(_float_input("y_s", []))
    return b.model([("y", ELEM[dtype])])


def _float_input(name: str, shape: list[int]) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_becomes_qlinear_matmul(
    cpu: str, tmp_path: Path, dtype: Any, per_column: bool
) -> None:
    feeds = {"a": rng_input(2, 3, 8)}
    model = calibrated(lambda y: _matmul_model(dtype, per_column, y), feeds, tmp_path, dtype)
    assert check(model, feeds, tmp_path) == ["QuantizeLinear", "QLinearMatMul"]


def test_scale_fed_at_run_time_is_not_fused(cpu: str, tmp_path: Path) -> None:
    feeds = {"a": rng_input(2, 3, 8), "y_s": np.array(0.05, np.float32)}
    ops = check(_matmul_model(U8, True, (0.05, 128), scale_input=True), feeds, tmp_path)
    # the Q whose scale is fed stays a Q; the MatMul before it may still become
    # MatMulIntegerToFloat (a float result) where the provider has that kernel
    assert "QLinearMatMul" not in ops and ops[-1] == "QuantizeLinear"
    assert "MatMul" in ops or "com.microsoft:MatMulIntegerToFloat" in ops


def test_overridable_zero_point_is_not_fused(cpu: str, tmp_path: Path) -> None:
    # an initializer also listed as a graph input: a feed may replace it
    feeds = {"a": rng_input(2, 3, 8)}
    b = Builder()
    model = calibrated(lambda y: _matmul_model(U8, False, y), feeds, tmp_path, U8)
    import onnx

    proto = onnx.load_from_string(model)
    proto.graph.input.append(onnx.helper.make_tensor_value_info("y_z", TensorProto.UINT8, []))
    del b
    ops = check(proto.SerializeToString(), feeds, tmp_path)
    assert "QLinearMatMul" not in ops


def test_provider_without_the_kernel_keeps_the_group(cpu: str, tmp_path: Path) -> None:
    feeds = {"x": rng_input(1, 4, 6, 6)}
    model = calibrated(lambda y: _conv_model(U8, I8, True, True, 1, y), feeds, tmp_path, U8)
    ops = check(model, feeds, tmp_path, provider=without("QLinearConv"))
    assert ops == ["QuantizeLinear", "DequantizeLinear", "Conv", "QuantizeLinear"]


def _gemm_model(trans_b: bool, bias: bool, y: Any, quantized_out: bool) -> bytes:
    b = Builder()
    s, z = _x_params(U8)
    a = b.input("a", [3, 8], s, z, U8)
    w = RNG.standard_normal((5, 8) if trans_b else (8, 5)).astype(np.float32)
    wd = b.weight("w", w, I8, 0 if trans_b else 1)
    ins = [a, wd]
    if bias:
        ins.append(
            b.bias("c", RNG.standard_normal(5).astype(np.float32), np.float32(s) * _scales(b))
        )
    out = b.node("Gemm", ins, "g", transB=int(trans_b))
    if y is None or not quantized_out:
        return b.model([(out, TensorProto.FLOAT)])
    b.q(out, *y, U8, "y")
    return b.model([("y", ELEM[U8])])


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("quantized_out", [True, False], ids=["q-out", "float-out"])
def test_gemm_becomes_qgemm(
    cpu: str, tmp_path: Path, trans_b: bool, bias: bool, quantized_out: bool
) -> None:
    feeds = {"a": rng_input(3, 8)}
    model = calibrated(lambda y: _gemm_model(trans_b, bias, y, quantized_out), feeds, tmp_path, U8)
    ops = check(model, feeds, tmp_path, provider=ContribProvider)
    assert ops == ["QuantizeLinear", "com.microsoft:QGemm"]
    # the CPU provider without a QGemm kernel keeps it (with its own, fused)
    plain = check(model, feeds, tmp_path, provider=without("QGemm"))
    assert "com.microsoft:QGemm" not in plain and "Gemm" in plain


def test_matmul_with_a_float_result_becomes_matmul_integer_to_float(
    cpu: str, tmp_path: Path
) -> None:
    feeds = {"a": rng_input(2, 3, 8)}
    b = Builder()
    s, z = _x_params(U8)
    a = b.input("a", [2, 3, 8], s, z, U8)
    wd = b.weight("w", RNG.standard_normal((8, 5)).astype(np.float32), I8, 1)
    m = b.node("MatMul", [a, wd], "m")
    b.const("bias", RNG.standard_normal(5))
    b.node("Add", [m, "bias"], "y")
    ops = check(b.model([("y", TensorProto.FLOAT)]), feeds, tmp_path, provider=ContribProvider)
    assert ops == ["QuantizeLinear", "com.microsoft:MatMulIntegerToFloat"]
