"""Constant folding: evaluate nodes whose inputs are all constants, once.

The nodes run on the kernels of a host provider (the CPU provider), so folding
gives exactly the numbers the model would give at run time.

What folding may allocate is bounded twice, as it is an optimization and a
model is data: each node's outputs by :data:`MAX_FOLDED_BYTES` (and the
session's tensor limit), all folded tensors together by a budget (the session
config entry ``session.max_folded_total_bytes``, else
``$ORTCORE_MAX_FOLDED_TOTAL_BYTES``, else :data:`DEFAULT_FOLDING_BUDGET`). A
node's outputs are sized before it runs: from their inferred shapes, else
from onnx's inference of that one node given its constant inputs' values,
else by the kernel itself (:func:`ep_sdk.check_tensor_size` under what is
left). A node over either bound is left in the graph and runs at run time,
where the tensor limit applies; it is never an error.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence, Set
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper, numpy_helper

from ep_sdk import ExecutionProvider, KernelMiss, RunContext
from ep_sdk.limits import parse_byte_limit, tensor_byte_limit
from ep_sdk.terminate import bind_run, unbind_run

from ..errors import EPFail, InvalidArgument
from ..nodeinfo import make_node_info, registry_of, subgraphs
from ._common import constant, is_constant
from ._pass import OptimizerPass, has_op, knows

__all__ = [
    "DEFAULT_FOLDING_BUDGET",
    "FOLDING_BUDGET_CONFIG",
    "FOLDING_BUDGET_ENV",
    "MAX_FOLDED_BYTES",
    "NONDETERMINISTIC_OPS",
    "ConstantFoldingPass",
    "const_tensor",
    "fold_constants",
    "folding_budget_bytes",
]

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
"""The largest tensor folding creates (never above the session's tensor limit)."""

FOLDING_BUDGET_CONFIG = "session.max_folded_total_bytes"
"""Session config entry: the most bytes all the tensors folding creates may hold."""
FOLDING_BUDGET_ENV = "ORTCORE_MAX_FOLDED_TOTAL_BYTES"
"""Environment variable with the meaning of :data:`FOLDING_BUDGET_CONFIG`."""
DEFAULT_FOLDING_BUDGET = 4 << 30
"""The budget when neither the entry nor the variable sets one: four tensors of
the largest size folding creates. Real models fold shape arithmetic and some
weights (transposed, cast, reshaped), far less than this; a model of
a thousand 500 MB ``ConstantOfShape`` nodes stops folding here and runs the
rest at run time."""

_DATA_ELEMENTS = 1 << 16
"""Inputs up to this many elements are shown to onnx's inference by value
(shapes, sizes, repeats); larger ones by type only."""


def folding_budget_bytes(configured: int | None = None) -> int:
    """The folding budget: ``configured`` (the session's entry), else
    ``$ORTCORE_MAX_FOLDED_TOTAL_BYTES``, else :data:`DEFAULT_FOLDING_BUDGET`.

    Raises:
        InvalidArgument: the variable is not a byte size.
    """
    if configured is not None:
        return configured
    text = os.environ.get(FOLDING_BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_FOLDING_BUDGET
    try:
        return parse_byte_limit(text, f"${FOLDING_BUDGET_ENV}")
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def fold_constants(
    graph: ir.Graph,
    opsets: Mapping[str, int],
    provider: ExecutionProvider,
    overridable: Set[ir.Value],
    max_bytes: int = MAX_FOLDED_BYTES,
    budget: int | None = None,
    skip: Callable[[ir.Node], bool] | None = None,
    spent: list[int] | None = None,
) -> int:
    """Replace constant default-domain nodes of ``graph`` with initializers.

    Nodes for which ``skip`` returns true are left as they are; the bytes
    of each folded node's outputs are appended to ``spent`` if given.

    No node is run whose outputs would exceed ``max_bytes``, nor what is left
    of ``budget`` (``None``: :func:`folding_budget_bytes`) once the nodes
    folded before it are paid for: outputs are sized before the kernel runs
    (see the module docstring), so a tiny model cannot make session creation
    allocate gigabytes. Nodes over either stay unfolded.

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
    left = folding_budget_bytes(budget)
    ctx = RunContext(max_tensor_bytes=max_bytes)
    token = bind_run(ctx)
    try:
        for node in list(graph):
            if not _may_fold(node, overridable) or (skip is not None and skip(node)):
                continue
            cap = min(max_bytes, left)
            ctx.max_tensor_bytes = cap  # what the kernels check sizes against
            made = _fold_node(graph, node, opsets, provider, registry, overridable, ctx, cap)
            if made is not None:
                folded += 1
                left -= made
                if spent is not None:
                    spent.append(made)
    finally:
        unbind_run(token)
    return folded


def _may_fold(node: ir.Node, overridable: Set[ir.Value]) -> bool:
    """Whether ``node`` is a deterministic default-domain node whose inputs
    are all constants (:func:`~ortcore.optimizer._common.constant` would
    give each): what most nodes fail at once, before anything is read."""
    if node.domain != "" or node.op_type in NONDETERMINISTIC_OPS:
        return False
    return all(v is None or is_constant(v, overridable) for v in node.inputs)


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
) -> int | None:
    """Fold one node :func:`_may_fold` accepts if it can be, its outputs
    within ``max_bytes``; return the bytes they hold, or ``None`` if it was
    not folded."""
    if subgraphs(node):
        return None
    values = [constant(v, overridable) if v is not None else None for v in node.inputs]
    size = _static_bytes(node.outputs)
    if size is None:
        size = _inferred_bytes(node, values, opsets)
    if size is not None and size > max_bytes:
        log.debug("not folding %s %r: its outputs need %d bytes", node.op_type, node.name, size)
        return None
    found = registry.lookup_node(node, opsets)
    if isinstance(found, KernelMiss):
        return None
    try:
        info = make_node_info(node, opsets, provider)
        fn = found.builder(info)
        results = fn(ctx, *values) if found.context else fn(*values)
    except Exception as exc:  # leave it for run time, where errors are reported
        log.debug("not folding %s %r: %s", node.op_type, node.name, exc)
        return None
    if len(results) != len(node.outputs) or not all(
        isinstance(r, (np.ndarray, np.generic)) for r in results
    ):
        return None
    arrays = [np.asarray(r) for r in results]
    if any(v.dtype is not None and v.dtype != _dtype_of(a) for v, a in zip(node.outputs, arrays)):
        return None  # a kernel bug: let run time report it
    made = sum(a.nbytes for a in arrays)
    if made > max_bytes:
        return None
    _replace(graph, node, arrays)
    return made


def _inferred_bytes(
    node: ir.Node, values: Sequence[np.ndarray | None], opsets: Mapping[str, int]
) -> int | None:
    """Bytes of ``node``'s outputs as onnx's inference of this one node gives
    them from its constant inputs (their values too, when small), if it can.

    Inference at load did not know them (an input came from a node it cannot
    follow, folded since); the values it has now size ``ConstantOfShape``,
    ``Expand``, ``Tile``, ``Range``, ``Resize``, ``AffineGrid``, ``STFT``, ...
    before any kernel allocates.
    """
    types: dict[str, onnx.TypeProto] = {}
    data: dict[str, onnx.TensorProto] = {}
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get("", 1), node.domain)
        for v, arr in zip(node.inputs, values):
            if v is None or arr is None:
                continue
            if not v.name:
                return None
            elem = helper.np_dtype_to_tensor_dtype(arr.dtype) if arr.dtype.kind != "O" else 8
            types[v.name] = helper.make_tensor_type_proto(elem, arr.shape)
            if arr.size <= _DATA_ELEMENTS and arr.dtype.kind in "biuf":
                data[v.name] = numpy_helper.from_array(arr, v.name)
        outputs = onnx.shape_inference.infer_node_outputs(
            schema,
            ir.serde.serialize_node(node),
            types,
            data,
            opset_imports=[helper.make_opsetid(d, n) for d, n in opsets.items()],
        )
    except Exception:  # no schema, or inference refused: the kernel checks
        return None
    total = 0
    for v in node.outputs:
        t = outputs.get(v.name or "")
        if t is None or t.WhichOneof("value") != "tensor_type":
            return None
        tensor = t.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        if not tensor.HasField("shape") or any(d < 0 for d in dims):
            return None
        try:
            itemsize = math.ceil(max(ir.DataType(tensor.elem_type).itemsize, 1))
        except (TypeError, ValueError):
            itemsize = 8
        total += math.prod(dims) * itemsize
    return total


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
        budget: the most bytes the folded tensors may hold together
            (``None``: :func:`folding_budget_bytes`).
        max_bytes: the largest tensor it creates (the session's tensor
            limit, if smaller than :data:`MAX_FOLDED_BYTES`).
        skip: nodes it must not fold (``None``: none).
        skips_only: the op types ``skip`` may be true for (``None``: any):
            a later pass that shares this one's budget returns at once when
            the model is as this pass left it and has none of them.
        shares_budget_with: an earlier folding pass of the same optimization,
            whose folded bytes count against this one's budget.

    Attributes:
        spent: the bytes the last run created.
    """

    def __init__(
        self,
        provider: ExecutionProvider,
        overridable: Set[ir.Value] = frozenset(),
        *,
        check_invariants: bool | None = None,
        budget: int | None = None,
        max_bytes: int = MAX_FOLDED_BYTES,
        skip: Callable[[ir.Node], bool] | None = None,
        skips_only: Collection[str] | None = None,
        shares_budget_with: ConstantFoldingPass | None = None,
    ) -> None:
        super().__init__(overridable, check_invariants=check_invariants)
        self.provider = provider
        self.budget = budget
        self.max_bytes = max_bytes
        self.skip = skip
        self.skips_only = skips_only
        self.shares_budget_with = shares_budget_with
        self.spent = 0

    def establishes(self, model: ir.Model) -> Hashable:
        """Nothing left to fold in the main graph but what ``skip`` kept: one
        walk in graph order folds what the nodes it folds make constant, and
        a node refused (too large, over the budget, a kernel error) would be
        refused again."""
        return ("constants folded", model.graph, self)

    def _nothing_left(self, model: ir.Model) -> bool:
        """Whether the pass whose budget this one shares left nothing for it:
        the model is as it left it, it skipped no node (none of the op types
        it may skip is in the graph), and this pass may fold no more (same
        provider, budget and size limit)."""
        before = self.shares_budget_with
        if before is None or not knows(before.establishes(model)):
            return False
        if before.provider is not self.provider or before.budget != self.budget:
            return False
        if self.max_bytes > before.max_bytes:
            return False
        if before.skip is None:
            return True
        return before.skips_only is not None and not has_op(model.graph, before.skips_only)

    def apply(self, model: ir.Model) -> int:
        """Run :func:`fold_constants` on the main graph (unless the pass
        whose budget it shares left nothing: :meth:`_nothing_left`)."""
        if self._nothing_left(model):
            self.spent = 0
            return 0
        budget = self.budget
        if self.shares_budget_with is not None:
            budget = max(0, folding_budget_bytes(budget) - self.shares_budget_with.spent)
        spent: list[int] = []
        done = fold_constants(
            model.graph,
            dict(model.opset_imports),
            self.provider,
            self.overridable,
            max_bytes=self.max_bytes,
            budget=budget,
            skip=self.skip,
            spent=spent,
        )
        self.spent = sum(spent)
        return done
