"""Attention-style ops: Attention, FlexAttention (ai.onnx.preview),
RotaryEmbedding, SwiGLU, LinearAttention, CausalConvWithState.

Attention works on (batch, heads, seq, head_size) tensors (3-D inputs are
split into heads first), builds one additive bias from the mask, causality,
sliding window and padding lengths, and runs two batched matmuls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import Compute, NodeInfo, RunContext, SubgraphRunner, check_terminate
from ep_sdk.dtypes import to_numpy

from . import registry
from ._common import DT, FLOATS, INDEX
from ._versions import per_schema_version

_FLOATS = FLOATS | {DT.BFLOAT16}

_NEG_INF = -np.inf


def _heads(x: np.ndarray, n: int) -> np.ndarray:
    """(B, S, n*D) -> (B, n, S, D)."""
    b, s, hd = x.shape
    if n <= 0 or hd % n:
        raise ValueError(f"hidden size {hd} is not a multiple of num_heads {n}")
    return x.reshape(b, s, n, hd // n).transpose(0, 2, 1, 3)


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; rows that are all -inf give zeros."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)


def _work(dtype: Any) -> Any:
    """Type to compute in: float32 for 16-bit floats, else ``dtype``."""
    return np.dtype(np.float32) if np.dtype(dtype).itemsize < 4 else np.dtype(dtype)


def _precision(elem_type: int) -> np.dtype:
    """numpy type of a ``softmax_precision`` value (bfloat16 computed in float32)."""
    dt = np.dtype(to_numpy(ir.DataType(elem_type)))
    return np.dtype(np.float32) if dt.kind != "f" else dt


def _allowed_bias(allowed: np.ndarray, dtype: Any) -> np.ndarray:
    return np.where(allowed, dtype.type(0), dtype.type(_NEG_INF))


class _AttentionSpec:
    """Attributes of one Attention node."""

    def __init__(self, info: NodeInfo) -> None:
        a = info.attrs
        self.info = info
        self.scale = a.get("scale")
        self.causal = bool(a.get("is_causal", 0))
        self.q_heads = a.get("q_num_heads")
        self.kv_heads = a.get("kv_num_heads")
        self.softcap = float(a.get("softcap", 0.0) or 0.0)
        self.mode = int(a.get("qk_matmul_output_mode", 0))
        self.precision = a.get("softmax_precision")
        self.left = int(a.get("left_window_size", -1))
        self.right = int(a.get("right_window_size", -1))

    def bias(
        self,
        dtype: Any,
        q_len: int,
        kv_len: int,
        mask: np.ndarray | None,
        past_len: int | None,
        nonpad: np.ndarray | None,
    ) -> np.ndarray:
        """Additive bias (broadcastable to (B, H, q, kv)): 0 where allowed, -inf not."""
        bias = np.zeros((q_len, kv_len), dtype)
        if mask is not None:
            pad = kv_len - mask.shape[-1]
            if pad > 0:
                fill = False if mask.dtype == np.bool_ else _NEG_INF
                widths = [(0, 0)] * (mask.ndim - 1) + [(0, pad)]
                mask = np.pad(mask, widths, constant_values=fill)
            if mask.dtype == np.bool_:
                mask = _allowed_bias(mask, dtype)
            bias = bias + mask.astype(dtype, copy=False)
        # Query i sits at absolute position offset + i.
        offset: Any = 0
        if past_len is not None:
            offset = past_len
        elif nonpad is not None:
            offset = nonpad.reshape(-1, 1, 1, 1).astype(np.int64) - q_len
        rows = np.arange(q_len).reshape(q_len, 1) + offset
        cols = np.arange(kv_len).reshape(1, kv_len)
        if self.causal:
            bias = bias + _allowed_bias(cols <= rows, dtype)
        if self.left >= 0:
            bias = bias + _allowed_bias(rows - cols <= self.left, dtype)
        if self.right >= 0:
            bias = bias + _allowed_bias(cols - rows <= self.right, dtype)
        if nonpad is not None:
            valid = cols < nonpad.reshape(-1, 1, 1, 1)
            bias = bias + _allowed_bias(valid, dtype)
        return bias

    def run(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        mask: np.ndarray | None,
        past_k: np.ndarray | None,
        past_v: np.ndarray | None,
        nonpad: np.ndarray | None,
    ) -> tuple[np.ndarray, ...]:
        """Compute (Y, present_key, present_value, qk_output)."""
        out_dtype = q.dtype
        three_d = q.ndim == 3
        if three_d:
            if self.q_heads is None or self.kv_heads is None:
                raise ValueError(f"{self.info.describe()}: 3-D inputs need q/kv_num_heads")
            q = _heads(q, int(self.q_heads))
            k = _heads(k, int(self.kv_heads))
            v = _heads(v, int(self.kv_heads))
        if past_k is not None:
            k = np.concatenate([past_k, k], axis=2)
        if past_v is not None:
            v = np.concatenate([past_v, v], axis=2)
        present_k, present_v = k, v
        wt = work = _work(out_dtype)
        qh, kh = q.shape[1], k.shape[1]
        if qh != kh:
            if qh % kh:
                raise ValueError(f"{self.info.describe()}: {qh} query heads vs {kh} kv heads")
            k = np.repeat(k, qh // kh, axis=1)
            v = np.repeat(v, qh // kh, axis=1)
        scale = 1 / np.sqrt(q.shape[3]) if self.scale is None else float(self.scale)
        qk = (q.astype(work) @ np.swapaxes(k.astype(work), 2, 3)) * wt.type(scale)
        raw = qk
        if self.softcap > 0:
            qk = np.tanh(qk / wt.type(self.softcap)) * wt.type(self.softcap)
        past_len = None if past_k is None else past_k.shape[2]
        bias = self.bias(wt, q.shape[2], k.shape[2], mask, past_len, nonpad)
        scores = qk + bias
        soft_dtype = wt
        if self.precision is not None:
            soft_dtype = _precision(int(self.precision))
        probs = _softmax_rows(scores.astype(soft_dtype))
        masked_rows = np.isneginf(np.max(bias, axis=-1, keepdims=True))
        probs = np.where(masked_rows, 0, probs)
        y = probs.astype(work) @ v.astype(work)
        if three_d:
            y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
        qk_out = (raw, qk, scores, probs)[self.mode] if 0 <= self.mode <= 3 else raw
        return (
            y.astype(out_dtype),
            present_k,
            present_v,
            np.broadcast_to(qk_out, scores.shape).astype(out_dtype),
        )


_ATT_TYPES: dict[str | int, frozenset[DT]] = {"T1": _FLOATS, "T2": _FLOATS}


@per_schema_version("Attention", types=_ATT_TYPES)
def attention(info: NodeInfo) -> Compute:
    """Scaled dot-product attention with GQA, masks, KV cache, softcap,
    causal / sliding-window masking and padded KV lengths (24+)."""
    spec = _AttentionSpec(info)
    n_out = info.num_outputs

    def compute(
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        mask: np.ndarray | None = None,
        past_k: np.ndarray | None = None,
        past_v: np.ndarray | None = None,
        nonpad: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        return spec.run(q, k, v, mask, past_k, past_v, nonpad)[:n_out]

    return compute


@registry.kernel("RotaryEmbedding", since=23, types={"T": _FLOATS, "M": INDEX})
def rotary_embedding(info: NodeInfo) -> Compute:
    """Rotate pairs of features by position-dependent angles (cos/sin caches);
    halves or (``interleaved``) even/odd pairs of the first ``rotary_embedding_dim``."""
    interleaved = bool(info.attrs.get("interleaved", 0))
    rot_dim_attr = int(info.attrs.get("rotary_embedding_dim", 0))
    num_heads = int(info.attrs.get("num_heads", 0))

    def compute(
        x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pos: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        shape = x.shape
        if x.ndim == 4:
            xs = x.transpose(0, 2, 1, 3)  # (B, S, H, D)
        else:
            if num_heads <= 0:
                raise ValueError(f"{info.describe()}: 3-D input needs num_heads")
            xs = x.reshape(shape[0], shape[1], num_heads, -1)
        rot = rot_dim_attr or xs.shape[3]
        if pos is not None:
            cos, sin = cos[pos], sin[pos]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        head = xs[..., :rot]
        if interleaved:
            x1, x2 = head[..., 0::2], head[..., 1::2]
        else:
            x1, x2 = head[..., : rot // 2], head[..., rot // 2 :]
        real = cos * x1 - sin * x2
        imag = sin * x1 + cos * x2
        if interleaved:
            rotated = np.stack([real, imag], axis=-1).reshape(head.shape)
        else:
            rotated = np.concatenate([real, imag], axis=-1)
        out = np.concatenate([rotated.astype(x.dtype), xs[..., rot:]], axis=-1)
        out = out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(shape)
        return (np.ascontiguousarray(out),)

    return compute


@registry.kernel("SwiGLU", since=28, types={"T": _FLOATS})
def swiglu(info: NodeInfo) -> Compute:
    """Y = A * sigmoid(alpha * A) * B (same shapes, no broadcasting)."""
    alpha = float(info.attrs.get("alpha", 1.0))

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if a.shape != b.shape:
            raise ValueError(f"{info.describe()}: shapes {a.shape} and {b.shape} differ")
        w = a.astype(_work(a.dtype))
        gate = w / (1 + np.exp(-alpha * w))
        return ((gate * b).astype(a.dtype),)

    return compute


@registry.kernel("LinearAttention", since=27, types={"T": _FLOATS, "S": _FLOATS})
def linear_attention(info: NodeInfo) -> Compute:
    """Recurrent linear attention (linear / gated / delta / gated_delta
    update rules) with GQA; loops over time steps."""
    a = info.attrs
    rule = str(a.get("update_rule", "gated_delta"))
    hq, hkv = int(a["q_num_heads"]), int(a["kv_num_heads"])
    scale_attr = float(a.get("scale", 0.0) or 0.0)
    gating = rule in ("gated", "gated_delta")
    delta = rule in ("delta", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ValueError(f"{info.describe()}: unknown update_rule {rule!r}")
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise ValueError(f"{info.describe()}: q_num_heads must be a multiple of kv_num_heads")
    n_out = info.num_outputs

    def compute(
        query: np.ndarray,
        key: np.ndarray,
        value: np.ndarray,
        past: np.ndarray | None = None,
        decay: np.ndarray | None = None,
        beta: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        if (gating and decay is None) or (delta and beta is None):
            raise ValueError(f"{info.describe()}: update_rule {rule!r} needs decay/beta")
        b, t, _ = query.shape
        dk = query.shape[2] // hq
        dv = value.shape[2] // hkv
        q = _heads(query, hq).astype(np.float32)
        k = _heads(key, hkv).astype(np.float32)
        v = _heads(value, hkv).astype(np.float32)
        g = None
        if decay is not None:
            per = 1 if decay.shape[2] == hkv else dk
            g = np.exp(decay.astype(np.float32).reshape(b, t, hkv, per).transpose(0, 2, 1, 3))
        bt = None
        if beta is not None:
            bt = beta.astype(np.float32).reshape(b, t, beta.shape[2], 1).transpose(0, 2, 1, 3)
        state = np.zeros((b, hkv, dk, dv), np.float32) if past is None else past.astype(np.float32)
        scale = scale_attr or 1.0 / np.sqrt(dk)
        out = np.zeros((b, hq, t, dv), np.float32)
        group = hq // hkv
        for i in range(t):
            check_terminate()
            kt, vt = k[:, :, i], v[:, :, i]
            if g is not None:
                state = state * g[:, :, i][..., None]
            if bt is not None:
                vt = bt[:, :, i] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
            state = state + kt[..., :, None] * vt[..., None, :]
            read = state if group == 1 else np.repeat(state, group, axis=1)
            out[:, :, i] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, i], read)
        y = out.transpose(0, 2, 1, 3).reshape(b, t, hq * dv).astype(query.dtype)
        present = state.astype(query.dtype if past is None else past.dtype)
        return (y, present)[:n_out]

    return compute


@registry.kernel("CausalConvWithState", since=27, types={"T": _FLOATS})
def causal_conv_with_state(info: NodeInfo) -> Compute:
    """Depthwise causal 1-D convolution over (past_state ++ input), optional
    fused SiLU; also returns the last k-1 positions as the new state."""
    act = str(info.attrs.get("activation", "none"))
    if act not in ("none", "silu", "swish"):
        raise ValueError(f"{info.describe()}: unknown activation {act!r}")
    n_out = info.num_outputs

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        bias: np.ndarray | None = None,
        past: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        b, c, length = x.shape
        k = w.shape[2]
        work = _work(x.dtype)
        if past is None:
            past = np.zeros((b, c, k - 1), x.dtype)
        padded = np.concatenate([past.astype(x.dtype), x], axis=2)
        y = np.zeros((b, c, length), work)
        taps = w.reshape(c, k).astype(work)
        for j in range(k):
            y += taps[None, :, j, None] * padded[:, :, j : j + length]
        if bias is not None:
            y += bias.astype(work)[None, :, None]
        if act != "none":
            y = y.astype(x.dtype).astype(np.float32)
            y = y / (1 + np.exp(-y))
        state = padded[:, :, padded.shape[2] - (k - 1) :]
        return (y.astype(x.dtype), np.ascontiguousarray(state))[:n_out]

    return compute


@registry.kernel(
    "FlexAttention", domain="ai.onnx.preview", since=1, types={"T": _FLOATS}, context=True
)
def flex_attention(info: NodeInfo) -> Compute:
    """Attention on rank-4 inputs with optional ``score_mod`` / ``prob_mod``
    subgraphs applied to the scores and the probabilities."""
    scale_attr = info.attrs.get("scale")
    precision = info.attrs.get("softmax_precision")
    score_mod: SubgraphRunner | None = info.attrs.get("score_mod")
    prob_mod: SubgraphRunner | None = info.attrs.get("prob_mod")

    def modify(ctx: RunContext, graph: SubgraphRunner | None, x: np.ndarray, outer: Any) -> Any:
        if graph is None:
            return x
        values = dict(zip(info.implicit_inputs, outer, strict=True))
        out = graph.run(ctx, [x], [values[n] for n in graph.outer_names])
        return np.asarray(out[0], x.dtype)

    def compute(
        ctx: RunContext, q: np.ndarray, k: np.ndarray, v: np.ndarray, *outer: Any
    ) -> tuple[np.ndarray]:
        hq, hkv = q.shape[1], k.shape[1]
        if hq != hkv:
            if hkv <= 0 or hq % hkv:
                raise ValueError(f"{info.describe()}: {hq} query heads vs {hkv} kv heads")
            k, v = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
        dtype = _work(q.dtype) if precision is None else _precision(int(precision))
        scale = 1 / np.sqrt(q.shape[3]) if scale_attr is None else float(scale_attr)
        scores = (q.astype(dtype) @ np.swapaxes(k.astype(dtype), 2, 3)) * dtype.type(scale)
        scores = modify(ctx, score_mod, scores, outer)
        e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
        probs = modify(ctx, prob_mod, e / np.sum(e, axis=-1, keepdims=True), outer)
        return ((probs @ v.astype(dtype)).astype(v.dtype),)

    return compute
