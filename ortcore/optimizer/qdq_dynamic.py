"""Fusions of integer matrix products with a float result: dynamic
quantization's chains and QDQ MatMuls whose output stays float.

onnxruntime's ``quantize_dynamic`` writes each MatMul as::

    DynamicQuantizeLinear(x) -> (x_q, x_scale, x_zp)
    Mul(x_scale, w_scale) -> scale
    MatMulInteger(x_q, w_q, x_zp, w_zp) -> Cast(to=float) -> Mul(scale) [-> Add(bias)]

(one DynamicQuantizeLinear may feed several MatMuls of the same input.) The
chain from MatMulInteger becomes com.microsoft ``MatMulIntegerToFloat``;
where the DynamicQuantizeLinear feeds only that chain, the whole becomes
``DynamicQuantizeMatMul`` (onnxruntime's MatMulIntegerToFloatFusion and
DynamicQuantizeMatMulFusion). ``DQ(a), DQ(b const) -> MatMul [-> Add(bias)]``
with a float result becomes ``MatMulIntegerToFloat`` too.

A bias is taken in only when it is a float constant of one value per
column of B; ``a``'s scale and zero point must be scalars, ``b``'s scalars
or one per column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ._common import attr_int, known_shape
from ._fusion import FusionContext, anchored, op, other_input
from .qdq_common import (
    FLOAT,
    MS_DOMAIN,
    QDQ_OPS,
    QUANT_TYPES,
    consumed_only_by,
    dq_of,
    new_constant,
    rank_of,
    zero_point_of,
)

__all__ = ["fuse_dq_matmul_to_float", "fuse_matmul_integer_to_float"]


def _columns(b: ir.Value | None) -> int | None:
    """B's number of columns (its last dim), if known."""
    if b is None or b.shape is None or len(b.shape) < 1:
        return None
    n = b.shape[-1]
    return n if isinstance(n, int) else None


def _size(ctx: FusionContext, v: ir.Value | None) -> int | None:
    """The element count of ``v`` (a constant's, or its inferred shape's)."""
    c = ctx.const(v)
    if c is not None:
        return int(c.size) if c.ndim <= 1 else None
    dims = known_shape(v)
    if dims is None or len(dims) > 1:
        return None
    return int(np.prod(dims, dtype=np.int64))


def _scalar_or_columns(ctx: FusionContext, v: ir.Value | None, n: int | None) -> bool:
    size = _size(ctx, v)
    return size == 1 or (size is not None and size == n and n is not None)


def _bias_after(
    ctx: FusionContext, out: ir.Value, n: int | None
) -> tuple[ir.Node, ir.Value] | None:
    """The ``Add`` that alone reads ``out`` and adds a float constant of
    ``n`` values (one per column), and that constant."""
    add = ctx.sole_user(out)
    if add is None or not op(add, "Add") or len(add.inputs) != 2 or n is None:
        return None
    bias = other_input(add, out)
    c = ctx.const(bias)
    if bias is None or bias is out or c is None or c.dtype != np.float32:
        return None
    return (add, bias) if c.shape == (n,) else None


def _emit(
    ctx: FusionContext,
    removed: list[ir.Node],
    op_type: str,
    args: list[ir.Value | None],
    types: Sequence[ir.DataType | None],
    out: ir.Value,
) -> bool:
    if not ctx.can_emit(removed, op_type, MS_DOMAIN, input_types=types, output_types=[FLOAT]):
        return False
    while args and args[-1] is None:
        args.pop()
    fused = ir.Node(MS_DOMAIN, op_type, args, name=f"{removed[-1].name}_quant", num_outputs=1)
    ctx.replace(removed, fused, [(out, fused.outputs[0])], at=removed[-1])
    ctx.model.opset_imports.setdefault(MS_DOMAIN, 1)
    return True


@anchored("MatMulInteger")
def fuse_matmul_integer_to_float(ctx: FusionContext) -> int:
    """Replace ``MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)]`` with
    DynamicQuantizeMatMul or MatMulIntegerToFloat; returns fusions done."""
    done = 0
    for mmi in list(ctx.graph):
        if mmi.graph is not ctx.graph or not op(mmi, "MatMulInteger"):
            continue
        found = _integer_chain(ctx, mmi)
        if found is None:
            continue
        chain, a_scale, b_scale, out = found
        a, b = mmi.inputs[0], mmi.inputs[1]
        a_zp = mmi.inputs[2] if len(mmi.inputs) > 2 else None
        b_zp = mmi.inputs[3] if len(mmi.inputs) > 3 else None
        n = _columns(b)
        if a is None or b is None or a.dtype not in QUANT_TYPES or b.dtype not in QUANT_TYPES:
            continue
        if (a_zp is not None and _size(ctx, a_zp) != 1) or (
            b_zp is not None and not _scalar_or_columns(ctx, b_zp, n)
        ):
            continue
        biased = _bias_after(ctx, out, n)
        bias = None
        if biased is not None:
            chain.append(biased[0])
            bias, out = biased[1], biased[0].outputs[0]
        dql = a.producer()
        if (
            isinstance(a_scale, ir.Value)
            and dql is not None
            and op(dql, "DynamicQuantizeLinear")
            and list(dql.outputs) == [a, a_scale, a_zp]
            and consumed_only_by(ctx, dql, chain)
            and dql.inputs[0] is not None
        ):
            args = [dql.inputs[0], b, b_scale, b_zp, bias]
            types = [FLOAT, b.dtype, FLOAT, b.dtype, FLOAT]
            if _emit(ctx, [dql, *chain], "DynamicQuantizeMatMul", args, types, out):  # type: ignore[arg-type]
                done += 1
                continue
        types = [a.dtype, b.dtype, FLOAT, FLOAT, a.dtype, b.dtype, FLOAT]
        if not ctx.can_emit(chain, "MatMulIntegerToFloat", MS_DOMAIN, input_types=types):
            continue
        if not isinstance(a_scale, ir.Value):
            a_scale = new_constant(ctx, np.array(1.0, np.float32), "a_scale")
        args = [a, b, a_scale, b_scale, a_zp, b_zp, bias]
        done += _emit(ctx, chain, "MatMulIntegerToFloat", args, types, out)
    return done


def _integer_chain(
    ctx: FusionContext, mmi: ir.Node
) -> tuple[list[ir.Node], ir.Value | None, ir.Value, ir.Value] | None:
    """``MatMulInteger -> Cast(float) -> Mul(s)``: its nodes (the Mul that
    makes ``s = a_scale * b_scale`` too, if only the chain reads it), A's
    scale (``None``: 1, ``s`` is B's alone), B's scale and the chain's output."""
    cast = ctx.sole_user(mmi.outputs[0])
    if cast is None or not op(cast, "Cast") or attr_int(cast, "to", 0) != int(FLOAT):
        return None
    mul = ctx.sole_user(cast.outputs[0])
    if mul is None or not op(mul, "Mul") or len(mul.inputs) != 2:
        return None
    s = other_input(mul, cast.outputs[0])
    if s is None or s is cast.outputs[0] or s.dtype != FLOAT:
        return None
    n = _columns(mmi.inputs[1])
    chain = [mmi, cast, mul]
    maker = s.producer()
    if ctx.const(s) is not None or maker is None or not op(maker, "Mul"):
        if not _scalar_or_columns(ctx, s, n):
            return None
        return chain, None, s, mul.outputs[0]
    p, q = maker.inputs[0], maker.inputs[1]
    if p is None or q is None:
        return None
    dql = mmi.inputs[0].producer() if mmi.inputs[0] is not None else None
    a_scale = dql.outputs[1] if dql is not None and op(dql, "DynamicQuantizeLinear") else None
    if q is a_scale or (a_scale is not p and _size(ctx, p) != 1):
        p, q = q, p  # the scalar, A's, first
    if _size(ctx, p) != 1 or not _scalar_or_columns(ctx, q, n):
        return None
    if consumed_only_by(ctx, maker, chain):
        chain.insert(0, maker)
    return chain, p, q, mul.outputs[0]


@anchored("MatMul", needs=QDQ_OPS)
def fuse_dq_matmul_to_float(ctx: FusionContext) -> int:
    """Replace ``DQ(a), DQ(b const) -> MatMul [-> Add(bias)]`` with a float
    result by MatMulIntegerToFloat; returns fusions done."""
    done = 0
    for mm in list(ctx.graph):
        if mm.graph is not ctx.graph or not op(mm, "MatMul"):
            continue
        a, b = dq_of(ctx, mm.inputs[0]), dq_of(ctx, mm.inputs[1])
        if a is None or b is None or not a.per_tensor or ctx.const(b.quantized) is None:
            continue
        rank = rank_of(b.quantized)
        if not b.per_tensor and (rank is None or rank < 2 or b.axis != rank - 1):
            continue
        body: list[ir.Node] = [mm]
        out, bias = mm.outputs[0], None
        biased = _bias_after(ctx, out, _columns(b.quantized))
        if biased is not None:
            body.append(biased[0])
            bias, out = biased[1], biased[0].outputs[0]
        inputs = [a.node, b.node]
        types = [a.dtype, b.dtype, FLOAT, FLOAT, a.dtype, b.dtype, FLOAT]
        if not ctx.can_emit([*inputs, *body], "MatMulIntegerToFloat", MS_DOMAIN, input_types=types):
            continue
        args = [a.quantized, b.quantized, a.scale, b.scale, zero_point_of(ctx, a),
                zero_point_of(ctx, b), bias]  # fmt: skip
        gone = [n for n in dict.fromkeys(inputs) if consumed_only_by(ctx, n, [*inputs, *body])]
        done += _emit(ctx, [*gone, *body], "MatMulIntegerToFloat", args, types, out)
    return done
