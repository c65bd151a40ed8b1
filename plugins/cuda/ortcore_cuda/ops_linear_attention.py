"""LinearAttention (ai.onnx 27): every update rule (``linear``, ``gated``,
``delta``, ``gated_delta``), grouped-query heads, a decay per head or per key
dimension, beta per head or shared, ``past_state`` of the element type; the
recurrence runs token by token in one kernel, one thread per state column,
the state in float32.

CausalConvWithState (ai.onnx 27): depthwise causal 1-D convolution with an
optional bias and ``past_state``, activation ``none``, ``silu`` or ``swish``.

Kernels: :mod:`ortcore_cuda.kernels.attention`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import attention as ak
from .kernels import elementwise as ew
from .ops_common import device_of
from .tensor import CudaTensor

__all__ = ["decline", "register"]

_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    reg.kernel("LinearAttention", since=27, types={"T": _FLOATS, "S": _FLOATS})(_linear_attention)
    reg.kernel("CausalConvWithState", since=27, types={"T": _FLOATS})(_causal_conv)


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "LinearAttention":
        return _decline_linear(node)
    if node.op_type == "CausalConvWithState":
        return _decline_causal_conv(node)
    return None


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def _given(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def _rank(v: ir.Value | None) -> int | None:
    return len(v.shape) if v is not None and v.shape is not None else None


# -- LinearAttention ---------------------------------------------------------------------------

_RULES = {"linear": (0, 0), "gated": (1, 0), "delta": (0, 1), "gated_delta": (1, 1)}
"""update_rule -> (gating, delta correction)."""


def _decline_linear(node: ir.Node) -> str | None:
    rule = str(_attr(node, "update_rule", "gated_delta"))
    if rule not in _RULES:
        return f"CUDA: LinearAttention update_rule {rule!r}"
    hq, hkv = (int(_attr(node, a, 0) or 0) for a in ("q_num_heads", "kv_num_heads"))
    if hq <= 0 or hkv <= 0 or hq % hkv:
        return f"CUDA: LinearAttention with q_num_heads={hq}, kv_num_heads={hkv}"
    q, k, v = (_given(node, i) for i in range(3))
    if q is None or k is None or v is None:
        return "CUDA: LinearAttention without query, key or value"
    if any(_rank(x) != 3 for x in (q, k, v)):
        return "CUDA: LinearAttention query, key and value not all of rank 3"
    gating, delta = _RULES[rule]
    decay, beta = _given(node, 4), _given(node, 5)
    if (decay is not None) != bool(gating) or (beta is not None) != bool(delta):
        return f"CUDA: LinearAttention update_rule {rule!r} with the wrong decay/beta inputs"
    for x in (decay, beta):
        if x is not None and _rank(x) != 3:
            return "CUDA: LinearAttention decay or beta not of rank 3"
    past = _given(node, 3)
    if past is not None and past.dtype != q.dtype:
        return "CUDA: LinearAttention past_state of another element type than query"
    if any(x is not None and x.dtype != q.dtype for x in (k, v, decay, beta)):
        return "CUDA: LinearAttention inputs of different element types"
    return None


def _linear_attention(info: NodeInfo) -> Any:
    cuda = device_of(info)
    rule = str(info.attr("update_rule", "gated_delta"))
    hq = int(info.attr("q_num_heads", 0) or 0)
    hkv = int(info.attr("kv_num_heads", 0) or 0)
    scale_attr = float(info.attr("scale", 0.0) or 0.0)
    if rule not in _RULES or hq <= 0 or hkv <= 0 or hq % hkv:
        raise ValueError(f"{info.describe()}: update_rule {rule!r}, heads {hq}/{hkv}")
    gating, delta = _RULES[rule]

    def compute(
        q: CudaTensor,
        k: CudaTensor,
        v: CudaTensor,
        past: CudaTensor | None = None,
        decay: CudaTensor | None = None,
        beta: CudaTensor | None = None,
    ) -> tuple[CudaTensor, CudaTensor]:
        if q.dtype not in _SUFFIX or any(
            x is not None and x.dtype != q.dtype for x in (k, v, past, decay, beta)
        ):
            raise TypeError(f"{info.describe()}: inputs of different element types")
        if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
            raise ValueError(f"{info.describe()}: query {q.shape}, key {k.shape}, value {v.shape}")
        batch, length, _ = q.shape
        if q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
            raise ValueError(f"{info.describe()}: hidden sizes not divisible by the heads")
        dk, dv = q.shape[2] // hq, v.shape[2] // hkv
        if k.shape != (batch, length, hkv * dk) or v.shape[:2] != (batch, length):
            raise ValueError(f"{info.describe()}: query {q.shape}, key {k.shape}, value {v.shape}")
        if (decay is not None) != bool(gating) or (beta is not None) != bool(delta):
            raise ValueError(f"{info.describe()}: update_rule {rule!r} and decay/beta")
        per_key = 0
        if decay is not None:
            if decay.ndim != 3 or decay.shape[:2] != (batch, length):
                raise ValueError(f"{info.describe()}: decay {decay.shape}")
            if decay.shape[2] == hkv * dk:
                per_key = 1
            elif decay.shape[2] != hkv:
                raise ValueError(f"{info.describe()}: decay {decay.shape} for {hkv} heads of {dk}")
        beta_heads = hkv
        if beta is not None:
            if beta.ndim != 3 or beta.shape[:2] != (batch, length) or beta.shape[2] not in (1, hkv):
                raise ValueError(f"{info.describe()}: beta {beta.shape}")
            beta_heads = beta.shape[2]
        state_shape = (batch, hkv, dk, dv)
        if past is not None and past.shape != state_shape:
            raise ValueError(f"{info.describe()}: past_state {past.shape}, not {state_shape}")
        scale = scale_attr if scale_attr != 0.0 else 1.0 / float(np.sqrt(dk))
        y = cuda.empty((batch, length, hq * dv), q.dtype)
        present = cuda.empty(state_shape, q.dtype)
        n = batch * hkv * dv
        if n and dk:
            work = cuda.empty(state_shape, np.float32)
            args = ak.LINEAR.pack(
                batch=batch,
                len=length,
                q_heads=hq,
                kv_heads=hkv,
                dk=dk,
                dv=dv,
                gating=gating,
                delta=delta,
                decay_per_key=per_key,
                beta_heads=beta_heads,
            )
            cuda.launch_over(
                ak.linear_attention_kernel(_SUFFIX[q.dtype]),
                n,
                q.ptr,
                k.ptr,
                v.ptr,
                past.ptr if past is not None else 0,
                decay.ptr if decay is not None else 0,
                beta.ptr if beta is not None else 0,
                y.ptr,
                work.ptr,
                present.ptr,
                scale,
                args,
                threads=min(256, max(32, n)),
            )
        else:  # no state (a zero dimension): zeros out
            for t in (y, present):
                if t.size:
                    cuda.launch_over(ew.fill_kernel(_SUFFIX[t.dtype]), t.size, t.ptr, t.size, 0.0)
        return y, present

    return compute


# -- CausalConvWithState -----------------------------------------------------------------------


def _decline_causal_conv(node: ir.Node) -> str | None:
    act = str(_attr(node, "activation", "none"))
    if act not in ("none", "silu", "swish"):
        return f"CUDA: CausalConvWithState activation {act!r}"
    x, w = _given(node, 0), _given(node, 1)
    if _rank(x) != 3 or _rank(w) != 3:
        return "CUDA: CausalConvWithState input or weight not of rank 3"
    for i in (1, 2, 3):
        other = _given(node, i)
        if other is not None and x is not None and other.dtype != x.dtype:
            return "CUDA: CausalConvWithState inputs of different element types"
    return None


def _causal_conv(info: NodeInfo) -> Any:
    cuda = device_of(info)
    act = str(info.attr("activation", "none"))
    silu = int(act in ("silu", "swish"))

    def compute(
        x: CudaTensor,
        w: CudaTensor,
        bias: CudaTensor | None = None,
        past: CudaTensor | None = None,
    ) -> tuple[CudaTensor, CudaTensor]:
        if x.dtype not in _SUFFIX or any(
            t is not None and t.dtype != x.dtype for t in (w, bias, past)
        ):
            raise TypeError(f"{info.describe()}: inputs of different element types")
        if x.ndim != 3 or w.ndim != 3:
            raise ValueError(f"{info.describe()}: input {x.shape}, weight {w.shape}")
        batch, channels, length = x.shape
        k = w.shape[2]
        if w.shape[:2] != (channels, 1) or k < 1:
            raise ValueError(f"{info.describe()}: weight {w.shape} for {channels} channels")
        if bias is not None and bias.shape != (channels,):
            raise ValueError(f"{info.describe()}: bias {bias.shape} for {channels} channels")
        if past is not None and past.shape != (batch, channels, k - 1):
            raise ValueError(f"{info.describe()}: past_state {past.shape}, kernel {k}")
        y = cuda.empty(x.shape, x.dtype)
        state = cuda.empty((batch, channels, k - 1), x.dtype)
        rows = batch * channels
        n = max(rows * length, rows * (k - 1))
        if n:
            cuda.launch_over(
                ak.causal_conv_kernel(_SUFFIX[x.dtype]),
                n,
                x.ptr,
                w.ptr,
                bias.ptr if bias is not None else 0,
                past.ptr if past is not None else 0,
                y.ptr,
                state.ptr,
                rows,
                channels,
                length,
                k,
                silu,
                threads=min(256, max(32, n)),
            )
        return y, state

    return compute
