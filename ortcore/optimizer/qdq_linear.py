"""QDQ fusions of the ops with weights: Conv, MatMul and Gemm.

- ``DQ(x), DQ(w) [, DQ(bias int32)] -> Conv -> Q`` becomes ``QLinearConv``:
  ``x`` per tensor, ``w`` per tensor or per output channel (axis 0), any
  ``group`` (depthwise included). The bias is used as it is where it has
  scale ``x_scale * w_scale`` and zero point 0 (as onnxruntime's quantizer
  writes it), else requantized to that scale (a constant bias only).
- ``DQ(a), DQ(b) -> MatMul -> Q`` becomes ``QLinearMatMul``: ``a`` per
  tensor, ``b`` per tensor or per column (its last axis).
- ``DQ(a), DQ(b) [, DQ(c)] -> Gemm [-> Q]`` becomes com.microsoft ``QGemm``
  (quantized output with a Q, float output without): ``b`` per tensor or per
  column; the bias is requantized to ``alpha / beta * a_scale * b_scale``
  where it does not have that scale already.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ._common import attr
from ._fusion import FusionContext, anchored, op
from .qdq_common import (
    FLOAT,
    INT32,
    MS_DOMAIN,
    QDQ_OPS,
    QParams,
    as_value,
    dq_of,
    q_after,
    quantized_bias,
    rank_of,
    replace_group,
    zero_point_of,
)

__all__ = ["fuse_qdq_conv", "fuse_qdq_gemm", "fuse_qdq_matmul"]


def _scalar_scales(*ps: QParams) -> bool:
    return all(p.per_tensor for p in ps)


@anchored("Conv", needs=QDQ_OPS)
def fuse_qdq_conv(ctx: FusionContext) -> int:
    """Replace ``DQ -> Conv -> Q`` groups with QLinearConv; returns fusions done."""
    done = 0
    for conv in list(ctx.graph):
        if conv.graph is not ctx.graph or not op(conv, "Conv") or len(conv.inputs) < 2:
            continue
        x, w = dq_of(ctx, conv.inputs[0]), dq_of(ctx, conv.inputs[1])
        y = q_after(ctx, conv.outputs[0])
        if x is None or w is None or y is None or not _scalar_scales(x, y):
            continue
        if not w.per_tensor and (w.axis != 0 or rank_of(w.quantized) is None):
            continue  # per input channel: QLinearConv has no such scale
        inputs: list[ir.Node] = [x.node, w.node]
        bias: ir.Value | np.ndarray | None = None
        b = conv.inputs[2] if len(conv.inputs) > 2 else None
        if b is not None:
            found = quantized_bias(ctx, b, x.scales.reshape(-1) * w.scales.reshape(-1))
            if found is None:
                continue
            bias, b_node = found
            inputs += [b_node] if b_node is not None else []
        body = [conv, y.node]
        types = [x.dtype, FLOAT, x.dtype, w.dtype, FLOAT, w.dtype, FLOAT, y.dtype]
        if bias is not None:
            types.append(INT32)
        if not ctx.can_emit(
            [*inputs, *body], "QLinearConv", "", input_types=types, output_types=[y.dtype]
        ):
            continue
        args: list[ir.Value | None] = [
            x.quantized, x.scale, zero_point_of(ctx, x), w.quantized, w.scale,
            zero_point_of(ctx, w), y.scale, zero_point_of(ctx, y),
        ]  # fmt: skip
        if bias is not None:
            args.append(as_value(ctx, bias, "bias"))
        fused = ir.Node(
            "", "QLinearConv", args, list(conv.attributes.values()),
            name=f"{conv.name}_quant", num_outputs=1,
        )  # fmt: skip
        replace_group(ctx, inputs, body, fused, y.quantized)
        done += 1
    return done


def _per_column(p: QParams, column_axis: int) -> bool:
    """Whether ``p`` is per tensor, or per ``column_axis`` of a rank-2+ value."""
    if p.per_tensor:
        return True
    rank = rank_of(p.quantized)
    return rank is not None and rank >= 2 and p.axis == column_axis % rank


@anchored("MatMul", needs=QDQ_OPS)
def fuse_qdq_matmul(ctx: FusionContext) -> int:
    """Replace ``DQ -> MatMul -> Q`` groups with QLinearMatMul; returns fusions done."""
    done = 0
    for mm in list(ctx.graph):
        if mm.graph is not ctx.graph or not op(mm, "MatMul"):
            continue
        a, b = dq_of(ctx, mm.inputs[0]), dq_of(ctx, mm.inputs[1])
        y = q_after(ctx, mm.outputs[0])
        if a is None or b is None or y is None or not _scalar_scales(a, y):
            continue
        if not _per_column(b, -1):
            continue
        types = [a.dtype, FLOAT, a.dtype, b.dtype, FLOAT, b.dtype, FLOAT, y.dtype]
        inputs, body = [a.node, b.node], [mm, y.node]
        if not ctx.can_emit(
            [*inputs, *body], "QLinearMatMul", "", input_types=types, output_types=[y.dtype]
        ):
            continue
        args = [a.quantized, a.scale, zero_point_of(ctx, a), b.quantized, b.scale,
                zero_point_of(ctx, b), y.scale, zero_point_of(ctx, y)]  # fmt: skip
        fused = ir.Node("", "QLinearMatMul", args, name=f"{mm.name}_quant", num_outputs=1)
        replace_group(ctx, inputs, body, fused, y.quantized)
        done += 1
    return done


@anchored("Gemm", needs=QDQ_OPS)
def fuse_qdq_gemm(ctx: FusionContext) -> int:
    """Replace ``DQ -> Gemm [-> Q]`` groups with com.microsoft QGemm; returns
    fusions done."""
    done = 0
    for gemm in list(ctx.graph):
        if gemm.graph is not ctx.graph or not op(gemm, "Gemm"):
            continue
        a, b = dq_of(ctx, gemm.inputs[0]), dq_of(ctx, gemm.inputs[1])
        if a is None or b is None or not a.per_tensor or gemm.outputs[0].dtype != FLOAT:
            continue
        trans_b = int(attr(gemm, "transB", 0))  # type: ignore[call-overload]
        if not _per_column(b, 0 if trans_b else 1):
            continue
        alpha = float(attr(gemm, "alpha", 1.0))  # type: ignore[arg-type]
        beta = float(attr(gemm, "beta", 1.0))  # type: ignore[arg-type]
        y = q_after(ctx, gemm.outputs[0])
        if y is not None and not y.per_tensor:
            continue
        inputs: list[ir.Node] = [a.node, b.node]
        bias: ir.Value | np.ndarray | None = None
        c = gemm.inputs[2] if len(gemm.inputs) > 2 else None
        if c is not None:
            if beta == 0.0:
                continue  # C is ignored: leave such a rare model alone
            scale = alpha / beta * a.scales.reshape(-1) * b.scales.reshape(-1)
            found = quantized_bias(ctx, c, scale.astype(np.float32))
            if found is None:
                continue
            bias, c_node = found
            inputs += [c_node] if c_node is not None else []
        body = [gemm] if y is None else [gemm, y.node]
        out_type = FLOAT if y is None else y.dtype
        types = [
            a.dtype,
            FLOAT,
            a.dtype,
            b.dtype,
            FLOAT,
            b.dtype,
            INT32 if bias is not None else None,
        ]
        if y is not None:
            types += [FLOAT, y.dtype]
        if not ctx.can_emit(
            [*inputs, *body], "QGemm", MS_DOMAIN, input_types=types, output_types=[out_type]
        ):
            continue
        args: list[ir.Value | None] = [a.quantized, a.scale, zero_point_of(ctx, a),
                                       b.quantized, b.scale, zero_point_of(ctx, b),
                                       as_value(ctx, bias, "bias")]  # fmt: skip
        if y is not None:
            args += [y.scale, zero_point_of(ctx, y)]
        while args[-1] is None:
            args.pop()
        attrs = [
            ir.AttrInt64("transA", int(attr(gemm, "transA", 0))),  # type: ignore[call-overload]
            ir.AttrInt64("transB", trans_b),
            ir.AttrFloat32("alpha", alpha),
        ]
        fused = ir.Node(MS_DOMAIN, "QGemm", args, attrs, name=f"{gemm.name}_quant", num_outputs=1)
        replace_group(ctx, inputs, body, fused, body[-1].outputs[0])
        done += 1
    return done
