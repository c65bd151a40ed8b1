"""The packed GEMM (``_ext/gemm.pyx``): every build this CPU runs against a
float64 product, its argument checks, and the MatMul, Gemm and FusedMatMul
kernels that use it for a constant B (and only then)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper

from ortcore_cpu.kernels import gemm as G
from ortcore_cpu.kernels._isa import runnable_builds

BUILDS = runnable_builds("gemm")
IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]
RNG = np.random.default_rng(7)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _close(y: np.ndarray, ref: np.ndarray, k: int) -> None:
    """float32 products of ``k`` terms against float64: a few ulp per term."""
    scale = float(np.abs(ref).max(initial=1.0))
    np.testing.assert_allclose(y, ref, rtol=0, atol=4e-7 * max(k, 1) ** 0.5 * scale * 8)


# (M, K, N): under one register tile, ragged tiles and panels, K past one
# slice (384), M past one row block (240), few panels (split along M); last
# panels of 1-8 columns (one vector: the half-width kernel, AVX2) and of 13
# (the full kernel, cut)
SHAPES = [
    (1, 1, 1),
    (5, 3, 7),
    (13, 17, 33),
    (37, 400, 65),
    (250, 70, 20),
    (64, 800, 130),
    (7, 31, 24),
    (11, 50, 29),
]


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_build_against_float64(build: Any, shape: tuple[int, int, int], threads: int) -> None:
    m, k, n = shape
    a, b, bias = _f32(m, k), _f32(k, n), _f32(n)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = np.full((m, n), np.nan, np.float32)
    build.sgemm(a, build.pack_b(b, threads), n, bias, out, threads)
    _close(out, ref + bias, k)
    # strided operands: A and B transposed views; no bias
    at, bt = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    out2 = np.full((m, n), np.nan, np.float32)
    build.sgemm(at, build.pack_b(bt), n, None, out2, threads)
    _close(out2, ref, k)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
@pytest.mark.parametrize("shape", [(70, 400, 700), (1000, 400, 20)], ids=["along-n", "along-m"])
def test_sgemm_on_more_threads_than_cores(build: Any, shape: tuple[int, int, int]) -> None:
    """Eight threads on this machine's cores, repeated: threads the OS holds
    back lag the others, which take over the rest of their shares
    (_steal.h). A tile never computed shows as NaN, one computed twice at
    once as a wrong sum (K past one slice of 384: the later slices add to
    what C holds). Split along N (a panel an item) and along M (blocks of
    row panels, M past four row blocks)."""
    m, k, n = shape
    a, b, bias = _f32(m, k), _f32(k, n), _f32(n)
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias
    bp = build.pack_b(b)
    out = np.empty((m, n), np.float32)
    for _ in range(10):
        out.fill(np.nan)
        build.sgemm(a, bp, n, bias, out, 8)
        _close(out, ref, k)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_builds_agree(build: Any) -> None:
    """Each build gives the baseline's products (to rounding: FMA or not)."""
    a, b, bias = _f32(40, 300), _f32(300, 50), _f32(50)
    outs = []
    for mod in (BUILDS[0], build):
        out = np.empty((40, 50), np.float32)
        mod.sgemm(a, mod.pack_b(b), 50, bias, out, 2)
        outs.append(out)
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_pack_b_layout(build: Any) -> None:
    k, n, panel = 5, build.PANEL + 3, build.PANEL
    b = _f32(k, n)
    bp = build.pack_b(b)
    assert bp.shape == (2, k, panel) and bp.dtype == np.float32
    assert bp.ctypes.data % 64 == 0
    np.testing.assert_array_equal(bp[0], b[:, :panel])
    np.testing.assert_array_equal(bp[1, :, :3], b[:, panel:])
    assert not bp[1, :, 3:].any()


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_sgemm_refuses_bad_arguments(build: Any) -> None:
    a, b = _f32(20, 8), _f32(8, 10)
    bp = build.pack_b(b)
    out = np.empty((20, 10), np.float32)
    with pytest.raises(ValueError, match="packed B"):
        build.sgemm(a, bp, 10 + build.PANEL, None, out, 1)
    with pytest.raises(ValueError, match="packed B"):
        build.sgemm(_f32(20, 9), bp, 10, None, out, 1)
    with pytest.raises(ValueError, match="out is"):
        build.sgemm(a, bp, 10, None, np.empty((20, 11), np.float32), 1)
    with pytest.raises(ValueError, match="bias has 9"):
        build.sgemm(a, bp, 10, _f32(9), out, 1)
    with pytest.raises(ValueError, match="K is 0"):
        build.sgemm(_f32(20, 0), build.pack_b(_f32(0, 10)), 10, None, out, 1)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_batched_every_build(build: Any, threads: int) -> None:
    """Per-head products, contiguous and as the strided views of heads that
    attention reads in a (batch, sequence, heads, size) tensor (Q, K
    transposed, V), with the output written into that layout too."""
    nb, h, m, k, n = 2, 3, 19, 40, 37
    a, b = _f32(nb, h, m, k), _f32(nb, h, k, n)
    ref = np.matmul(a.astype(np.float64), b)
    out = np.full((nb, h, m, n), np.nan, np.float32)
    build.batched_sgemm(a, b, out, threads)
    _close(out, ref, k)
    a_seq = np.ascontiguousarray(a.transpose(0, 2, 1, 3))  # (nb, m, h, k)
    b_seq = np.ascontiguousarray(b.transpose(0, 3, 1, 2))  # (nb, n, h, k)
    out_seq = np.full((nb, m, h, n), np.nan, np.float32)
    view = out_seq.transpose(0, 2, 1, 3)
    build.batched_sgemm(a_seq.transpose(0, 2, 1, 3), b_seq.transpose(0, 2, 3, 1), view, threads)
    _close(view, ref, k)


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_batched_refuses_bad_arguments(build: Any) -> None:
    a, b = _f32(1, 2, 4, 5), _f32(1, 2, 5, 6)

    def out(*shape: int) -> np.ndarray:
        return np.empty(shape, np.float32)

    with pytest.raises(ValueError, match="do not match"):
        build.batched_sgemm(a, _f32(1, 3, 5, 6), out(1, 2, 4, 6), 1)
    with pytest.raises(ValueError, match="do not match"):
        build.batched_sgemm(a, b, out(1, 2, 4, 7), 1)
    with pytest.raises(ValueError, match="not contiguous"):
        build.batched_sgemm(a, b, out(1, 2, 6, 4).transpose(0, 1, 3, 2), 1)
    with pytest.raises(ValueError, match="K is 0"):
        build.batched_sgemm(_f32(1, 2, 4, 0), _f32(1, 2, 0, 6), out(1, 2, 4, 6), 1)


def test_batched_matmul_wrapper() -> None:
    """3-D and 4-D operands and ``out`` views; None for what it leaves to numpy."""
    if G.ext.VECTOR < 8:
        pytest.skip("the packed GEMM is used with AVX2 or AVX-512 only")
    a, b = _f32(3, 20, 8), _f32(3, 8, 9)
    _close(G.batched_matmul(a, b, 2), np.matmul(a.astype(np.float64), b), 8)
    target = np.zeros((20, 3, 9), np.float32)
    assert G.batched_matmul(a, b, 2, out=target.transpose(1, 0, 2)) is not None
    _close(target.transpose(1, 0, 2), np.matmul(a.astype(np.float64), b), 8)
    assert G.batched_matmul(a[None, None], b[None, None], 2) is None  # 5-D
    assert G.batched_matmul(a, b[:2], 2) is None  # batch broadcast
    assert G.batched_matmul(a.astype(np.float64), b, 2) is None
    assert G.batched_matmul(a, b, 2, out=np.zeros((3, 9, 20), np.float32).transpose(0, 2, 1)) is None


# --- the kernels: a constant B goes to the packed GEMM, other operands not ---


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """The shapes of A of every packed GEMM call (a packed path must exist)."""
    if G.ext.VECTOR < 8:
        pytest.skip("the packed GEMM is used with AVX2 or AVX-512 only")
    seen: list[tuple[int, ...]] = []
    real = G.ext.sgemm

    def spy(a: np.ndarray, *args: Any) -> None:
        seen.append(tuple(a.shape))
        real(a, *args)

    monkeypatch.setattr(G.ext, "sgemm", spy)
    yield seen


def _session(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    inits: dict[str, np.ndarray],
    level: Any = None,
) -> Any:
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(k, elem[v.dtype], v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", elem[next(iter(inputs.values())).dtype], None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = 2
    so.graph_optimization_level = level or ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])


def test_matmul_with_a_constant_b(calls: list[tuple[int, ...]]) -> None:
    a, b = _f32(2, 24, 40), _f32(40, 70)
    sess = _session([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b})
    for _ in range(2):  # the second run reuses the packed B
        (y,) = sess.run(None, {"a": a})
        _close(y, a.astype(np.float64) @ b, 40)
    assert y.shape == (2, 24, 70)
    assert calls == [(48, 40), (48, 40)]


def test_matmul_packs_b_once(monkeypatch: pytest.MonkeyPatch, calls: list[Any]) -> None:
    packs: list[tuple[int, ...]] = []
    real = G.ext.pack_b
    monkeypatch.setattr(G.ext, "pack_b", lambda b, *r: packs.append(b.shape) or real(b, *r))
    a, b = _f32(20, 8), _f32(8, 64)
    sess = _session([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b})
    for _ in range(3):
        sess.run(None, {"a": a})
    assert packs == [(8, 64)] and len(calls) == 3


@pytest.mark.parametrize(
    "case",
    ["b fed", "few rows", "few columns", "a 1-D", "b 3-D"],
)
def test_matmul_stays_on_blas(case: str, calls: list[tuple[int, ...]]) -> None:
    a, b = _f32(20, 8), _f32(8, G.PACKED_MIN_COLUMNS)
    inputs, inits = {"a": a}, {"b": b}
    if case == "b fed":
        inputs, inits = {"a": a, "b": b}, {}
    elif case == "few rows":
        a = inputs["a"] = _f32(G.PACKED_MIN_ROWS - 1, 8)
    elif case == "few columns":
        b = inits["b"] = _f32(8, G.PACKED_MIN_COLUMNS - 1)
    elif case == "a 1-D":
        a = inputs["a"] = _f32(8)
    else:
        b = inits["b"] = _f32(3, 8, G.PACKED_MIN_COLUMNS)
    sess = _session([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs, inits)
    (y,) = sess.run(None, inputs)
    _close(y, np.matmul(a.astype(np.float64), b), 8)
    assert calls == []


def test_float16_matmul_stays_on_numpy(calls: list[tuple[int, ...]]) -> None:
    a, b = _f32(20, 8).astype(np.float16), _f32(8, 9).astype(np.float16)
    sess = _session([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b})
    (y,) = sess.run(None, {"a": a})
    assert y.dtype == np.float16 and calls == []
    np.testing.assert_allclose(
        y, (a.astype(np.float32) @ b.astype(np.float32)), rtol=1e-2, atol=1e-2
    )


# C's shape and beta, alpha, transA, transB; whether the packed GEMM runs
GEMM_CASES = [
    ({}, (70,), True),
    ({"transB": 1}, (70,), True),
    ({"transA": 1, "transB": 1}, (1, 70), True),
    ({"beta": 0.5}, (70,), True),
    ({}, (20, 70), True),
    ({}, None, True),
    ({"beta": 0.0}, (20, 70), True),
    ({"alpha": 2.0}, (70,), False),
]


@pytest.mark.parametrize(("attrs", "c_shape", "packed"), GEMM_CASES)
def test_gemm(
    attrs: dict[str, Any], c_shape: tuple[int, ...] | None, packed: bool, calls: list[Any]
) -> None:
    a, b = _f32(20, 16), _f32(16, 70)
    a_in = a.T.copy() if attrs.get("transA") else a
    b_in = b.T.copy() if attrs.get("transB") else b
    inits = {"b": b_in}
    names = ["a", "b"]
    ref = float(attrs.get("alpha", 1.0)) * (a.astype(np.float64) @ b)
    if c_shape is not None:
        c = inits["c"] = _f32(*c_shape)
        names.append("c")
        ref = ref + float(attrs.get("beta", 1.0)) * c
    sess = _session([helper.make_node("Gemm", names, ["y"], **attrs)], {"a": a_in}, inits)
    (y,) = sess.run(None, {"a": a_in})
    _close(y, ref, 16)
    assert len(calls) == int(packed)


def test_fused_matmul_bias_and_activation(calls: list[tuple[int, ...]]) -> None:
    """MatMul + Add + Relu fused by the optimizer: the bias goes into the
    packed product, the Relu after."""
    a, b, bias = _f32(1, 32, 24), _f32(24, 72), _f32(72)
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    sess = _session(
        nodes, {"a": a}, {"b": b, "bias": bias}, ortcore.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    (y,) = sess.run(None, {"a": a})
    _close(y, np.maximum(a.astype(np.float64) @ b + bias, 0), 24)
    assert calls == [(32, 24)]


def test_no_packed_path_on_the_baseline_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SSE2 build is slower than BLAS: kernels keep numpy there."""
    base = BUILDS[0]
    assert base.VECTOR < 8
    used: list[Any] = []
    monkeypatch.setattr(G, "ext", base)
    monkeypatch.setattr(base, "sgemm", lambda *args: used.append(args))
    a, b = _f32(20, 8), _f32(8, G.PACKED_MIN_COLUMNS)
    sess = _session([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b})
    (y,) = sess.run(None, {"a": a})
    _close(y, a.astype(np.float64) @ b, 8)
    assert used == []
