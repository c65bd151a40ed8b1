"""Attention (ai.onnx 23, 24 and 25) on the device: QK^T by the provider's batched GEMM,
masks and softmax in one kernel, then by V.

Covered: float32 and float16; 3-D inputs ``(batch, seq, heads * head_size)``
with ``q_num_heads``/``kv_num_heads`` and 4-D inputs ``(batch, heads, seq,
head_size)``; grouped-query attention (each KV head serves ``q_heads /
kv_heads`` consecutive query heads, one strided-batched GEMM per step: the
query heads of one KV head are consecutive rows); ``scale``, ``softcap``;
a boolean or float ``attn_mask`` of rank 1 to 4 (broadcast, and shorter than
the keys: the missing keys are masked); ``is_causal`` (bottom-right: query
``i`` attends key ``j`` when ``j <= i + offset``, the offset the past length,
or ``nonpad_kv_seqlen[b] - q_len``); ``past_key``/``past_value`` with the
``present_key``/``present_value`` outputs; ``nonpad_kv_seqlen``;
``left_window_size``/``right_window_size`` (opset 25); ``qk_matmul_output``
in modes 0 to 3; ``softmax_precision`` (the softmax is always computed in
float32). A row with no key attended gives zeros, as ONNX says.

RotaryEmbedding (ai.onnx 23): 3-D inputs with ``num_heads`` and 4-D inputs;
``rotary_embedding_dim``, ``interleaved``; ``position_ids`` into caches of
``(max_position, rotary_embedding_dim / 2)``, or caches of ``(batch, seq,
rotary_embedding_dim / 2)``.

The linear-attention ops are :mod:`ortcore_cuda.ops_linear_attention`,
FlexAttention :mod:`ortcore_cuda.ops_flex_attention`.

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
from .kernels.rows import row_threads
from .ops_common import device_of
from .tensor import CudaTensor

__all__ = ["decline", "register"]

_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
_MASKS = (ir.DataType.BOOL, *_FLOATS)
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    reg.kernel("Attention", since=23, types={"T1": _FLOATS, "T2": _FLOATS, "U": _MASKS})(_attention)
    reg.kernel("RotaryEmbedding", since=23, types={"T": _FLOATS}, input_memory={3: "host"})(_rotary)


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def _given(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def _produced(node: ir.Node, index: int) -> bool:
    """Whether output ``index`` of ``node`` exists (is named)."""
    return index < len(node.outputs) and bool(node.outputs[index].name)


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "RotaryEmbedding":
        return _decline_rotary(node)
    if node.op_type != "Attention":
        return None
    q, k, v = (_given(node, i) for i in range(3))
    if q is None or k is None or v is None:
        return "CUDA: Attention without Q, K or V"
    ranks = [len(x.shape) if x.shape is not None else None for x in (q, k, v)]
    if ranks[0] not in (3, 4) or ranks[1] != ranks[0] or ranks[2] != ranks[0]:
        return f"CUDA: Attention of Q, K, V of ranks {ranks} (3-D or 4-D, all alike)"
    if q.dtype is None or q.dtype != k.dtype or q.dtype != v.dtype:
        return "CUDA: Attention with Q, K and V of different element types"
    heads = [_attr(node, a, None) for a in ("q_num_heads", "kv_num_heads")]
    if ranks[0] == 3 and None in heads:
        return "CUDA: 3-D Attention without q_num_heads and kv_num_heads"
    if ranks[0] == 4 and heads != [None, None] and graph.opset("") >= 25:
        return "CUDA: 4-D Attention with q_num_heads or kv_num_heads (invalid from opset 25)"
    mask = _given(node, 3)
    if mask is not None:
        if mask.shape is None or not 1 <= len(mask.shape) <= 4:
            return "CUDA: Attention mask of unknown rank or of rank over 4"
        if mask.dtype not in (ir.DataType.BOOL, q.dtype):
            return "CUDA: Attention float mask of another element type than Q"
    past_k, past_v = _given(node, 4), _given(node, 5)
    if (past_k is None) != (past_v is None):
        return "CUDA: Attention with only one of past_key and past_value"
    for past in (past_k, past_v):
        if past is not None and (past.shape is None or len(past.shape) != 4):
            return "CUDA: Attention past_key/past_value not of rank 4"
        if past is not None and past.dtype != q.dtype:
            return "CUDA: Attention past of another element type than Q"
    nonpad = _given(node, 6)
    if nonpad is not None and past_k is not None:
        return "CUDA: Attention with both nonpad_kv_seqlen and a past cache"
    if _produced(node, 3):
        mode = int(_attr(node, "qk_matmul_output_mode", 0))
        if mode not in (0, 1, 2, 3):
            return f"CUDA: Attention qk_matmul_output_mode {mode}"
        if mode == 0 and float(_attr(node, "softcap", 0.0)) > 0:
            # the spec says the raw QK^T, onnx's reference gives it after softcap
            return "CUDA: Attention qk_matmul_output mode 0 with softcap (ambiguous)"
    return None


def _strides4(shape: tuple[int, ...], heads: int, three_d: bool) -> tuple[list[int], list[int]]:
    """Dims ``(batch, heads, seq, head_size)`` of Q, K or V and the element
    strides of that view of the contiguous tensor (3-D: ``(batch, seq, heads * head_size)``)."""
    if three_d:
        b, s, hidden = shape
        d = hidden // heads
        return [b, heads, s, d], [s * hidden, d, hidden, 1]
    b, h, s, d = shape
    return [b, h, s, d], [h * s * d, s * d, d, 1]


def _attention(info: NodeInfo) -> Any:
    cuda = device_of(info)
    node = info.node
    q_heads_attr = info.attr("q_num_heads")
    kv_heads_attr = info.attr("kv_num_heads")
    scale_attr = info.attr("scale")
    causal = int(info.attr("is_causal", 0))
    softcap = float(info.attr("softcap", 0.0))
    mode = int(info.attr("qk_matmul_output_mode", 0))
    left = int(info.attr("left_window_size", -1))
    right = int(info.attr("right_window_size", -1))
    wanted = [_produced(node, i) for i in range(info.num_outputs)]

    def fill_zero(t: CudaTensor) -> None:
        if t.size:
            cuda.launch_over(ew.fill_kernel(_SUFFIX[t.dtype]), t.size, t.ptr, t.size, 0.0)

    def heads(src: int, dims: list[int], strides: list[int], out: CudaTensor, s: float) -> None:
        if out.size:
            cuda.launch_over(
                ak.heads_kernel(_SUFFIX[out.dtype]),
                out.size,
                src,
                out.ptr,
                out.size,
                dims[1],
                dims[2],
                dims[3],
                *strides,
                s,
            )

    def cache(
        past: CudaTensor | None, x: CudaTensor, dims: list[int], strides: list[int]
    ) -> CudaTensor:
        """``concat(past, x)`` along the sequence, contiguous ``(batch, heads, seq, size)``."""
        b, h, s, d = dims
        p = past.shape[2] if past is not None else 0
        if past is not None and (past.shape[0], past.shape[1], past.shape[3]) != (b, h, d):
            raise ValueError(f"{info.describe()}: past of shape {past.shape} for {dims}")
        out = cuda.empty((b, h, p + s, d), x.dtype)
        out_strides = ew.contiguous(out.shape)
        item = x.dtype.itemsize
        if past is not None and past.size:
            cuda.strided_copy(
                past.ptr, out.ptr, past.shape, ew.contiguous(past.shape), out_strides, item
            )
        if x.size:
            cuda.strided_copy(x.ptr, out.ptr + p * d * item, dims, strides, out_strides, item)
        return out

    def compute(
        q: CudaTensor,
        k: CudaTensor,
        v: CudaTensor,
        mask: CudaTensor | None = None,
        past_key: CudaTensor | None = None,
        past_value: CudaTensor | None = None,
        nonpad: CudaTensor | None = None,
    ) -> tuple[CudaTensor | None, ...]:
        if not (q.dtype == k.dtype == v.dtype) or q.dtype not in _SUFFIX:
            raise TypeError(f"{info.describe()}: Q, K, V of {q.dtype}, {k.dtype}, {v.dtype}")
        three_d = q.ndim == 3
        if three_d:
            hq, hkv = int(q_heads_attr), int(kv_heads_attr)
            if q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
                raise ValueError(f"{info.describe()}: hidden sizes not divisible by the heads")
        else:
            hq, hkv = q.shape[1], k.shape[1]
        qd, qs = _strides4(q.shape, hq, three_d)
        kd, ks = _strides4(k.shape, hkv, three_d)
        vd, vs = _strides4(v.shape, hkv, three_d)
        batch, _, q_len, size = qd
        v_size = vd[3]
        if kd[0] != batch or vd[0] != batch or kd[3] != size or vd[1:3] != kd[1:3]:
            raise ValueError(f"{info.describe()}: Q {q.shape}, K {k.shape}, V {v.shape}")
        if hkv == 0 or hq % hkv:
            raise ValueError(f"{info.describe()}: {hq} query heads for {hkv} key/value heads")
        reps = hq // hkv
        past_len = past_key.shape[2] if past_key is not None else 0
        kv_len = past_len + kd[2]
        dtype = q.dtype
        suffix = _SUFFIX[dtype]

        scale = float(scale_attr) if scale_attr is not None else 1.0 / np.sqrt(size)
        s = float(dtype.type(np.sqrt(np.float64(scale))))  # Q and K each scaled by sqrt(scale)

        # keys and values, the past first
        present_key = present_value = None
        if past_key is not None:
            present_key = cache(past_key, k, kd, ks)
            key_src, key_strides = present_key.ptr, ew.contiguous(present_key.shape)
        else:
            key_src, key_strides = k.ptr, ks
            if len(wanted) > 1 and wanted[1]:
                present_key = cache(None, k, kd, ks)
        if past_value is not None or three_d or (len(wanted) > 2 and wanted[2]):
            present_value = cache(past_value, v, vd, vs)
            values = present_value
        else:
            values = v
        if values.shape[2] != kv_len:
            raise ValueError(f"{info.describe()}: keys and values of other lengths")

        qh = cuda.empty((batch, hq, q_len, size), dtype)
        heads(q.ptr, qd, qs, qh, s)
        kh = cuda.empty((batch, hkv, kv_len, size), dtype)
        heads(key_src, [batch, hkv, kv_len, size], key_strides, kh, s)

        # scores: per (batch, kv head), its query heads' rows times its keys
        scores = cuda.empty((batch, hq, q_len, kv_len), dtype)
        m, groups = reps * q_len, batch * hkv
        if scores.size and size == 0:
            fill_zero(scores)
        elif scores.size:
            cuda.backend.gemm(
                dtype,
                False,
                True,
                m,
                kv_len,
                size,
                1.0,
                qh.ptr,
                m * size,
                kh.ptr,
                kv_len * size,
                0.0,
                scores.ptr,
                m * kv_len,
                groups,
                cuda.stream,
            )

        args = _rows_args(
            info, scores.shape, mask, nonpad, batch, dtype, causal, past_len, left, right
        )
        args["mode"] = mode
        probs = cuda.empty(scores.shape, dtype)
        qk_out = cuda.empty(scores.shape, dtype) if len(wanted) > 3 and wanted[3] else None
        rows = batch * hq * q_len
        if scores.size:
            cuda.launch(
                ak.softmax_kernel(suffix),
                max(1, min(rows, cuda.max_grid)),
                row_threads(kv_len),
                scores.ptr,
                probs.ptr,
                qk_out.ptr if qk_out is not None else 0,
                mask.ptr if mask is not None else 0,
                nonpad.ptr if nonpad is not None else 0,
                softcap,
                ak.ROWS.pack(**args),
            )

        y = cuda.empty((batch, hq, q_len, v_size), dtype)
        if y.size and kv_len == 0:
            fill_zero(y)
        elif y.size:
            cuda.backend.gemm(
                dtype,
                False,
                False,
                m,
                v_size,
                kv_len,
                1.0,
                probs.ptr,
                m * kv_len,
                values.ptr,
                kv_len * v_size,
                0.0,
                y.ptr,
                m * v_size,
                groups,
                cuda.stream,
            )
        if three_d:
            y = cuda.transpose(y, (0, 2, 1, 3))
            y.shape = (batch, q_len, hq * v_size)
        out: list[CudaTensor | None] = [y, present_key, present_value, qk_out]
        return tuple(out[i] if wanted[i] else None for i in range(len(wanted)))

    return compute


def _rows_args(
    info: NodeInfo,
    scores: tuple[int, ...],
    mask: CudaTensor | None,
    nonpad: CudaTensor | None,
    batch: int,
    dtype: np.dtype,
    causal: int,
    past_len: int,
    left: int,
    right: int,
) -> dict[str, int]:
    """The fields of :data:`~ortcore_cuda.kernels.attention.ROWS` but ``mode``."""
    _, hq, q_len, kv_len = scores
    args = {
        "rows": batch * hq * q_len,
        "q_heads": hq,
        "q_len": q_len,
        "kv_len": kv_len,
        "mask_kind": ak.MASK_NONE,
        "mask_b": 0,
        "mask_h": 0,
        "mask_q": 0,
        "mask_len": 0,
        "causal": causal,
        "offset": past_len,
        "left": left,
        "right": right,
    }
    if mask is not None:
        if mask.ndim < 1 or mask.ndim > 4:
            raise ValueError(f"{info.describe()}: a mask of rank {mask.ndim}")
        dims = (1,) * (4 - mask.ndim) + tuple(mask.shape)
        strides = ew.contiguous(dims)
        if dims[3] > kv_len:
            raise ValueError(f"{info.describe()}: a mask of {dims[3]} keys for {kv_len}")
        for axis, (d, want) in enumerate(zip(dims[:3], (batch, hq, q_len))):
            if d not in (1, want):
                raise ValueError(f"{info.describe()}: mask {mask.shape} for scores {scores}")
            args[("mask_b", "mask_h", "mask_q")[axis]] = strides[axis] if d != 1 else 0
        args["mask_len"] = dims[3]
        if mask.dtype not in (np.dtype(np.bool_), np.dtype(dtype)):
            raise TypeError(f"{info.describe()}: a mask of {mask.dtype} for {dtype}")
        args["mask_kind"] = ak.MASK_BOOL if mask.dtype == np.bool_ else ak.MASK_FLOAT
    if nonpad is not None:
        if nonpad.dtype != np.int64 or nonpad.size != batch:
            raise ValueError(f"{info.describe()}: nonpad_kv_seqlen {nonpad.shape} for {batch}")
    return args


def _decline_rotary(node: ir.Node) -> str | None:
    x = node.inputs[0] if node.inputs else None
    rank = len(x.shape) if x is not None and x.shape is not None else None
    if rank not in (3, 4):
        return f"CUDA: RotaryEmbedding of rank {rank} (3-D or 4-D)"
    if rank == 3 and not _attr(node, "num_heads", 0):
        return "CUDA: 3-D RotaryEmbedding without num_heads"
    return None


def _rotary(info: NodeInfo) -> Any:
    cuda = device_of(info)
    num_heads = int(info.attr("num_heads", 0) or 0)
    rot_attr = int(info.attr("rotary_embedding_dim", 0) or 0)
    interleaved = int(info.attr("interleaved", 0) or 0)

    def compute(
        x: CudaTensor, cos: CudaTensor, sin: CudaTensor, position_ids: Any = None
    ) -> tuple[CudaTensor]:
        if x.ndim == 4:
            batch, heads, seq, head = x.shape
        elif x.ndim == 3 and num_heads > 0 and x.shape[2] % num_heads == 0:
            batch, seq, heads, head = x.shape[0], x.shape[1], num_heads, x.shape[2] // num_heads
        else:
            raise ValueError(f"{info.describe()}: input {x.shape} with num_heads={num_heads}")
        rot = rot_attr or head
        if rot > head or rot % 2:
            raise ValueError(f"{info.describe()}: rotary_embedding_dim {rot} for heads of {head}")
        half = rot // 2
        if cos.dtype != x.dtype or sin.dtype != x.dtype or cos.shape != sin.shape:
            raise ValueError(f"{info.describe()}: cos_cache {cos.shape}, sin_cache {sin.shape}")
        pos = None
        if position_ids is not None:
            ids = np.asarray(position_ids).astype(np.int64)
            if ids.shape != (batch, seq) or cos.ndim != 2 or cos.shape[1] != half:
                raise ValueError(
                    f"{info.describe()}: position_ids {ids.shape}, cos_cache {cos.shape}"
                    f" for input {x.shape}"
                )
            if ids.size and (ids.min() < 0 or ids.max() >= cos.shape[0]):
                raise IndexError(f"{info.describe()}: position_ids outside the caches")
            pos = cuda.from_host(ids.reshape(-1))
        elif cos.shape != (batch, seq, half):
            raise ValueError(f"{info.describe()}: cos_cache {cos.shape} for input {x.shape}")
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(
                ak.rotary_kernel(_SUFFIX[x.dtype]),
                y.size,
                x.ptr,
                cos.ptr,
                sin.ptr,
                pos.ptr if pos is not None else 0,
                y.ptr,
                y.size,
                head,
                seq,
                heads,
                int(x.ndim == 4),
                rot,
                interleaved,
            )
        return (y,)

    return compute
