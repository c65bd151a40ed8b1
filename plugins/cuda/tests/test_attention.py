"""Attention and RotaryEmbedding on the CUDA provider: its kernels under the CPU emulation against
numpy, and the op end to end on the emulated provider against onnx's
reference implementation (the oracle of the tests only; the provider never
calls it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import attention as ak
from ortcore_cuda.kernels.rows import row_threads

NP = {"f32": np.float32, "f16": np.float16}
TOL = {"f32": 1e-5, "f16": 2e-3}


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(ak.all_kernels(), tmp_path_factory.mktemp("emu"))


# -- kernels -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("grid", [1, 3])
def test_heads_lays_out_3d_as_4d_and_scales(emu: Emulator, dtype: str, grid: int) -> None:
    b, s, h, d = 2, 5, 3, 7
    x = np.random.default_rng(1).standard_normal((b, s, h * d)).astype(NP[dtype])
    y = np.empty((b, h, s, d), NP[dtype])
    strides = [s * h * d, d, h * d, 1]  # (b, h, s, d) of the 3-D tensor
    emu.launch(f"attn_heads_{dtype}", grid, 32, x, y, y.size, h, s, d, *strides, 0.5)
    want = (x.reshape(b, s, h, d).transpose(0, 2, 1, 3).astype(np.float32) * 0.5).astype(NP[dtype])
    np.testing.assert_array_equal(y, want)


def _rows_reference(
    scores: np.ndarray,
    mask: np.ndarray | None,
    nonpad: np.ndarray | None,
    softcap: float,
    causal: int,
    offset: int,
    left: int,
    right: int,
    mode: int,
) -> tuple[np.ndarray, np.ndarray]:
    """What the row kernel computes, in float64: probabilities and ``qk_out``."""
    b, h, q, kv = scores.shape
    raw = scores.astype(np.float64)
    capped = np.tanh(raw / softcap) * softcap if softcap > 0 else raw
    bias = np.zeros((b, h, q, kv))
    if mask is not None:
        pad = kv - mask.shape[-1]
        m = np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask.astype(np.float64)
        m = np.concatenate([m, np.full((*m.shape[:-1], pad), -np.inf)], axis=-1)
        bias = bias + m
    i = np.arange(q).reshape(1, 1, q, 1)
    j = np.arange(kv).reshape(1, 1, 1, kv)
    off = (nonpad.reshape(b, 1, 1, 1) - q) if nonpad is not None else offset
    diff = i + off - j
    if causal:
        bias = bias + np.where(diff < 0, -np.inf, 0.0)
    if left >= 0:
        bias = bias + np.where(diff > left, -np.inf, 0.0)
    if right >= 0:
        bias = bias + np.where(-diff > right, -np.inf, 0.0)
    if nonpad is not None:
        bias = bias + np.where(j >= nonpad.reshape(b, 1, 1, 1), -np.inf, 0.0)
    x = capped + bias
    top = x.max(-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(x - top)
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total == 0, 1.0, total)
    p = np.where(np.isneginf(bias.max(-1, keepdims=True)), 0.0, p)
    return p, [raw, capped, x, p][mode]


ROW_CASES: dict[str, dict[str, Any]] = {
    "plain": dict(mask=None, causal=0),
    "bool_mask_broadcast": dict(mask=("bool", (1, 3, 1, 37)), causal=0),
    "float_mask_short": dict(mask=("float", (2, 1, 3, 30)), causal=0),
    "causal_past": dict(mask=None, causal=1, offset=34),
    "causal_nonpad_negative": dict(mask=None, causal=1, nonpad=(37, 2)),
    "window_softcap": dict(mask=("float", (3, 37)), causal=1, offset=34, left=5, softcap=2.0),
    "bidirectional_window": dict(mask=None, causal=0, offset=34, left=3, right=2),
    "fully_masked_rows": dict(mask=("bool_rows", (3, 37)), causal=0),
}


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("case", list(ROW_CASES))
def test_softmax_rows(emu: Emulator, dtype: str, mode: int, case: str) -> None:
    c: dict[str, Any] = {"offset": 0, "left": -1, "right": -1, "softcap": 0.0, **ROW_CASES[case]}
    rng = np.random.default_rng(len(case) + mode)
    b, h, q, kv = 2, 3, 3, 37
    scores = (rng.standard_normal((b, h, q, kv)) * 3).astype(NP[dtype])
    mask = None
    kind, strides, mask_len = ak.MASK_NONE, [0, 0, 0], 0
    if c["mask"] is not None:
        what, shape = c["mask"]
        if what == "bool":
            mask = rng.random(shape) > 0.3
        elif what == "bool_rows":
            mask = rng.random(shape) > 0.3
            mask[1] = False  # query 1 attends no key
        else:
            mask = rng.standard_normal(shape).astype(NP[dtype])
            mask[..., 0] = -np.inf
        kind = ak.MASK_BOOL if mask.dtype == np.bool_ else ak.MASK_FLOAT
        dims = (1,) * (4 - mask.ndim) + mask.shape
        contiguous = [dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3]]
        strides = [s if d != 1 else 0 for s, d in zip(contiguous, dims[:3])]
        mask_len = dims[3]
    nonpad = np.array(c["nonpad"], np.int64) if "nonpad" in c else None
    args = ak.ROWS.pack(
        rows=b * h * q,
        q_heads=h,
        q_len=q,
        kv_len=kv,
        mask_kind=kind,
        mask_b=strides[0],
        mask_h=strides[1],
        mask_q=strides[2],
        mask_len=mask_len,
        causal=c["causal"],
        offset=c["offset"],
        left=c["left"],
        right=c["right"],
        mode=mode,
    )
    probs = np.full_like(scores, np.nan)
    qk = np.full_like(scores, np.nan)
    emu.launch(
        f"attn_softmax_{dtype}",
        2,
        row_threads(kv),
        scores,
        probs,
        qk,
        mask if mask is not None else 0,
        nonpad if nonpad is not None else 0,
        c["softcap"],
        args,
    )
    want_p, want_qk = _rows_reference(
        scores, mask, nonpad, c["softcap"], c["causal"], c["offset"], c["left"], c["right"], mode
    )
    tol = TOL[dtype]
    np.testing.assert_allclose(probs, want_p.astype(NP[dtype]), rtol=tol, atol=tol)
    np.testing.assert_allclose(qk, want_qk.astype(NP[dtype]), rtol=tol, atol=tol)
    assert not np.isnan(probs).any()


def test_softmax_rows_without_qk_out(emu: Emulator) -> None:
    scores = np.random.default_rng(0).standard_normal((1, 1, 2, 5)).astype(np.float32)
    probs = np.empty_like(scores)
    args = ak.ROWS.pack(rows=2, q_heads=1, q_len=2, kv_len=5, left=-1, right=-1)
    emu.launch("attn_softmax_f32", 1, 32, scores, probs, 0, 0, 0, 0.0, args)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(-1, keepdims=True), rtol=1e-6)


def _rotary_reference(
    x: np.ndarray, cos: np.ndarray, sin: np.ndarray, heads: int, rot: int, interleaved: bool
) -> np.ndarray:
    """RotaryEmbedding in float64 on ``(batch, seq, heads, head)`` views; ``cos`` and
    ``sin`` already ``(batch, seq, rot / 2)``."""
    four_d = x.ndim == 4
    v = x.transpose(0, 2, 1, 3) if four_d else x.reshape(x.shape[0], x.shape[1], heads, -1)
    v = v.astype(np.float64)
    c, s = cos[:, :, None, :].astype(np.float64), sin[:, :, None, :].astype(np.float64)
    part = v[..., :rot]
    x1, x2 = (part[..., 0::2], part[..., 1::2]) if interleaved else np.split(part, 2, axis=-1)
    real, imag = c * x1 - s * x2, s * x1 + c * x2
    out = v.copy()
    if interleaved:
        out[..., 0:rot:2], out[..., 1:rot:2] = real, imag
    else:
        out[..., :rot] = np.concatenate([real, imag], axis=-1)
    return out.transpose(0, 2, 1, 3) if four_d else out.reshape(x.shape)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("four_d", [True, False])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
@pytest.mark.parametrize("positions", [True, False])
def test_rotary(
    emu: Emulator, dtype: str, four_d: bool, interleaved: int, rot: int, positions: bool
) -> None:
    rng = np.random.default_rng(rot + interleaved)
    b, h, s, d = 2, 3, 5, 6
    x = rng.standard_normal((b, h, s, d) if four_d else (b, s, h * d)).astype(NP[dtype])
    r = rot or d
    table = 7
    cos = rng.standard_normal((table, r // 2) if positions else (b, s, r // 2)).astype(NP[dtype])
    sin = rng.standard_normal(cos.shape).astype(NP[dtype])
    pos = rng.integers(0, table, (b, s)) if positions else None
    y = np.full_like(x, np.nan)
    emu.launch(
        f"rotary_{dtype}",
        2,
        32,
        x,
        cos,
        sin,
        pos if pos is not None else 0,
        y,
        y.size,
        d,
        s,
        h,
        int(four_d),
        r,
        interleaved,
    )
    c, sn = (cos[pos], sin[pos]) if pos is not None else (cos, sin)
    want = _rotary_reference(x, c, sn, h, r, bool(interleaved))
    np.testing.assert_allclose(y, want.astype(NP[dtype]), rtol=TOL[dtype], atol=TOL[dtype])


# -- the op on the emulated provider -------------------------------------------------------------


_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}


def _model(
    feeds: Mapping[str, np.ndarray | None], outputs: list[str], opset: int, **attrs: Any
) -> bytes:
    names = [k if v is not None else "" for k, v in feeds.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("Attention", names, outputs, **attrs)
    ins = [
        helper.make_tensor_value_info(
            k,
            TensorProto.BOOL
            if v.dtype == np.bool_
            else TensorProto.INT64
            if v.dtype == np.int64
            else _TYPES[v.dtype],
            list(v.shape),
        )
        for k, v in feeds.items()
        if v is not None
    ]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs if o]
    graph = helper.make_graph([node], "g", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _check(
    pm: Any, feeds: Mapping[str, np.ndarray | None], outputs: list[str], opset: int, **attrs: Any
) -> None:
    from onnx.reference import ReferenceEvaluator

    model = _model(feeds, outputs, opset, **attrs)
    cuda = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=pm)
    where = {r.op_type: r for r in cuda.get_partition().nodes}
    assert where["Attention"].provider == "CUDAExecutionProvider", where["Attention"].declined
    given = {k: v for k, v in feeds.items() if v is not None}
    got = cuda.run(None, given)
    want = ReferenceEvaluator(model).run(None, given)
    fp16 = feeds["Q"] is not None and feeds["Q"].dtype == np.float16
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(
            g.astype(np.float32),
            w.astype(np.float32),
            rtol=3e-3 if fp16 else 1e-4,
            atol=3e-3 if fp16 else 1e-5,
        )


def _rand(rng: Any, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def test_3d_grouped_query_with_past_mask_causal_and_every_output(emulated: Any) -> None:
    rng = np.random.default_rng(0)
    b, sq, skv, past, hq, hkv, d, dv = 2, 3, 4, 5, 6, 2, 4, 5
    mask = _rand(rng, (b, 1, sq, past + skv))
    feeds = {
        "Q": _rand(rng, (b, sq, hq * d)),
        "K": _rand(rng, (b, skv, hkv * d)),
        "V": _rand(rng, (b, skv, hkv * dv)),
        "attn_mask": mask,
        "past_key": _rand(rng, (b, hkv, past, d)),
        "past_value": _rand(rng, (b, hkv, past, dv)),
    }
    for mode in (1, 2, 3):
        _check(
            emulated,
            feeds,
            ["Y", "present_key", "present_value", "qk"],
            23,
            q_num_heads=hq,
            kv_num_heads=hkv,
            is_causal=1,
            softcap=3.0,
            qk_matmul_output_mode=mode,
        )


def test_4d_float16_nonpad_causal_with_a_bool_mask(emulated: Any) -> None:
    rng = np.random.default_rng(1)
    b, h, sq, skv, d = 2, 2, 3, 6, 8
    feeds: dict[str, np.ndarray | None] = {
        "Q": _rand(rng, (b, h, sq, d), np.float16),
        "K": _rand(rng, (b, h, skv, d), np.float16),
        "V": _rand(rng, (b, h, skv, d), np.float16),
        "attn_mask": rng.random((sq, 5)) > 0.2,
        "past_key": None,
        "past_value": None,
        "nonpad_kv_seqlen": np.array([6, 2], np.int64),
    }
    _check(emulated, feeds, ["Y", "", "", "qk"], 24, is_causal=1, qk_matmul_output_mode=3)


def test_4d_scaled_with_a_sliding_window(emulated: Any) -> None:
    rng = np.random.default_rng(2)
    feeds = {
        "Q": _rand(rng, (1, 3, 5, 4)),
        "K": _rand(rng, (1, 3, 7, 4)),
        "V": _rand(rng, (1, 3, 7, 3)),
    }
    _check(emulated, feeds, ["Y"], 25, scale=0.3, left_window_size=1, right_window_size=2)


def test_what_attention_does_not_cover_is_declined_with_the_reason(emulated: Any) -> None:
    rng = np.random.default_rng(3)
    feeds = {"Q": _rand(rng, (1, 1, 2, 4)), "K": _rand(rng, (1, 1, 3, 4))}
    feeds["V"] = _rand(rng, (1, 1, 3, 4))
    model = _model(feeds, ["Y", "", "", "qk"], 23, softcap=2.0, qk_matmul_output_mode=0)
    cuda = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=emulated)
    node = next(r for r in cuda.get_partition().nodes if r.op_type == "Attention")
    assert node.provider != "CUDAExecutionProvider"
    assert "mode 0 with softcap" in node.declined["CUDAExecutionProvider"]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rotary_embedding_on_the_device(emulated: Any, dtype: Any) -> None:
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(4)
    feeds = {
        "x": _rand(rng, (2, 3, 4 * 6), dtype),
        "cos": _rand(rng, (9, 2), dtype),
        "sin": _rand(rng, (9, 2), dtype),
        "pos": rng.integers(0, 9, (2, 3)),
    }
    node = helper.make_node(
        "RotaryEmbedding",
        list(feeds),
        ["y"],
        num_heads=4,
        rotary_embedding_dim=4,
        interleaved=1,
    )
    types = [_TYPES[np.dtype(dtype)]] * 3 + [TensorProto.INT64]
    ins = [
        helper.make_tensor_value_info(k, t, list(v.shape))
        for (k, v), t in zip(feeds.items(), types)
    ]
    out = helper.make_tensor_value_info("y", types[0], None)
    graph = helper.make_graph([node], "g", ins, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    data = model.SerializeToString()
    cuda = ortcore.InferenceSession(data, providers=["cuda", "cpu"], plugin_manager=emulated)
    (row,) = cuda.get_partition().nodes
    assert row.provider == "CUDAExecutionProvider", row.declined
    got = cuda.run(None, feeds)[0]
    reference: Any = ReferenceEvaluator(data)
    want = reference.run(None, feeds)[0]
    tol = 3e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


# -- LinearAttention, CausalConvWithState, FlexAttention -------------------------------------


def _linear_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    past: np.ndarray | None,
    decay: np.ndarray | None,
    beta: np.ndarray | None,
    hq: int,
    hkv: int,
    scale: float,
) -> tuple[np.ndarray, np.ndarray]:
    """LinearAttention's recurrence in float64, token by token."""
    b, t, _ = q.shape
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    q4 = q.astype(np.float64).reshape(b, t, hq, dk)
    k4 = k.astype(np.float64).reshape(b, t, hkv, dk)
    v4 = v.astype(np.float64).reshape(b, t, hkv, dv)
    s = np.zeros((b, hkv, dk, dv)) if past is None else past.astype(np.float64)
    y = np.zeros((b, t, hq, dv))
    for i in range(t):
        if decay is not None:
            g = decay[:, i].astype(np.float64).reshape(b, hkv, -1)  # (b, hkv, 1 or dk)
            s = s * np.exp(g)[..., None]
        vt = v4[:, i]
        if beta is not None:
            be = np.broadcast_to(beta[:, i].astype(np.float64), (b, hkv))[..., None]
            vt = be * (vt - np.einsum("bhdm,bhd->bhm", s, k4[:, i]))
        s = s + k4[:, i][..., :, None] * vt[..., None, :]
        y[:, i] = scale * np.einsum("bhd,bhdm->bhm", q4[:, i], np.repeat(s, hq // hkv, axis=1))
    return y.reshape(b, t, hq * dv), s


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(
    ("rule", "per_key", "beta_heads", "past"),
    [
        ("linear", 0, 0, False),
        ("gated", 1, 0, True),
        ("gated", 0, 0, False),
        ("delta", 0, 2, True),
        ("gated_delta", 1, 1, True),
    ],
)
def test_linear_attention_kernel(
    emu: Emulator, dtype: str, rule: str, per_key: int, beta_heads: int, past: bool
) -> None:
    rng = np.random.default_rng(len(rule) + per_key)
    b, t, hq, hkv, dk, dv = 2, 5, 4, 2, 3, 5
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    q = rng.standard_normal((b, t, hq * dk)).astype(NP[dtype])
    k = (rng.standard_normal((b, t, hkv * dk)) * 0.5).astype(NP[dtype])
    v = rng.standard_normal((b, t, hkv * dv)).astype(NP[dtype])
    p = (rng.standard_normal((b, hkv, dk, dv)) * 0.1).astype(NP[dtype]) if past else None
    decay = (
        (-0.1 * np.abs(rng.standard_normal((b, t, hkv * dk if per_key else hkv)))).astype(NP[dtype])
        if gating
        else None
    )
    beta = rng.random((b, t, beta_heads)).astype(NP[dtype]) if delta else None
    y = np.full((b, t, hq * dv), np.nan, NP[dtype])
    present = np.full((b, hkv, dk, dv), np.nan, NP[dtype])
    work = np.empty((b, hkv, dk, dv), np.float32)
    args = ak.LINEAR.pack(
        batch=b,
        len=t,
        q_heads=hq,
        kv_heads=hkv,
        dk=dk,
        dv=dv,
        gating=int(gating),
        delta=int(delta),
        decay_per_key=per_key,
        beta_heads=beta_heads or hkv,
    )
    emu.launch(
        f"linear_attention_{dtype}",
        2,
        4,
        q,
        k,
        v,
        p if p is not None else 0,
        decay if decay is not None else 0,
        beta if beta is not None else 0,
        y,
        work,
        present,
        0.5,
        args,
    )
    want_y, want_s = _linear_reference(q, k, v, p, decay, beta, hq, hkv, 0.5)
    tol = 1e-5 if dtype == "f32" else 5e-3
    np.testing.assert_allclose(y.astype(np.float64), want_y, rtol=tol, atol=tol)
    np.testing.assert_allclose(present.astype(np.float64), want_s, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(
    ("k", "length", "bias", "past", "silu"),
    [
        (4, 7, True, True, 1),
        (3, 1, False, True, 0),
        (5, 2, True, False, 1),
        (1, 6, False, False, 0),
    ],
)
def test_causal_conv_kernel(
    emu: Emulator, dtype: str, k: int, length: int, bias: bool, past: bool, silu: int
) -> None:
    rng = np.random.default_rng(k * 10 + length)
    b, c = 2, 3
    x = rng.standard_normal((b, c, length)).astype(NP[dtype])
    w = rng.standard_normal((c, 1, k)).astype(NP[dtype])
    bv = rng.standard_normal(c).astype(NP[dtype]) if bias else None
    p = rng.standard_normal((b, c, k - 1)).astype(NP[dtype]) if past else None
    y = np.full_like(x, np.nan)
    state = np.full((b, c, k - 1), np.nan, NP[dtype])
    emu.launch(
        f"causal_conv_{dtype}",
        2,
        8,
        x,
        w,
        bv if bv is not None else 0,
        p if p is not None else 0,
        y,
        state,
        b * c,
        c,
        length,
        k,
        silu,
    )
    padded = np.concatenate([p if p is not None else np.zeros((b, c, k - 1), x.dtype), x], 2)
    acc = sum(
        w[None, :, 0, j, None].astype(np.float64) * padded[:, :, j : j + length] for j in range(k)
    )
    if bv is not None:
        acc = acc + bv[None, :, None]
    acc = np.asarray(acc).astype(NP[dtype]).astype(np.float64)
    if silu:
        acc = acc / (1 + np.exp(-acc))
    tol = 1e-5 if dtype == "f32" else 3e-3
    np.testing.assert_allclose(y.astype(np.float64), acc, rtol=tol, atol=tol)
    np.testing.assert_array_equal(state, padded[:, :, length:])


def _single_node_model(
    node: Any,
    feeds: Mapping[str, np.ndarray | None],
    outputs: list[str],
    opsets: Mapping[str, int],
) -> bytes:
    types = {**_TYPES, np.dtype(np.float64): TensorProto.DOUBLE}
    ins = [
        helper.make_tensor_value_info(k, types[v.dtype], list(v.shape))
        for k, v in feeds.items()
        if v is not None
    ]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
    graph = helper.make_graph([node], "g", ins, outs)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()]
    )
    return model.SerializeToString()


def _run_single_node(
    pm: Any,
    op: str,
    feeds: Mapping[str, np.ndarray | None],
    outputs: list[str],
    opsets: Mapping[str, int],
    domain: str = "",
    on_device: bool = True,
    **attrs: Any,
) -> Any:
    """Run one ``op`` node on the emulated CUDA provider and check it against onnx's reference."""
    from onnx.reference import ReferenceEvaluator

    names = [k if v is not None else "" for k, v in feeds.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, outputs, domain=domain, **attrs)
    model = _single_node_model(node, feeds, outputs, opsets)
    cuda = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=pm)
    row = next(r for r in cuda.get_partition().nodes if r.op_type == op)
    if not on_device:
        return row
    assert row.provider == "CUDAExecutionProvider", row.declined
    given = {k: v for k, v in feeds.items() if v is not None}
    got = cuda.run(None, given)
    want = ReferenceEvaluator(model).run(None, given)
    fp16 = next(iter(given.values())).dtype == np.float16
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        tol = 3e-3 if fp16 else 1e-5
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol)
    return row


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_linear_attention_on_the_device(emulated: Any, dtype: Any) -> None:
    rng = np.random.default_rng(5)
    b, t, hq, hkv, dk, dv = 2, 3, 4, 2, 4, 3
    feeds = {
        "query": _rand(rng, (b, t, hq * dk), dtype),
        "key": (_rand(rng, (b, t, hkv * dk)) * 0.5).astype(dtype),
        "value": _rand(rng, (b, t, hkv * dv), dtype),
        "past_state": (_rand(rng, (b, hkv, dk, dv)) * 0.1).astype(dtype),
        "decay": (-0.1 * np.abs(_rand(rng, (b, t, hkv)))).astype(dtype),
        "beta": rng.random((b, t, 1)).astype(dtype),
    }
    _run_single_node(
        emulated,
        "LinearAttention",
        feeds,
        ["output", "present_state"],
        {"": 27},
        q_num_heads=hq,
        kv_num_heads=hkv,
    )


def test_linear_attention_without_past_explicit_scale(emulated: Any) -> None:
    rng = np.random.default_rng(6)
    feeds: dict[str, np.ndarray | None] = {
        "query": _rand(rng, (1, 4, 2 * 3)),
        "key": _rand(rng, (1, 4, 2 * 3)),
        "value": _rand(rng, (1, 4, 2 * 5)),
    }
    _run_single_node(
        emulated,
        "LinearAttention",
        feeds,
        ["output", "present_state"],
        {"": 27},
        q_num_heads=2,
        kv_num_heads=2,
        update_rule="linear",
        scale=0.7,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_causal_conv_with_state_on_the_device(emulated: Any, dtype: Any) -> None:
    rng = np.random.default_rng(7)
    b, c, length, k = 2, 3, 5, 4
    feeds = {
        "input": _rand(rng, (b, c, length), dtype),
        "weight": _rand(rng, (c, 1, k), dtype),
        "bias": _rand(rng, (c,), dtype),
        "past_state": _rand(rng, (b, c, k - 1), dtype),
    }
    _run_single_node(
        emulated,
        "CausalConvWithState",
        feeds,
        ["output", "present_state"],
        {"": 27},
        activation="silu",
    )


def test_linear_attention_with_a_state_of_another_type_is_declined(emulated: Any) -> None:
    rng = np.random.default_rng(8)
    feeds = {k: _rand(rng, (1, 2, 4)) for k in ("query", "key", "value")}
    feeds["past_state"] = _rand(rng, (1, 1, 4, 4), np.float16)
    row = _run_single_node(
        emulated,
        "LinearAttention",
        feeds,
        ["output", "present_state"],
        {"": 27},
        on_device=False,
        q_num_heads=1,
        kv_num_heads=1,
        update_rule="linear",
    )
    assert row.provider != "CUDAExecutionProvider"
    assert "past_state of another element type" in row.declined["CUDAExecutionProvider"]


_FLEX = {"": 26, "ai.onnx.preview": 1}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_flex_attention_grouped_query_and_value_size(emulated: Any, dtype: Any) -> None:
    rng = np.random.default_rng(9)
    feeds = {
        "Q": rng.random((2, 4, 3, 8)).astype(dtype),
        "K": rng.random((2, 2, 5, 8)).astype(dtype),
        "V": rng.random((2, 2, 5, 6)).astype(dtype),
    }
    _run_single_node(
        emulated, "FlexAttention", feeds, ["Y"], _FLEX, domain="ai.onnx.preview", scale=0.3
    )


def test_flex_attention_runs_its_modifiers_on_the_device(emulated: Any) -> None:
    rng = np.random.default_rng(10)
    x = helper.make_tensor_value_info("s", TensorProto.FLOAT, ["B", "H", "L", "S"])
    y = helper.make_tensor_value_info("t", TensorProto.FLOAT, ["B", "H", "L", "S"])
    cap = helper.make_tensor("cap", TensorProto.FLOAT, [], [0.8])
    score_mod = helper.make_graph(
        [
            helper.make_node("Div", ["s", "cap"], ["d"]),
            helper.make_node("Tanh", ["d"], ["e"]),
            helper.make_node("Mul", ["e", "cap"], ["t"]),
        ],
        "softcap",
        [x],
        [y],
        [cap],
    )
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    prob_mod = helper.make_graph(
        [helper.make_node("Mul", ["s", "half"], ["t"])], "scale", [x], [y], [half]
    )
    feeds = {
        "Q": rng.random((1, 2, 3, 4)).astype(np.float32),
        "K": rng.random((1, 2, 3, 4)).astype(np.float32),
        "V": rng.random((1, 2, 3, 4)).astype(np.float32),
    }
    _run_single_node(
        emulated,
        "FlexAttention",
        feeds,
        ["Y"],
        _FLEX,
        domain="ai.onnx.preview",
        score_mod=score_mod,
        prob_mod=prob_mod,
    )


def test_flex_attention_in_double_is_declined(emulated: Any) -> None:
    feeds = {k: np.ones((1, 1, 2, 2)) for k in ("Q", "K", "V")}
    row = _run_single_node(
        emulated, "FlexAttention", feeds, ["Y"], _FLEX, domain="ai.onnx.preview", on_device=False
    )
    assert row.provider != "CUDAExecutionProvider"
    assert "tensor(double)" in row.declined["CUDAExecutionProvider"]
