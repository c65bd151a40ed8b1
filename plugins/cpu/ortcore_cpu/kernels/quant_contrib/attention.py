"""QAttention: onnxruntime's multi-head self-attention whose input projection
is quantized (what its tool writes for BERT's fused Attention nodes).

``QKV = (input - input_zp)(weight - weight_zp) input_scale weight_scale +
bias`` is one ``int_matmul_to_float`` (the weight's parameters per tensor or
per column of its ``3 * hidden`` columns; a constant weight packed once, the
session's threads, the bias added in the GEMM's epilogue); the attention that follows is
onnxruntime's Attention in float32: scores ``Q K^T * scale`` (``scale``
default ``1/sqrt(head_size)``) plus the mask, softmax, times V.

``mask_index`` may be ``(batch,)`` key lengths (later keys masked), ``(2 *
batch,)`` end then start positions, ``(batch, total)`` or ``(batch, seq,
total)`` 0/1 masks; a masked score gets ``mask_filter_value`` (-10000 by
default) added, and ``unidirectional`` leaves every future key out of the
softmax (as onnxruntime does: a query whose visible keys are all masked
still attends to them, not to the future).
``past`` ``(2, batch, heads, past, head_size)`` is prepended to K and V, and
``present`` returns them.
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._qgemm import int_matmul_to_float
from ..contrib import MS_DOMAIN
from ._params import EIGHT_BIT, check_8bit, per_column, scalar_scale, scalar_zero
from ._weights import ConstantB


def _mask_bias(
    info: NodeInfo, mask: np.ndarray | None, b: int, s: int, total: int, fill: np.float32
) -> np.ndarray:
    """The additive mask, ``(b, 1, s or 1, total)``."""
    bias = np.zeros((b, 1, 1, total), np.float32)
    if mask is None:
        return bias
    m = np.asarray(mask)
    keys = np.arange(total)
    if m.ndim == 1 and m.shape[0] in (b, 2 * b):
        end = m[:b].astype(np.int64)
        start = m[b:].astype(np.int64) if m.shape[0] == 2 * b else np.zeros(b, np.int64)
        masked = (keys[None, :] >= end[:, None]) | (keys[None, :] < start[:, None])
        return np.where(masked, fill, np.float32(0)).reshape(b, 1, 1, total)
    if m.ndim == 2 and m.shape == (b, total):
        return np.where(m > 0, np.float32(0), fill).reshape(b, 1, 1, total)
    if m.ndim == 3 and m.shape == (b, s, total):
        return np.where(m > 0, np.float32(0), fill).reshape(b, 1, s, total)
    raise ValueError(
        f"{info.describe()}: mask_index of shape {m.shape} is none of (batch,) = ({b},), "
        f"(2 * batch,), (batch, total) = ({b}, {total}) or (batch, seq, total) = "
        f"({b}, {s}, {total})"
    )


@registry.kernel("QAttention", domain=MS_DOMAIN, types={0: EIGHT_BIT, 1: EIGHT_BIT})
def qattention(info: NodeInfo) -> Compute:
    """Multi-head self-attention with a quantized input projection (see the
    module docstring)."""
    a = info.attrs
    if "num_heads" not in a:
        raise ValueError(f"{info.describe()}: the num_heads attribute is required")
    heads = int(a["num_heads"])
    causal = bool(a.get("unidirectional", 0))
    fill = np.float32(a.get("mask_filter_value", -10000.0))
    custom_scale = float(a.get("scale", 0.0) or 0.0)
    for unsupported in ("do_rotary", "past_present_share_buffer"):
        if int(a.get(unsupported, 0) or 0):
            raise ValueError(f"{info.describe()}: {unsupported}=1 is not supported")
    packed_weight = ConstantB(info, 1, 7)

    def compute(
        x: np.ndarray,
        weight: np.ndarray,
        bias: np.ndarray,
        input_scale: np.ndarray,
        weight_scale: np.ndarray,
        mask_index: np.ndarray | None = None,
        input_zero: np.ndarray | None = None,
        weight_zero: np.ndarray | None = None,
        past: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        check_8bit(info, x, "input")
        check_8bit(info, weight, "weight")
        if x.ndim != 3 or weight.ndim != 2 or x.shape[2] != weight.shape[0]:
            raise ValueError(
                f"{info.describe()}: input must be (batch, seq, hidden_in) and weight "
                f"(hidden_in, 3 * hidden), got {x.shape} and {weight.shape}"
            )
        b, s, _ = x.shape
        cols = weight.shape[1]
        if cols % 3 or (cols // 3) % heads:
            raise ValueError(
                f"{info.describe()}: weight's {cols} columns are not 3 * num_heads ({heads}) "
                "* head_size"
            )
        hidden = cols // 3
        hd = hidden // heads
        if bias.shape != (cols,):
            raise ValueError(f"{info.describe()}: bias must be ({cols},), got {bias.shape}")
        per_column(info, weight_zero, cols, "weight_zero_point")  # checked; passed as is
        w, packed = packed_weight.get(weight, weight_zero)
        qkv = int_matmul_to_float(
            x,
            scalar_zero(info, input_zero, "input_zero_point", x.dtype),
            float(scalar_scale(info, input_scale, "input_scale")),
            w,
            weight_zero,
            np.asarray(per_column(info, weight_scale, cols, "weight_scale"), np.float32),
            bias,
            threads=packed_weight.product_threads(x, w),
            packed=packed,
        )
        qkv = qkv.reshape(b, s, 3, heads, hd).transpose(2, 0, 3, 1, 4)  # (3, b, h, s, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        past_len = 0
        if past is not None and past.size:
            if past.ndim != 5 or past.shape[:3] != (2, b, heads) or past.shape[4] != hd:
                raise ValueError(
                    f"{info.describe()}: past must be (2, {b}, {heads}, past_len, {hd}), "
                    f"got {past.shape}"
                )
            past_len = past.shape[3]
            k = np.concatenate([past[0].astype(np.float32), k], axis=2)
            v = np.concatenate([past[1].astype(np.float32), v], axis=2)
        total = past_len + s
        scale = np.float32(custom_scale if custom_scale else 1.0 / np.sqrt(hd))
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
        bias_ = _mask_bias(info, mask_index, b, s, total, fill)
        if causal:
            future = np.arange(total)[None, :] > (past_len + np.arange(s))[:, None]
            bias_ = np.where(future, np.float32(-np.inf), bias_)  # left out, not masked
        scores = scores + bias_
        scores = scores - scores.max(axis=-1, keepdims=True) if scores.size else scores
        e = np.exp(scores)
        probs = e / e.sum(axis=-1, keepdims=True)
        out = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, s, hidden)
        out = out.astype(bias.dtype, copy=False)
        if info.num_outputs < 2:
            return (out,)
        present = np.stack([k, v]).astype(bias.dtype, copy=False)
        return out, present

    return compute


__all__ = ["qattention"]
