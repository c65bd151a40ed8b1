"""Fuse scaled dot-product attention into ``com.ortcore.FusedAttention``.

The torch exporters write attention (BERT's and GPT-2's hand-written one,
``scaled_dot_product_attention``, ``nn.MultiheadAttention``) as::

    S = MatMul(Q, Kt)                      # Kt: the keys already transposed
    S = Div(S, c) | Mul(S, c)              # or Q and Kt each multiplied by c
    S = Add(S, mask)                       # optional additive mask
    Y = MatMul(Softmax(S, axis=-1), V)

and this pass replaces that core with one node computing
``softmax(Q @ Kt * scale + mask) @ V``. The Transposes of the head split
and merge around it (Q, K and V from (B, S, H, D) to (B, H, S, D) or, for
K, (B, H, D, S), and the result back) are folded into the node as its
``perm_q``, ``perm_kt``, ``perm_v`` and ``perm_out`` attributes, where
nothing else reads their outputs: a kernel reads the heads where they lie
and writes the result in the merged layout, without the four copies. The
Reshapes stay (they cost nothing), and any layout works: a perm is only a
Transpose moved inside. (onnx's Attention-23 wants untransposed K in (B, H,
S, D); opset-23 exports already use it, so it is not emitted here.)
"""

from __future__ import annotations

import onnx_ir as ir

from ._fusion import FusionContext, FusionPass, anchored, attr, op

__all__ = ["AttentionFusionPass", "fuse_attention"]


def _scaled_scores(
    ctx: FusionContext, s: ir.Value | None
) -> tuple[ir.Value, ir.Value, float, list[ir.Node]] | None:
    """``(Q, Kt, scale, nodes)`` if ``s`` is ``MatMul(Q, Kt)`` scaled by a constant."""
    n = s.producer() if s is not None else None
    if n is None:
        return None
    scale, nodes = 1.0, []
    if op(n, "Div", "Mul"):
        c = ctx.scalar(n.inputs[1])
        src = n.inputs[0]
        if c is None and op(n, "Mul"):
            c, src = ctx.scalar(n.inputs[0]), n.inputs[1]
        if c is None or c == 0.0 or src is None:
            return None
        scale = 1.0 / c if n.op_type == "Div" else c
        nodes.append(n)
        n = src.producer()
    if not op(n, "MatMul") or n is None:
        return None
    q, kt = n.inputs[0], n.inputs[1]
    if q is None or kt is None:
        return None
    nodes.insert(0, n)
    if not nodes[1:]:  # scale may sit on both operands (torch's SDPA export)
        pre = []
        for i, v in enumerate((q, kt)):
            m = v.producer()
            c = ctx.scalar(m.inputs[1]) if op(m, "Mul") and m is not None else None
            if m is None or c is None or m.inputs[0] is None:
                continue
            scale *= c
            pre.append(m)
            if i == 0:
                q = m.inputs[0]
            else:
                kt = m.inputs[0]
        nodes[:0] = pre
    return q, kt, scale, nodes


_PERMS = ("perm_q", "perm_kt", "perm_v")


def _transpose_perm(node: ir.Node | None) -> list[int] | None:
    """The explicit ``perm`` of a Transpose node (None: not one, or no perm)."""
    if node is None or not op(node, "Transpose") or node.inputs[0] is None:
        return None
    a = node.attributes.get("perm")
    return None if a is None else [int(p) for p in a.as_ints()]


def _folded_transpose(
    ctx: FusionContext, v: ir.Value, group: list[ir.Node]
) -> tuple[ir.Node, list[int]] | None:
    """``(node, perm)`` if ``v`` is the output of a Transpose with an explicit
    ``perm`` that one node alone reads, in this graph (not an outer one), and
    that may join ``group`` (the same provider runs it)."""
    t = v.producer()
    perm = _transpose_perm(t)
    if t is None or perm is None or t.graph is not ctx.graph or ctx.sole_user(v) is None:
        return None
    return (t, perm) if ctx.can_emit([*group, t], "FusedAttention") else None


@anchored("Softmax")
def fuse_attention(ctx: FusionContext) -> int:
    """Replace attention cores of ``ctx.graph``; returns fusions done."""
    if ctx.opset < 13:
        return 0  # Softmax before 13 flattens to 2-D: another meaning
    done = 0
    for sm in ctx.nodes("Softmax"):
        if sm.graph is not ctx.graph or not op(sm, "Softmax"):
            continue
        x = sm.inputs[0]
        rank = None if x is None or x.shape is None else len(x.shape)
        axis = int(attr(sm, "axis", -1))  # type: ignore[call-overload]
        if axis != -1 and (rank is None or axis != rank - 1):
            continue
        out = ctx.sole_user(sm.outputs[0])
        if not op(out, "MatMul") or out is None or out.inputs[0] is not sm.outputs[0]:
            continue
        v = out.inputs[1]
        pre = x.producer() if x is not None else None
        mask: ir.Value | None = None
        mask_nodes: list[ir.Node] = []
        scores = x
        if op(pre, "Add") and pre is not None:
            for i in (0, 1):
                cand = _scaled_scores(ctx, pre.inputs[i])
                if cand is not None:
                    scores, mask = pre.inputs[i], pre.inputs[1 - i]
                    mask_nodes = [pre]
                    break
        found = _scaled_scores(ctx, scores)
        if found is None or v is None:
            continue
        q, kt, scale, nodes = found
        group = [*nodes, *mask_nodes, sm, out]
        if not ctx.private(group, keep=out.outputs[0]):
            continue
        if not ctx.can_emit(group, "FusedAttention"):
            continue
        attrs: list[ir.Attr] = [ir.AttrFloat32("scale", scale)]
        operands = [q, kt, v]
        for i, name in enumerate(_PERMS):
            folded = _folded_transpose(ctx, operands[i], group)
            if folded is not None and folded[0].inputs[0] is not None:
                group.insert(0, folded[0])
                operands[i] = folded[0].inputs[0]
                attrs.append(ir.AttrInt64s(name, folded[1]))
        result = out.outputs[0]
        after = ctx.sole_user(result)
        perm = _transpose_perm(after)
        if (
            perm is not None
            and after is not None
            and ctx.can_emit([*group, after], "FusedAttention")
        ):
            group.append(after)
            result = after.outputs[0]
            attrs.append(ir.AttrInt64s("perm_out", perm))
        inputs = operands + ([mask] if mask is not None else [])
        fused = ir.Node(
            "com.ortcore", "FusedAttention", inputs, attrs, name=f"{sm.name}_attention",
            num_outputs=1,
        )  # fmt: skip
        ctx.replace(group, fused, [(result, fused.outputs[0])])
        done += 1
    return done


class AttentionFusionPass(FusionPass):
    """Fuse scaled dot-product attention into ``FusedAttention``."""

    fusions = (fuse_attention,)
