"""The CPU provider's quantized com.microsoft kernels (kernels/quant_contrib):
every case of conformance's table (conformance.qcontrib) against its
decomposition into standard ONNX (onnx.reference) and against onnxruntime
where installed; MatMulNBits on weights packed by onnxruntime's own
quantizer; errors that name the node.

Tolerances: quantized outputs may differ from the oracle by one unit (a
rounding tie reached through another order of float32 operations); against
onnxruntime they must match exactly but for at most 2% of elements off by
one (measured: 0 differing elements on every case of the table, onnxruntime
1.32 on x86-64; the allowance covers its SIMD paths on other CPUs). Float
outputs: rtol 1e-4 / atol 1e-4 against the oracle (it multiplies dequantized
float32 values, the kernels sum exact integers), 1e-5 against onnxruntime
(MatMulNBits with accuracy_level 4: 2e-2 / 5e-2, onnxruntime quantizes A to
int8 there; ortcore computes in float32). onnxruntime 1.32 fails or aborts
on omitted zero points its schemas call optional: those cases are checked
against the oracle only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from conformance.precision import Tolerance
from conformance.qcontrib import build, specs
from conformance.qcontrib.matmul import pack_nbits
from conformance.qcontrib.spec import QSpec, Slot, feeds_of, node_model
from onnx import TensorProto, helper, numpy_helper

SPECS = list(specs())
IDS = [s.name for s in SPECS]
_PRODUCT_OPS = {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm", "QAttention"}


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], runtime: Any = ortcore) -> list:
    sess = runtime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _close(got: np.ndarray, want: np.ndarray, spec: QSpec, ort: bool = False) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    if spec.quantized:
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert diff.max(initial=0) <= 1, f"{spec.name}: off by {diff.max()}"
        if ort:
            assert (diff > 0).sum() <= max(1, 0.02 * diff.size), f"{spec.name}: {(diff > 0).sum()}"
    else:
        t = spec.tolerance or Tolerance(1e-4, 1e-6)
        # accuracy_level 4 lets onnxruntime quantize A to int8: its error, not ours
        exact_ort = ort and spec.attrs.get("accuracy_level", 0) != 4
        tol = (1e-5, 1e-5) if exact_ort else (t.rtol, t.atol)
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_against_decomposition(spec: QSpec) -> None:
    model, sets = build(spec)
    fed = [s.name for s in spec.slots if s.fed and s.value is not None]
    for ins, outs in sets:
        got = _run(model, dict(zip(fed, ins)))
        for g, w in zip(got, outs):
            _close(g, w, spec)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_against_onnxruntime(spec: QSpec) -> None:
    ort = pytest.importorskip("onnxruntime")
    if spec.detail.startswith("omitted_"):  # the zero points: optional in its
        # schemas, yet 1.32's kernels fail or abort without them
        pytest.skip("onnxruntime fails or aborts on an omitted zero point")
    model, _sets = build(spec)
    feeds = feeds_of(spec)
    try:
        want = _run(model, feeds, ort)
    except Exception as exc:
        if "NOT_IMPLEMENTED" in str(exc) or "Could not find an implementation" in str(exc):
            pytest.skip(f"onnxruntime has no kernel: {str(exc)[:120]}")
        raise
    got = _run(model, feeds)
    for g, w in zip(got, want):
        _close(g, np.asarray(w), spec, ort=True)


PRODUCTS = [s for s in SPECS if s.op in _PRODUCT_OPS]


@pytest.mark.parametrize("spec", PRODUCTS, ids=[s.name for s in PRODUCTS])
def test_packed_weights_equal_fed_ones(spec: QSpec) -> None:
    """Initializer weights are packed once and kept across runs; the same
    weights fed as inputs are packed per run: the results are identical,
    run after run, for every data set."""
    model, sets = build(spec)
    fed_spec = QSpec(
        spec.op,
        spec.dimension,
        spec.detail,
        [Slot(s.name, s.value, True) for s in spec.slots],
        spec.decompose,
        spec.attrs,
        spec.outputs,
    )
    fed_model = node_model(fed_spec, sets[0][1])
    kept = ortcore.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    each = ortcore.InferenceSession(
        fed_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [s.name for s in spec.slots if s.fed and s.value is not None]
    for _ in range(2):
        for ins, _outs in sets:
            feeds = dict(zip(names, ins))
            got = kept.run(None, feeds)
            want = each.run(None, feeds_of(fed_spec) | feeds)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g, w, err_msg=spec.name)


def _matmul_model(w: np.ndarray) -> onnx.ModelProto:
    node = helper.make_node("MatMul", ["A", "W"], ["Y"])
    graph = helper.make_graph(
        [node],
        "mm",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [None, w.shape[0]])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, w.shape[1]])],
        [numpy_helper.from_array(w, "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("k,block", [(64, 32), (80, 16), (128, 128)])
def test_matmul_nbits_from_onnxruntime_quantizer(k: int, block: int, symmetric: bool) -> None:
    """B, scales and zero points exactly as onnxruntime's MatMulNBitsQuantizer
    writes them: ortcore gives onnxruntime's result."""
    ort = pytest.importorskip("onnxruntime")
    quant = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
    rng = np.random.default_rng(k + block)
    w = rng.standard_normal((k, 24)).astype(np.float32)
    q = quant.MatMulNBitsQuantizer(_matmul_model(w), block_size=block, is_symmetric=symmetric)
    q.process()
    model = q.model.model
    assert [n.op_type for n in model.graph.node] == ["MatMulNBits"]
    a = rng.standard_normal((3, k)).astype(np.float32)
    want = _run(model, {"A": a}, ort)[0]
    got = _run(model, {"A": a})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # and 4-bit weights' error, relative to the float product, stays small
    assert np.linalg.norm(got - a @ w) < 0.2 * np.linalg.norm(a @ w)


@pytest.mark.parametrize(
    "bits,n,k,block,zeros",
    [(4, 100, 200, 32, "packed"), (2, 37, 64, 16, None), (8, 50, 130, 64, "float")],
)
def test_matmul_nbits_tiles(
    bits: int, n: int, k: int, block: int, zeros: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B dequantized a tile of rows at a time (tiles made small here, the
    last one short, K not a multiple of the block) gives ``(q - zero) *
    scale`` exactly and the product of the whole weight."""
    from ortcore_cpu.kernels.quant_contrib import nbits

    rng = np.random.default_rng(bits)
    kb = -(-k // block)
    q = rng.integers(0, 2**bits, (n, kb * block), dtype=np.uint8)
    b = pack_nbits(q, bits).reshape(n, kb, -1)
    scales = rng.random((n, kb)).astype(np.float32)
    zq = rng.integers(0, 2**bits, (n, kb), dtype=np.uint8)
    zp: np.ndarray | None = None
    if zeros == "packed":
        zp = pack_nbits(np.pad(zq, ((0, 0), (0, (-kb) % (8 // bits)))), bits)
    elif zeros == "float":
        zp = zq.astype(np.float32)
    zf = zq.astype(np.float32) if zeros else np.full((n, kb), 2 ** (bits - 1), np.float32)
    want = (q.reshape(n, kb, block).astype(np.float32) - zf[..., None]) * scales[..., None]
    want = want.reshape(n, -1)[:, :k].T
    kw: dict[str, Any] = {"n": n, "k": k, "bits": bits, "block_size": block}
    np.testing.assert_array_equal(nbits.dequantize_nbits(b, scales, zp, **kw), want)
    monkeypatch.setattr(nbits, "TILE_VALUES", 16 * k)
    monkeypatch.setattr(nbits, "WIDE_TILE_VALUES", 16 * k)
    weight = nbits.NBitsWeight(b, scales, zp, **kw)
    for shape in [(k,), (1, k), (3, 5, k)]:
        a = rng.standard_normal(shape).astype(np.float32)
        got = weight.matmul(a)
        assert got.shape == (*shape[:-1], n)
        np.testing.assert_allclose(got, a @ want, rtol=1e-5, atol=1e-5)


def test_pack_nbits_low_bits_first() -> None:
    assert pack_nbits(np.array([[1, 2, 15, 0]], np.uint8), 4).tolist() == [[0x21, 0x0F]]


def _spec(op: str) -> QSpec:
    return next(s for s in SPECS if s.op == op)


@pytest.mark.parametrize(
    "op,slot,value,message",
    [
        ("QLinearAdd", "as", np.ones(3, np.float32), "A_scale must be a scalar"),
        ("QLinearMul", "bz", np.zeros(2, np.uint8), "B_zero_point must be a scalar"),
        (
            "MatMulIntegerToFloat",
            "bs",
            np.ones(5, np.float32),
            "b_scale must be a scalar or 1-D of 6",
        ),
        ("QGemm", "az", np.zeros(4, np.uint8), "a_zero_point must be a scalar"),
        ("QLinearSigmoid", "xs", np.ones((1, 2), np.float32), "X_scale must be a scalar"),
        ("QAttention", "ws", np.ones(7, np.float32), "weight_scale must be a scalar or 1-D of 24"),
    ],
)
def test_bad_parameters_name_the_node(op: str, slot: str, value: np.ndarray, message: str) -> None:
    base = _spec(op)
    slots = [type(s)(s.name, value if s.name == slot else s.value, s.fed) for s in base.slots]
    spec = QSpec(base.op, base.dimension, base.detail, slots, base.decompose, base.attrs)
    model = node_model(spec, [np.zeros(0, np.float32)])
    with pytest.raises(Exception, match=message) as err:
        _run(model, feeds_of(spec))
    assert spec.name.replace("/", "_") in str(err.value)


def test_registered_in_the_contrib_domain() -> None:
    from ortcore_cpu.kernels import registry

    ops = {op for dom, op in registry.ops() if dom == "com.microsoft"}
    want = {s.op for s in SPECS} | {"QLinearAveragePool", "QLinearWhere"}
    assert want <= ops, want - ops


@pytest.mark.parametrize(
    ("scales", "zeros", "dtype"),
    [
        # from a ResNet quantized by onnxruntime's tool: (a - za) ra + (b - zb) rb + zc
        # is exactly -110.5 at a = -17, b = -102, where onnxruntime's order lands beside it
        ((0.14274958, 0.1628464, 0.16037205), (-7, -128, -128), np.int8),
        # and where its constant part, ra za + rb zb, is one fused multiply-add
        ((0.07777619, 0.05509914, 0.07255656), (9, -128, -128), np.int8),
        ((0.02, 0.03, 0.045), (3, -5, 0), np.int8),
        ((0.011, 0.5, 0.25), (128, 100, 7), np.uint8),
    ],
)
def test_qlinear_add_rounds_as_onnxruntime(
    scales: tuple[float, float, float], zeros: tuple[int, int, int], dtype: type
) -> None:
    """QLinearAdd over every pair of 8-bit inputs gives onnxruntime's value
    exactly: the same order of float32 operations, so the same ties."""
    ort = pytest.importorskip("onnxruntime")
    info = np.iinfo(dtype)
    values = np.arange(info.min, info.max + 1, dtype=np.int64).astype(dtype)
    a, b = (v.reshape(-1) for v in np.meshgrid(values, values, indexing="ij"))
    elem = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    names = ("a_scale", "b_scale", "c_scale")
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [], [s]) for n, s in zip(names, scales)]
    inits += [helper.make_tensor(n, elem, [], [z]) for n, z in zip(("a_zp", "b_zp", "c_zp"), zeros)]
    node = helper.make_node(
        "QLinearAdd",
        ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c_scale", "c_zp"],
        ["c"],
        domain="com.microsoft",
    )
    io = [helper.make_tensor_value_info(n, elem, [a.size]) for n in ("a", "b", "c")]
    graph = helper.make_graph([node], "g", io[:2], io[2:], inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    ).SerializeToString()
    feeds = {"a": a, "b": b}
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = ortcore.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)
