"""Fuse ``MatMul -> Add(bias)``: into a Gemm where both operands are 2-D and
the bias broadcasts to the product, else into ``com.ortcore.FusedMatMul``
with a bias input (numpy broadcasting, so any bias shape is exact)."""

from __future__ import annotations

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, anchored, op

__all__ = ["MatMulAddFusionPass", "fuse_matmul_add"]


def _rank(v: ir.Value | None) -> int | None:
    return None if v is None or v.shape is None else len(v.shape)


def _gemm_bias_ok(bias: ir.Value, a: ir.Value, b: ir.Value) -> bool:
    """Whether ``bias`` broadcasts one-way to (M, N) without changing its shape."""
    if bias.shape is None or a.shape is None or b.shape is None or len(bias.shape) > 2:
        return False
    want = (a.shape[0], b.shape[1])
    for d, full in zip(reversed(list(bias.shape)), reversed(want)):
        if d != 1 and (not isinstance(d, int) or d != full):
            return False
    return True


@anchored("MatMul")
def fuse_matmul_add(ctx: FusionContext) -> int:
    """Replace MatMul + Add pairs of ``ctx.graph``; returns fusions done."""
    done = 0
    for mm in ctx.nodes("MatMul"):
        if mm.graph is not ctx.graph or not op(mm, "MatMul"):
            continue
        y = mm.outputs[0]
        add = ctx.sole_user(y)
        if not op(add, "Add") or add is None or len(add.inputs) != 2:
            continue
        bias = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
        if bias is None or bias is y:
            continue
        a, b = mm.inputs[0], mm.inputs[1]
        assert a is not None and b is not None
        two_d = _rank(a) == 2 and _rank(b) == 2 and _gemm_bias_ok(bias, a, b)
        if two_d and ctx.can_emit([mm, add], "Gemm", ""):
            fused = ir.Node("", "Gemm", [a, b, bias], name=f"{mm.name}_gemm", num_outputs=1)
        elif ctx.can_emit([mm, add], "FusedMatMul"):
            fused = ir.Node(
                "com.ortcore", "FusedMatMul", [a, b, bias], name=f"{mm.name}_fused", num_outputs=1
            )
        else:
            continue
        ctx.replace([mm, add], fused, [(add.outputs[0], fused.outputs[0])])
        done += 1
    return done


class MatMulAddFusionPass(FusionPass):
    """Fuse MatMul + Add into Gemm or ``FusedMatMul``."""

    fusions = (fuse_matmul_add,)
