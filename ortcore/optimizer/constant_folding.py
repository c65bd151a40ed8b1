"""Constant folding: evaluate nodes whose inputs are all constants, once.

The nodes run on the kernels of a host provider (the CPU provider), so folding
gives exactly the numbers the model would give at run time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence, Set
from typing import Any

import numpy as np
import onnx_ir as ir

from ep_sdk import ExecutionProvider, KernelMiss, RunContext
from ep_sdk.limits import tensor_byte_limit
from ep_sdk.terminate import bind_run, unbind_run

from ..errors import EPFail
from ..nodeinfo import make_node_info, registry_of, subgraphs
from ._common import constant
from ._pass import OptimizerPass

__all__ = ["NONDETERMINISTIC_OPS", "ConstantFoldingPass", "const_tensor", "fold_constants"]

log = logging.getLogger("ortcore.optimizer")

NONDETERMINISTIC_OPS = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)

MAX_FOLDED_BYTES = 1 << 30


def fold_constants(
    graph: ir.Graph,
    opsets: Mapping[str, int],
    provider: ExecutionProvider,
    overridable: Set[ir.Value],
    max_bytes: int = MAX_FOLDED_BYTES,
) -> int:
    """Replace constant default-domain nodes of ``graph`` with initializers.

    No node is run whose outputs would exceed ``max_bytes``: outputs of known
    shape are sized before running the kernel, and kernels whose output size
    comes from input values check it themselves (:func:`ep_sdk.check_tensor_size`
    under this pass's cap), so a tiny model cannot make session creation
    allocate gigabytes.

    Returns:
        the number of nodes folded.
    """
    try:
        registry = registry_of(provider)
    except EPFail as exc:
        log.warning("constant folding skipped: %s", exc)
        return 0
    if registry is None:
        return 0
    folded = 0
    max_bytes = min(max_bytes, tensor_byte_limit())
    ctx = RunContext(max_tensor_bytes=max_bytes)
    token = bind_run(ctx)
    try:
        for node in list(graph):
            folded += _fold_node(
                graph, node, opsets, provider, registry, overridable, ctx, max_bytes
            )
    finally:
        unbind_run(token)
    return folded


def _static_bytes(values: Sequence[ir.Value]) -> int | None:
    """Bytes of ``values`` from their inferred types and shapes, if all are known."""
    total = 0
    for v in values:
        if v.dtype is None or v.shape is None or not v.shape.is_static():
            return None
        try:
            itemsize = math.ceil(max(v.dtype.itemsize, 1))
        except (TypeError, ValueError):
            itemsize = 8  # strings: at least a pointer each
        total += math.prod(d for d in v.shape if isinstance(d, int)) * itemsize
    return total


def _fold_node(
    graph: ir.Graph,
    node: ir.Node,
    opsets: Mapping[str, int],
    provider: ExecutionProvider,
    registry: Any,
    overridable: Set[ir.Value],
    ctx: RunContext,
    max_bytes: int,
) -> int:
    """Fold one node if it can be; return 1 if it was folded."""
    if node.domain != "" or node.op_type in NONDETERMINISTIC_OPS or subgraphs(node):
        return 0
    values: list[np.ndarray | None] = []
    for v in node.inputs:
        c = constant(v, overridable) if v is not None else None
        if v is not None and c is None:
            return 0
        values.append(c)
    size = _static_bytes(node.outputs)
    if size is not None and size > max_bytes:
        log.debug("not folding %s %r: its outputs need %d bytes", node.op_type, node.name, size)
        return 0
    found = registry.lookup_node(node, opsets)
    if isinstance(found, KernelMiss):
        return 0
    try:
        info = make_node_info(node, opsets, provider)
        fn = found.builder(info)
        results = fn(ctx, *values) if found.context else fn(*values)
    except Exception as exc:  # leave it for run time, where errors are reported
        log.debug("not folding %s %r: %s", node.op_type, node.name, exc)
        return 0
    if len(results) != len(node.outputs) or not all(
        isinstance(r, (np.ndarray, np.generic)) for r in results
    ):
        return 0
    arrays = [np.asarray(r) for r in results]
    if any(v.dtype is not None and v.dtype != _dtype_of(a) for v, a in zip(node.outputs, arrays)):
        return 0  # a kernel bug: let run time report it
    if sum(a.nbytes for a in arrays) > max_bytes:
        return 0
    _replace(graph, node, arrays)
    return 1


def const_tensor(array: np.ndarray) -> ir.TensorProtocol:
    """``array`` as an onnx-ir tensor. ``ir.Tensor`` wraps a numpy array
    directly; ``ir.tensor`` (kept for object arrays, e.g. strings) first runs
    protocol checks that cost about 50 µs a call, which adds up over the
    hundreds of folds of a CNN."""
    if array.dtype.kind == "O":
        return ir.tensor(array)
    return ir.Tensor(array)


def _dtype_of(array: np.ndarray) -> ir.DataType | None:
    try:
        return ir.DataType.from_numpy(array.dtype)
    except (TypeError, ValueError):
        return ir.DataType.STRING if array.dtype.kind in "OUS" else None


def _replace(graph: ir.Graph, node: ir.Node, arrays: list[np.ndarray]) -> None:
    outputs = set(graph.outputs)
    renames: list[tuple[ir.Value, str]] = []
    for old, arr in zip(node.outputs, arrays):
        name = old.name or ""
        new = ir.Value(
            name=f"{name}__folded",
            shape=ir.Shape(arr.shape),
            type=ir.TensorType(old.dtype or _dtype_of(arr) or ir.DataType.UNDEFINED),
            const_value=const_tensor(arr),
        )
        ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=old in outputs)
        renames.append((new, name))
    graph.remove(node, safe=True)
    for new, name in renames:
        new.name = name
        graph.register_initializer(new)


class ConstantFoldingPass(OptimizerPass):
    """Evaluate constant nodes once, on ``provider``'s kernels (:func:`fold_constants`).

    Args:
        provider: the host provider whose kernels run the nodes.
    """

    def __init__(
        self,
        provider: ExecutionProvider,
        overridable: Set[ir.Value] = frozenset(),
        *,
        check_invariants: bool | None = None,
    ) -> None:
        super().__init__(overridable, check_invariants=check_invariants)
        self.provider = provider

    def apply(self, model: ir.Model) -> int:
        """Run :func:`fold_constants` on the main graph."""
        return fold_constants(
            model.graph, dict(model.opset_imports), self.provider, self.overridable
        )
