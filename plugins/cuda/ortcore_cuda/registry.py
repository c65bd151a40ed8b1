"""The provider's kernel registry: every op family's kernels, and why a node is declined.

The op families are imported here by name, each a module with
``register(reg)`` (add its kernels) and ``decline(node, graph)`` (why its
kernel does not cover a node, or ``None``). :func:`build_registry` asks each
in turn; :func:`decline_reason` applies the checks every op shares (device
values are tensors; shape arithmetic stays on the host), then asks each
family. What a kernel does not cover is declined at capability time with the
reason, so the node goes to the next provider.
"""

from __future__ import annotations

from types import ModuleType

import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry

from . import (
    ops_attention,
    ops_cast,
    ops_elementwise,
    ops_flex_attention,
    ops_image,
    ops_linear_attention,
    ops_losses,
    ops_misc,
    ops_nn,
    ops_norm,
    ops_quant,
    ops_recurrent,
    ops_reduce,
    ops_shape,
)

__all__ = ["FAMILIES", "build_registry", "decline_reason"]

FAMILIES: tuple[ModuleType, ...] = (
    ops_elementwise,
    ops_reduce,
    ops_nn,
    ops_shape,
    ops_attention,
    ops_linear_attention,
    ops_flex_attention,
    ops_cast,
    ops_image,
    ops_losses,
    ops_misc,
    ops_norm,
    ops_quant,
    ops_recurrent,
)
"""The op families, in the order they register (the common kernels before the
families that add types to the same ops, as Cast's exotic types)."""


def build_registry() -> KernelRegistry:
    """Every kernel of the provider: each family's, in :data:`FAMILIES` order."""
    reg = KernelRegistry()
    for family in FAMILIES:
        family.register(reg)
    return reg


def _small_int(v: ir.Value | None) -> bool:
    return (
        v is not None
        and v.dtype in (ir.DataType.INT64, ir.DataType.INT32)
        and v.shape is not None
        and len(v.shape) <= 1
    )


def _shape_arithmetic(node: ir.Node) -> bool:
    """Whether ``node`` computes on small integer tensors (shapes, axes,
    indices made from ``Shape``): its data input is one (and it does not
    make float data from it, as the window functions do), or it makes one
    from nothing (Constant, ConstantOfShape, Range)."""
    if node.op_type in ("Constant", "ConstantOfShape", "Range"):
        return _small_int(node.outputs[0])
    if node.op_type == "Shape" or not node.inputs or not _small_int(node.inputs[0]):
        return False
    out = node.outputs[0].dtype if node.outputs else None
    makes_floats = out is not None and out.is_floating_point()
    return not makes_floats or node.op_type in ("Cast", "CastLike")


def decline_reason(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the provider's kernel for ``node`` does not cover it (an attribute
    or a shape it does not handle), or ``None``."""
    op = node.op_type
    for v in (*node.inputs, *node.outputs):
        if v is not None and v.type is not None and not isinstance(v.type, ir.TensorType):
            return f"CUDA: {op} of a {type(v.type).__name__} (device values are tensors)"
    if graph.fallback and _shape_arithmetic(node):
        return (
            "CUDA: shape arithmetic (a small integer tensor) is left to "
            f"{graph.fallback[0]}, to stay on the host"
        )
    for family in FAMILIES:
        why = family.decline(node, graph)
        if why is not None:
            return why
    return None
