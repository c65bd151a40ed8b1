"""ortcore.quantization against onnxruntime's tool: structure, parameters, outputs, errors."""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import ortcore
import ortcore.quantization as cq

from . import models as M

BUILDERS = {
    "cnn": M.cnn,
    "transformer": M.transformer,
    "shared": M.shared_weights,
    "subgraph": M.with_subgraph,
}
STATIC = [
    (fmt, act, pc)
    for fmt in ("QDQ", "QOperator")
    for act in ("QUInt8", "QInt8")
    for pc in (False, True)
]


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """onnxruntime's tool logs its warnings on the root logger: quiet them for
    the test, and give the level back (later tests read warnings)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    yield
    root.setLevel(level)


def _counts(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter((n.domain, n.op_type) for n in model.graph.node)


def _inits(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}


def _quantize(
    lib,
    name: str,
    tmp: Path,
    kind: str,
    fmt: str = "QDQ",
    act: str = "QUInt8",
    pc: bool = False,
    **kw,
) -> Path:
    model = BUILDERS[name]()
    src = tmp / f"{name}.onnx"
    onnx.save(model, src)
    out = tmp / f"{name}_{kind}_{lib.__name__.split('.')[0]}.onnx"
    if kind == "dynamic":
        lib.quantize_dynamic(src, out, per_channel=pc, **kw)
    else:
        lib.quantize_static(
            src,
            out,
            M.ListReader(M.feeds(model, 4)),
            quant_format=getattr(lib.QuantFormat, fmt),
            activation_type=getattr(lib.QuantType, act),
            per_channel=pc,
            **kw,
        )
    return out


def _run_ortcore(path: Path, feed: dict) -> list[np.ndarray]:
    sess = ortcore.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def _float_out(name: str, feed: dict) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(BUILDERS[name]()).run(None, feed)[0]


def _assert_same_as_onnxruntime(ours: Path, theirs: Path) -> None:
    a, b = onnx.load(ours), onnx.load(theirs)
    assert _counts(a) == _counts(b)
    ia, ib = _inits(a), _inits(b)
    assert set(ia) == set(ib)
    for k in ib:
        assert ia[k].dtype == ib[k].dtype and ia[k].shape == ib[k].shape, k
        np.testing.assert_allclose(
            ia[k].astype(np.float64), ib[k].astype(np.float64), rtol=1e-6, atol=0, err_msg=k
        )


@pytest.mark.parametrize("name", ["cnn", "transformer", "shared", "subgraph"])
@pytest.mark.parametrize("pc", [False, True])
def test_dynamic_matches_onnxruntime_and_runs(
    name: str, pc: bool, tmp_path: Path, cpu: str
) -> None:
    ours = _quantize(cq, name, tmp_path, "dynamic", pc=pc)
    onnx.checker.check_model(onnx.load(ours), full_check=True)
    counts = _counts(onnx.load(ours))
    assert counts[("", "MatMulInteger")] + counts[("", "ConvInteger")] > 0
    feed = M.feeds(BUILDERS[name](), 1, seed=99)[0]
    expected = _float_out(name, feed)
    got = _run_ortcore(ours, feed)[0]
    assert np.abs(got - expected).max() <= 0.08 * (np.abs(expected).max() + 1e-3)
    ort = pytest.importorskip("onnxruntime")
    import onnxruntime.quantization as oq

    theirs = _quantize(oq, name, tmp_path, "dynamic", pc=pc)
    _assert_same_as_onnxruntime(ours, theirs)
    ref = ort.InferenceSession(str(ours), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt,act,pc", STATIC)
@pytest.mark.parametrize("name", ["cnn", "transformer", "shared"])
def test_static_matches_onnxruntime(
    name: str, fmt: str, act: str, pc: bool, tmp_path: Path
) -> None:
    ours = _quantize(cq, name, tmp_path, "static", fmt, act, pc)
    onnx.checker.check_model(onnx.load(ours), full_check=True)
    counts = _counts(onnx.load(ours))
    if fmt == "QDQ":
        assert counts[("", "QuantizeLinear")] > 0 and counts[("", "DequantizeLinear")] > 0
    else:
        assert (
            sum(v for (d, op), v in counts.items() if op.startswith("QLinear") or op == "QGemm") > 0
        )
    pytest.importorskip("onnxruntime")
    import onnxruntime.quantization as oq

    _assert_same_as_onnxruntime(ours, _quantize(oq, name, tmp_path, "static", fmt, act, pc))


@pytest.mark.parametrize("name", ["cnn", "transformer", "shared"])
@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
def test_static_qdq_runs_close_to_float(name: str, act: str, tmp_path: Path, cpu: str) -> None:
    ours = _quantize(cq, name, tmp_path, "static", "QDQ", act, True)
    feed = M.feeds(BUILDERS[name](), 1, seed=10)[0]  # one of the calibration feeds
    expected = _float_out(name, feed)
    got = _run_ortcore(ours, feed)[0]
    assert np.abs(got - expected).max() <= 0.1 * (np.abs(expected).max() + 1e-3)
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(ours), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_allclose(got, ref, atol=0.02 * (np.abs(expected).max() + 1e-3))


@pytest.mark.parametrize("name", ["cnn", "transformer", "shared"])
def test_static_qoperator_runs_in_onnxruntime(name: str, tmp_path: Path) -> None:
    ours = _quantize(cq, name, tmp_path, "static", "QOperator", "QUInt8", False)
    feed = M.feeds(BUILDERS[name](), 1, seed=10)[0]
    expected = _float_out(name, feed)
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(str(ours), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert np.abs(got - expected).max() <= 0.1 * (np.abs(expected).max() + 1e-3)


@pytest.mark.parametrize("name", ["cnn", "transformer", "shared"])
@pytest.mark.parametrize(("act", "per_channel"), [("QUInt8", False), ("QInt8", True)])
def test_static_qoperator_runs_in_ortcore(
    name: str, act: str, per_channel: bool, tmp_path: Path, cpu: str
) -> None:
    # QLinearConv/QLinearMatMul and the com.microsoft QLinear*/QGemm kernels of the CPU provider.
    ours = _quantize(cq, name, tmp_path, "static", "QOperator", act, per_channel)
    feed = M.feeds(BUILDERS[name](), 1, seed=10)[0]
    expected = _float_out(name, feed)
    got = _run_ortcore(ours, feed)[0]
    scale = np.abs(expected).max() + 1e-3
    err = np.abs(got - expected).max()
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(ours), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    # The same integer arithmetic as onnxruntime's kernels, up to a rounding step or two.
    np.testing.assert_allclose(got, ref, atol=0.02 * scale)
    # As close to float as onnxruntime's tool gets (int8 activations on 4 calibration feeds
    # can cost more than 10% on these small models).
    oq = pytest.importorskip("onnxruntime.quantization")
    theirs = _quantize(oq, name, tmp_path, "static", "QOperator", act, per_channel)
    their_err = np.abs(_run_ortcore(theirs, feed)[0] - expected).max()
    assert err <= max(0.1 * scale, 1.05 * their_err)


def test_quantize_with_configs_equals_direct_calls(tmp_path: Path) -> None:
    model = M.cnn()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    cq.quantize(
        src,
        tmp_path / "a.onnx",
        cq.StaticQuantConfig(M.ListReader(M.feeds(model, 3)), per_channel=True),
    )
    cq.quantize_static(src, tmp_path / "b.onnx", M.ListReader(M.feeds(model, 3)), per_channel=True)
    cq.quantize(src, tmp_path / "c.onnx", cq.DynamicQuantConfig(op_types_to_quantize=["Conv"]))
    cq.quantize_dynamic(
        model, tmp_path / "d.onnx", op_types_to_quantize=["Conv"]
    )  # ModelProto input
    a, b = onnx.load(tmp_path / "a.onnx"), onnx.load(tmp_path / "b.onnx")
    assert _counts(a) == _counts(b)
    for k, v in _inits(b).items():
        np.testing.assert_array_equal(_inits(a)[k], v)
    c, d = onnx.load(tmp_path / "c.onnx"), onnx.load(tmp_path / "d.onnx")
    assert (
        _counts(c) == _counts(d)
        and _counts(c)[("", "ConvInteger")] == 3
        and _counts(c)[("", "MatMulInteger")] == 0
    )
    with pytest.raises(TypeError, match="StaticQuantConfig or DynamicQuantConfig"):
        cq.quantize(src, tmp_path / "e.onnx", object())  # type: ignore[arg-type]


def test_nodes_to_exclude_and_extra_options(tmp_path: Path) -> None:
    model = M.cnn()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    cq.quantize_static(
        src,
        tmp_path / "x.onnx",
        M.ListReader(M.feeds(model, 3)),
        quant_format=cq.QuantFormat.QOperator,
        nodes_to_exclude=["conv2"],
    )
    counts = _counts(onnx.load(tmp_path / "x.onnx"))
    assert counts[("", "QLinearConv")] == 2 and counts[("", "Conv")] == 1
    cq.quantize_static(
        src,
        tmp_path / "y.onnx",
        M.ListReader(M.feeds(model, 3)),
        extra_options={"AddQDQPairToWeight": True, "ActivationSymmetric": True},
    )
    y = onnx.load(tmp_path / "y.onnx")
    assert {"w1", "w2"} <= set(_inits(y))  # float weights kept, a Q/DQ pair each
    for name, arr in _inits(y).items():
        if name.endswith("_zero_point") and arr.dtype == np.int8:
            assert not arr.any()  # symmetric activations and weights
    with pytest.warns(UserWarning, match="NoSuchOption"):
        cq.quantize_dynamic(src, tmp_path / "z.onnx", extra_options={"NoSuchOption": 1})


def test_via_install_as_onnxruntime(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = tmp_path / "m.onnx"
    onnx.save(M.transformer(), src)
    code = (
        "import ortcore; ortcore.install_as_onnxruntime()\n"
        "from onnxruntime.quantization import quantize_dynamic, QuantType\n"
        "import onnxruntime.quantization as q, ortcore.quantization as c\n"
        "assert q is c\n"
        f"quantize_dynamic({str(src)!r}, {str(tmp_path / 'q.onnx')!r}, "
        "weight_type=QuantType.QUInt8)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert _counts(onnx.load(tmp_path / "q.onnx"))[("", "MatMulInteger")] == 6


def test_errors_name_the_thing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere\.onnx"):
        cq.quantize_dynamic(tmp_path / "nowhere.onnx", tmp_path / "o.onnx")
    with pytest.raises(ValueError, match="QInt3"):
        cq.QuantType.from_string("QInt3")
    with pytest.raises(ValueError, match=r"weight_type.*QInt3"):
        cq.quantize_dynamic(M.cnn(), tmp_path / "o.onnx", weight_type="QInt3")  # type: ignore[arg-type]
    model = M.cnn()
    with pytest.raises(ValueError, match=r"unknown \['image'\].*missing \['x'\]"):
        cq.quantize_static(
            model,
            tmp_path / "o.onnx",
            M.ListReader([{"image": np.zeros((1, 3, 16, 16), np.float32)}]),
        )
    with pytest.raises(ValueError, match="no data"):
        cq.quantize_static(model, tmp_path / "o.onnx", M.ListReader([]))
    with pytest.raises(ValueError, match="QDQ supports 16-bit"):
        cq.quantize_static(
            model,
            tmp_path / "o.onnx",
            M.ListReader(M.feeds(model, 1)),
            quant_format=cq.QuantFormat.QOperator,
            activation_type=cq.QuantType.QUInt16,
        )
    with pytest.raises(NotImplementedError, match="SmoothQuant"):
        cq.quantize_static(
            model,
            tmp_path / "o.onnx",
            M.ListReader(M.feeds(model, 1)),
            extra_options={"SmoothQuant": True},
        )


def test_unnamed_value_error_names_the_node() -> None:
    from ortcore.quantization._base import io_names

    node = ir.node("Relu", [ir.Value(name=None)], name="act1")
    with pytest.raises(ValueError, match=r"node 'act1' \(Relu\): input 0 has no name"):
        io_names(node)
    named = ir.node("Add", [ir.Value(name="a"), None], name="add")
    named.outputs[0].name = "y"
    assert io_names(named) == (["a", ""], ["y"])


def test_calibration_data_names_in_both_modules() -> None:
    import ortcore.quantization.calibrate as cal

    for name in ("CalibrationDataReader", "CalibrationMethod", "TensorData", "TensorsData"):
        assert getattr(cal, name) is getattr(cq, name)
        assert name in cal.__all__ and name in cq.__all__
    data = cq.TensorsData(cq.CalibrationMethod.MinMax, {"t": (np.float32(-1), np.float32(2))})
    assert data["t"].range_value == (np.float32(-1), np.float32(2))
    with pytest.raises(ValueError, match="unexpected field 'median'"):
        cq.TensorData(median=np.float32(0))


def test_quant_pre_process(tmp_path: Path) -> None:
    from ortcore.quantization.shape_inference import quant_pre_process

    src = tmp_path / "m.onnx"
    onnx.save(M.transformer(), src)
    quant_pre_process(src, tmp_path / "p.onnx")
    p = onnx.load(tmp_path / "p.onnx")
    assert any(prop.key == "onnx.quant.pre_process" for prop in p.metadata_props)
    assert {vi.name for vi in p.graph.value_info} >= {"q", "k", "v", "p", "ln"}
    with pytest.raises(FileNotFoundError, match=r"missing\.onnx"):
        quant_pre_process(tmp_path / "missing.onnx", tmp_path / "o.onnx")
