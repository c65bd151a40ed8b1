"""FlexAttention (ai.onnx.preview 1): float32 and float16 (scores, softmax and
the product by V in float32, as ``softmax_precision``'s default says);
``scale``; grouped-query heads; the ``score_mod`` and ``prob_mod`` subgraphs
run on the float32 scores / probabilities through the core's subgraph plans,
whose nodes run on the device where the provider takes them (the plans take
their feeds and give their outputs on the host, so the scores make a round
trip through the host around each modifier).

Kernels: :mod:`ortcore_cuda.kernels.attention`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo, RunContext, SubgraphRunner

from .kernels import attention as ak
from .kernels import elementwise as ew
from .kernels.rows import row_threads
from .ops_common import device_of
from .tensor import CudaTensor

__all__ = ["decline", "register"]

_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
_PREVIEW = "ai.onnx.preview"


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    reg.kernel("FlexAttention", domain=_PREVIEW, since=1, types={"T1": _FLOATS}, context=True)(
        _flex_attention
    )


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    if node.domain == _PREVIEW and node.op_type == "FlexAttention":
        return _decline_flex(node)
    return None


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def _given(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if index < len(node.inputs) else None


def _rank(v: ir.Value | None) -> int | None:
    return len(v.shape) if v is not None and v.shape is not None else None


def _decline_flex(node: ir.Node) -> str | None:
    q, k, v = (_given(node, i) for i in range(3))
    if q is None or k is None or v is None:
        return "CUDA: FlexAttention without Q, K or V"
    if any(_rank(x) != 4 for x in (q, k, v)):
        return "CUDA: FlexAttention of inputs not all of rank 4"
    if q.dtype not in _FLOATS or k.dtype != q.dtype or v.dtype != q.dtype:
        return f"CUDA: FlexAttention of {q.dtype} (float32 and float16 only)"
    precision = _attr(node, "softmax_precision", None)
    if precision is not None and int(precision) != ir.DataType.FLOAT:
        return f"CUDA: FlexAttention softmax_precision {precision} (float32 only)"
    for name in ("score_mod", "prob_mod"):
        g = _attr(node, name, None)
        if g is None:
            continue
        if len(g.inputs) != 1 or len(g.outputs) != 1:
            return f"CUDA: FlexAttention {name} of {len(g.inputs)} inputs, {len(g.outputs)} outputs"
        for val in (g.inputs[0], g.outputs[0]):
            if val.dtype is not None and val.dtype != ir.DataType.FLOAT:
                return f"CUDA: FlexAttention {name} on {val.dtype} (float32 expected)"
        for inner in g.all_nodes():
            if inner.op_type == "Cast" and any(o.dtype is None for o in inner.outputs):
                # the modifier's values are not type-inferred: a Cast makes values
                # of a type the kernels after it cannot know when they are built
                return f"CUDA: FlexAttention {name} holding a Cast of untyped output"
    return None


def _flex_attention(info: NodeInfo) -> Any:
    cuda = device_of(info)
    scale_attr = info.attr("scale")
    score_mod: SubgraphRunner | None = info.attr("score_mod")
    prob_mod: SubgraphRunner | None = info.attr("prob_mod")
    outer_names = list(info.implicit_inputs)
    f32 = np.dtype(np.float32)

    def cast(x: CudaTensor, dtype: np.dtype) -> CudaTensor:
        if x.dtype == dtype:
            return x
        y = cuda.empty(x.shape, dtype)
        if y.size:
            cuda.launch_over(
                ew.cast_kernel(_SUFFIX[x.dtype], _SUFFIX[np.dtype(dtype)]),
                y.size,
                x.ptr,
                y.ptr,
                y.size,
            )
        return y

    def host(value: Any) -> Any:
        return cuda.to_host(value) if isinstance(value, CudaTensor) else value

    def modify(
        ctx: RunContext, graph: SubgraphRunner | None, x: CudaTensor, outer: Sequence[Any]
    ) -> CudaTensor:
        """``graph(x)``. The core's subgraph plans take their feeds and give
        their outputs on the host (copied to and from the device around the
        subgraph's nodes, which run on the device where the provider took them)."""
        if graph is None:
            return x
        by_name = dict(zip(outer_names, outer, strict=True))
        (out,) = graph.run(ctx, [host(x)], [host(by_name[n]) for n in graph.outer_names])
        if not isinstance(out, CudaTensor):
            out = cuda.from_host(np.asarray(out))
        if out.shape != x.shape or out.dtype != x.dtype:
            raise ValueError(
                f"{info.describe()}: a modifier gave {out.dtype} {out.shape}"
                f" for {x.dtype} {x.shape}"
            )
        return out

    def scaled(x: CudaTensor, s: float) -> CudaTensor:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(
                ak.heads_kernel(_SUFFIX[x.dtype]),
                y.size,
                x.ptr,
                y.ptr,
                y.size,
                *x.shape[1:],
                *ew.contiguous(x.shape),
                s,
            )
        return y

    def compute(
        ctx: RunContext, q: CudaTensor, k: CudaTensor, v: CudaTensor, *outer: Any
    ) -> tuple[CudaTensor]:
        if not (q.dtype == k.dtype == v.dtype) or q.dtype not in _SUFFIX:
            raise TypeError(f"{info.describe()}: Q, K, V of {q.dtype}, {k.dtype}, {v.dtype}")
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise ValueError(f"{info.describe()}: Q {q.shape}, K {k.shape}, V {v.shape}")
        batch, hq, q_len, size = q.shape
        _, hkv, kv_len, _ = k.shape
        v_size = v.shape[3]
        if k.shape[0] != batch or k.shape[3] != size or v.shape[:3] != k.shape[:3]:
            raise ValueError(f"{info.describe()}: Q {q.shape}, K {k.shape}, V {v.shape}")
        if hkv == 0 or hq % hkv:
            raise ValueError(f"{info.describe()}: {hq} query heads for {hkv} key/value heads")
        reps = hq // hkv
        dtype = q.dtype
        scale = float(scale_attr) if scale_attr is not None else 1.0 / np.sqrt(size)
        s = float(dtype.type(np.sqrt(np.float32(scale))))  # Q and K each scaled by sqrt(scale)
        qh, kh = scaled(q, s), scaled(k, s)
        m, groups = reps * q_len, batch * hkv

        raw = cuda.empty((batch, hq, q_len, kv_len), dtype)
        if raw.size and size == 0:
            cuda.launch_over(ew.fill_kernel(_SUFFIX[dtype]), raw.size, raw.ptr, raw.size, 0.0)
        elif raw.size:
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
                raw.ptr,
                m * kv_len,
                groups,
                cuda.stream,
            )
        scores = modify(ctx, score_mod, cast(raw, f32), outer)

        probs = cuda.empty(scores.shape, f32)
        rows = batch * hq * q_len
        if probs.size:
            args = ak.ROWS.pack(
                rows=rows,
                q_heads=hq,
                q_len=q_len,
                kv_len=kv_len,
                mask_kind=ak.MASK_NONE,
                causal=0,
                offset=0,
                left=-1,
                right=-1,
                mode=0,
            )
            cuda.launch(
                ak.softmax_kernel("f32"),
                max(1, min(rows, cuda.max_grid)),
                row_threads(kv_len),
                scores.ptr,
                probs.ptr,
                0,
                0,
                0,
                0.0,
                args,
            )
        probs = modify(ctx, prob_mod, probs, outer)

        values = cast(v, f32)
        y = cuda.empty((batch, hq, q_len, v_size), f32)
        if y.size and kv_len == 0:
            cuda.launch_over(ew.fill_kernel("f32"), y.size, y.ptr, y.size, 0.0)
        elif y.size:
            cuda.backend.gemm(
                f32,
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
        return (cast(y, dtype),)

    return compute
