"""The CPU kernels of ortcore's fused operators (domain ``com.ortcore``),
against numpy; and torch-exported transformers and CNNs give the same outputs
at every optimization level (skipped without torch and onnxscript)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ortcore = pytest.importorskip("ortcore")
from ortcore.fused_ops import DOMAIN, register_fused_schemas  # noqa: E402

from ortcore_cpu.kernels._isa import runnable_builds  # noqa: E402

RNG = np.random.default_rng(1)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _run_one(op: str, inputs: dict[str, np.ndarray], n_out: int = 1, **attrs: Any) -> list[Any]:
    """Run one ``com.ortcore`` node with every optimization off."""
    register_fused_schemas()
    attrs = {k: v for k, v in attrs.items() if v != []}
    node = helper.make_node(
        op, list(inputs), [f"y{i}" for i in range(n_out)], domain=DOMAIN, **attrs
    )
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(n_out)],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    )
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
    return list(sess.run(None, inputs))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-x)))


ACTIVATIONS = {
    "Relu": ([], lambda y: np.maximum(y, 0)),
    "Clip": ([-0.5, 0.5], lambda y: np.clip(y, -0.5, 0.5)),
    "LeakyRelu": ([0.1], lambda y: np.where(y < 0, 0.1 * y, y)),
    "Sigmoid": ([], _sigmoid),
    "HardSigmoid": ([0.3, 0.4], lambda y: np.clip(0.3 * y + 0.4, 0, 1)),
    "Tanh": ([], np.tanh),
}


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_fused_gemm_and_matmul(act: str) -> None:
    params, ref = ACTIVATIONS[act]
    a, b, c = _x(4, 6), _x(5, 6), _x(5)
    (got,) = _run_one("FusedGemm", {"a": a, "b": b, "c": c}, transB=1, activation=act,
                      activation_params=params)  # fmt: skip
    np.testing.assert_allclose(got, ref(a @ b.T + c), rtol=1e-5, atol=1e-6)
    a3 = _x(2, 4, 6)
    (got,) = _run_one("FusedMatMul", {"a": a3, "b": b.T.copy(), "c": c}, activation=act,
                      activation_params=params)  # fmt: skip
    np.testing.assert_allclose(got, ref(a3 @ b.T + c), rtol=1e-5, atol=1e-6)


def test_fused_conv_relu() -> None:
    x, w, b = _x(1, 2, 5, 5), _x(3, 2, 1, 1), _x(3)
    (got,) = _run_one("FusedConv", {"x": x, "w": w, "b": b}, activation="Relu")
    want = np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0]) + b[None, :, None, None]
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_bias_gelu(approximate: str) -> None:
    erf = np.vectorize(math.erf)  # the oracle: exact, and no scipy needed
    x, bias = _x(3, 8), _x(8)

    def gelu(v: np.ndarray) -> np.ndarray:
        if approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            return np.asarray(0.5 * v * (1 + np.tanh(c * (v + 0.044715 * v**3))))
        return np.asarray(0.5 * v * (1 + erf(v / math.sqrt(2))))

    (got,) = _run_one("FusedGelu", {"x": x}, approximate=approximate)
    np.testing.assert_allclose(got, gelu(x), rtol=1e-5, atol=1e-6)
    (got,) = _run_one("BiasGelu", {"x": x, "b": bias}, approximate=approximate)
    np.testing.assert_allclose(got, gelu(x + bias), rtol=1e-5, atol=1e-6)


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    return np.asarray((x - m) / np.sqrt(x.var(-1, keepdims=True) + eps) * g + b)


def test_skip_layer_norm_and_sum() -> None:
    x, s, g, b = _x(2, 3, 8), _x(2, 3, 8), _x(8), _x(8)
    y, total = _run_one("SkipLayerNormalization", {"x": x, "s": s, "g": g, "b": b}, n_out=2)
    np.testing.assert_allclose(total, x + s, rtol=1e-6)
    np.testing.assert_allclose(y, _ln(x + s, g, b), rtol=1e-4, atol=1e-5)


def test_layer_and_rms_norm() -> None:
    x, g, b = _x(2, 3, 8), _x(8), _x(8)
    (y,) = _run_one("FusedLayerNorm", {"x": x, "g": g, "b": b})
    np.testing.assert_allclose(y, _ln(x, g, b), rtol=1e-4, atol=1e-5)
    (y,) = _run_one("FusedRMSNorm", {"x": x, "g": g}, epsilon=1e-6)
    want = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def _attention(q: Any, kt: Any, v: Any, mask: Any, scale: float) -> np.ndarray:
    """The reference: softmax(q @ kt * scale + mask) @ v in float64."""
    s = q.astype(np.float64) @ kt * scale
    if mask is not None:
        s = s + mask
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
    return np.asarray(p @ v)


# mask shapes a (2, 3, 5, 6) score tensor broadcasts: per batch (padding), a
# causal (query, key) one, per query, per head, a scalar; and none
MASKS = [(2, 1, 1, 6), (1, 1, 5, 6), (5, 6), (6,), (2, 3, 5, 1), (1, 3, 1, 6), (), None]


@pytest.mark.parametrize("mask_shape", MASKS, ids=[str(m) for m in MASKS])
def test_fused_attention(mask_shape: tuple[int, ...] | None) -> None:
    q, kt, v = _x(2, 3, 5, 4), _x(2, 3, 4, 6), _x(2, 3, 6, 4)
    feeds = {"q": q, "k": kt, "v": v}
    mask = None
    if mask_shape is not None:
        feeds["m"] = mask = _x(*mask_shape)
    (y,) = _run_one("FusedAttention", feeds, scale=0.5)
    np.testing.assert_allclose(y, _attention(q, kt, v, mask, 0.5), rtol=1e-4, atol=1e-5)


def test_fused_attention_infinite_masks_and_nan() -> None:
    """A key masked with -inf gets no weight; a query whose keys are all
    masked, or whose scores hold a NaN, gives NaN (as onnx's Softmax)."""
    q, kt, v = _x(1, 2, 4, 3), _x(1, 2, 3, 5), _x(1, 2, 5, 3)
    mask = np.zeros((1, 1, 4, 5), np.float32)
    mask[0, 0, 1, 2:] = -np.inf  # query 1 sees keys 0 and 1
    mask[0, 0, 2, :] = -np.inf  # query 2 sees nothing
    q[0, 1, 3, 0] = np.nan  # head 1, query 3: NaN scores
    (y,) = _run_one("FusedAttention", {"q": q, "k": kt, "v": v, "m": mask}, scale=1.0)
    want = _attention(q, kt, v, mask, 1.0)
    assert np.isnan(y[0, :, 2]).all() and np.isnan(y[0, 1, 3]).all()
    np.testing.assert_allclose(y[0, :, :2], want[0, :, :2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y[0, 0, 3], want[0, 0, 3], rtol=1e-5, atol=1e-6)
    # query 1's weights on keys 2.. are 0: its output is that of keys 0 and 1 alone
    s = np.einsum("hd,hdk->hk", q[0, :, 1], kt[0, :, :, :2])
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    both = np.einsum("hk,hkd->hd", p, v[0, :, :2])
    np.testing.assert_allclose(y[0, :, 1], both, rtol=1e-5, atol=1e-6)


def test_fused_attention_with_folded_transposes() -> None:
    """perm_q, perm_kt, perm_v transpose the inputs, perm_out the result:
    heads read where they lie in (batch, sequence, heads, size) tensors."""
    qs, ks, vs = _x(2, 5, 3, 4), _x(2, 6, 3, 4), _x(2, 6, 3, 4)
    mask = _x(2, 1, 1, 6)
    perms = {"perm_q": [0, 2, 1, 3], "perm_kt": [0, 2, 3, 1], "perm_v": [0, 2, 1, 3],
             "perm_out": [0, 2, 1, 3]}  # fmt: skip
    (y,) = _run_one("FusedAttention", {"q": qs, "k": ks, "v": vs, "m": mask}, scale=0.5, **perms)
    core = _attention(qs.transpose(0, 2, 1, 3), ks.transpose(0, 2, 3, 1),
                      vs.transpose(0, 2, 1, 3), mask, 0.5)  # fmt: skip
    assert y.shape == (2, 5, 3, 4)
    np.testing.assert_allclose(y, core.transpose(0, 2, 1, 3), rtol=1e-4, atol=1e-5)
    # a result perm that moves the last axis: the kernel transposes a copy
    (y2,) = _run_one("FusedAttention", {"q": qs, "k": ks, "v": vs}, scale=0.5,
                     perm_q=[0, 2, 1, 3], perm_kt=[0, 2, 3, 1], perm_v=[0, 2, 1, 3],
                     perm_out=[3, 0, 1, 2])  # fmt: skip
    core2 = _attention(qs.transpose(0, 2, 1, 3), ks.transpose(0, 2, 3, 1),
                       vs.transpose(0, 2, 1, 3), None, 0.5)  # fmt: skip
    np.testing.assert_allclose(y2, core2.transpose(3, 0, 1, 2), rtol=1e-4, atol=1e-5)


def test_fused_attention_refuses_bad_perms() -> None:
    q, kt, v = _x(1, 2, 4, 3), _x(1, 2, 3, 5), _x(1, 2, 5, 3)
    with pytest.raises(Exception, match="perm_q"):
        _run_one("FusedAttention", {"q": q, "k": kt, "v": v}, perm_q=[0, 2, 1])
    with pytest.raises(Exception, match=r"perm_v \[0, 1, 1, 3\] is not a permutation"):
        _run_one("FusedAttention", {"q": q, "k": kt, "v": v}, perm_v=[0, 1, 1, 3])


def test_attention_softmax_checks_its_arguments() -> None:
    """The Cython pass refuses a mask row map that does not fit, rather than
    reading past the mask."""
    from ortcore_cpu.kernels.unary import native

    s = np.zeros((4, 6), np.float32)
    mask = np.zeros((2, 6), np.float32)
    with pytest.raises(ValueError, match="mask row 2 of 2"):
        native.attention_softmax(s, mask, np.array([0, 1, 2, 0], np.intp), 1.0, 1)
    with pytest.raises(ValueError, match="3 mask rows for 4"):
        native.attention_softmax(s, mask, np.array([0, 1, 0], np.intp), 1.0, 1)
    with pytest.raises(ValueError, match="mask rows of 5"):
        native.attention_softmax(s, np.zeros((2, 5), np.float32), np.zeros(4, np.intp), 1.0, 1)
    native.attention_softmax(s, mask, np.array([0, 1, 1, 0], np.intp), 2.0, 1)
    np.testing.assert_allclose(s, np.full((4, 6), 1 / 6, np.float32), rtol=1e-6)


ACTIVATION_BUILDS = runnable_builds("activation")


@pytest.mark.parametrize("build", ACTIVATION_BUILDS, ids=[m.__name__ for m in ACTIVATION_BUILDS])
@pytest.mark.parametrize("length", [1, 7, 8, 16, 17, 40, 128, 131])
def test_attention_softmax_on_every_build(build: Any, length: int) -> None:
    """Rows of whole vectors and of a tail past them, with a causal-style
    mask of -3.4e38 and -inf, against float64; a score more than 64 below
    its row's maximum gives exactly 0 (its share is under 1.7e-28)."""
    rows = 6
    s = (RNG.standard_normal((rows, length)) * 8).astype(np.float32)
    mask = np.zeros((rows, length), np.float32)
    for r in range(rows):
        mask[r, r + 1 :] = -3.4e38 if r % 2 else -np.inf
    s[0, -1] = s[0].max() + 70  # row 0: the others fall far below the max...
    mask[0] = 0.0
    if length > 2:
        s[0, 1] = s[0, -1] - 60  # ...but one only 60 below: kept
    want = s.astype(np.float64) * 0.5 + mask
    want = np.exp(want - want.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    got = s.copy()
    build.attention_softmax(got, mask, np.arange(rows, dtype=np.intp), 0.5, 2)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    far = (s[0] * 0.5) < (s[0, -1] * 0.5 - 64)
    assert (got[0][far] == 0).all()
    assert (got[mask == -3.4e38] == 0).all() and (got[np.isinf(mask)] == 0).all()


# -- torch-exported models at every level ------------------------------------

LEVELS = list(ortcore.GraphOptimizationLevel)
TORCH_CASES = [("bert", "dynamo"), ("bert", "legacy-dynamic"), ("gpt2", "dynamo"),
               ("gpt2", "legacy-dynamic"), ("vit", "dynamo"), ("mobilenet", "dynamo")]  # fmt: skip


@pytest.mark.parametrize(("name", "variant"), TORCH_CASES, ids=[f"{n}-{v}" for n, v in TORCH_CASES])
def test_torch_model_same_at_every_level(name: str, variant: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).parent / "exporters"))
    try:
        import test_torch_models as tm
    finally:
        sys.path.pop(0)
    import torch

    make_model, make_inputs, axes = tm.MODELS[name]
    torch.manual_seed(0)
    model = tm._randomize(make_model())
    data = tm._export(model, make_inputs(tm.BATCH, tm.SEQ), variant, axes, tmp_path / "m.onnx")
    feeds = {k: v.numpy() for k, v in make_inputs(tm.BATCH, tm.SEQ).items()}
    results = []
    for level in LEVELS:
        so = ortcore.SessionOptions()
        so.graph_optimization_level = level
        so.optimized_model_filepath = str(tmp_path / f"opt{int(level)}.onnx")
        results.append(ortcore.InferenceSession(data, so, providers=["cpu"]).run(None, feeds))
    fused = [n for n in onnx.load(tmp_path / f"opt{int(LEVELS[-1])}.onnx").graph.node
             if n.domain == DOMAIN]  # fmt: skip
    assert fused, "nothing was fused"
    for level, got in zip(LEVELS[1:], results[1:], strict=True):
        for g, w in zip(got, results[0], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4, err_msg=str(level))
