"""Seeds of the exploration: one valid node per op, and what its schema says.

onnx's single-node backend tests give, for most ops, a node with attributes
and inputs that are known to be valid together. The exploration starts from
them and mutates along its dimensions; what may be mutated (attributes, their
defaults and types, type constraints, optional and variadic inputs) comes
from the op's schema (``onnx.defs``), and which values the node tests use for
each attribute (across every test of the op) widens what is tried.

Each input is classified as *data* (values computed on: redrawn by a seeded
generator) or *control* (shapes, axes, indices, pads, repeats, scales: kept
as the seed gives them, fed as initializers so shape inference sees them).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = [
    "CONTROL_NAMES",
    "DOMAINS",
    "InputSlot",
    "Seed",
    "attribute_values",
    "schema",
    "seeds",
    "versions",
]

DOMAINS = ("", "ai.onnx.ml")
CONTROL_NAMES = frozenset(
    {
        "shape",
        "axes",
        "axis",
        "pads",
        "repeats",
        "starts",
        "ends",
        "steps",
        "split",
        "indices",
        "k",
        "sizes",
        "scales",
        "roi",
        "depth",
        "max_output_boxes_per_class",
        "iou_threshold",
        "score_threshold",
        "sequence_lens",
        "trip_count",
        "cond",
        "m",
        "perm",
        "input_sequence",
        "x_scale",
        "x_zero_point",
        "y_scale",
        "y_zero_point",
        "a_scale",
        "a_zero_point",
        "b_scale",
        "b_zero_point",
        "w_scale",
        "w_zero_point",
        "scale",
        "zero_point",
        "output_shape",
        "batch_indices",
        "rois",
        "grid",
        "ratio",
        "training_mode",
        "seed",
        "slope",
        "constant_value",
        "block_shape",
        "position_ids",
    }
)
"""Formal input names (lower-cased) whose values steer the op rather than being
computed on: kept from the seed."""
_INDEX_TYPES = {"tensor(int32)", "tensor(int64)"}
SKIP_OPS = frozenset(
    {
        "Bernoulli",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Dropout",
    }
)
"""Ops whose outputs are random: nothing to compare."""


@dataclass(frozen=True)
class InputSlot:
    """One actual input of a seed node, with its schema formal parameter.

    Attributes:
        name: the formal parameter's name.
        type_param: its type constraint (``T``) or a literal type (``tensor(int64)``).
        allowed: the tensor types it accepts (``tensor(float)``, ...).
        option: ``single``, ``optional`` or ``variadic``.
        data: computed on (redrawn) rather than steering (kept).
    """

    name: str
    type_param: str
    allowed: tuple[str, ...]
    option: str
    data: bool


@dataclass
class Seed:
    """A valid single node of one op, from an onnx node test."""

    test: str
    op: str
    domain: str
    opset: int
    attrs: dict[str, Any]
    inputs: list[np.ndarray | None]
    slots: list[InputSlot]
    outputs: int
    tolerance: tuple[float, float]
    graph_attrs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@cache
def schema(op: str, domain: str, version: int | None = None) -> Any:
    """``onnx.defs.get_schema`` for ``op`` at ``version`` (latest when ``None``)."""
    if version is None:
        return onnx.defs.get_schema(op, domain=domain)
    return onnx.defs.get_schema(op, version, domain)


def versions(op: str, domain: str) -> list[int]:
    """Every ``since_version`` of ``op``'s schema, oldest first."""
    return sorted(_history().get((domain, op), []))


@cache
def _history() -> dict[tuple[str, str], list[int]]:
    table: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in DOMAINS and not s.deprecated:
            table[(s.domain, s.name)].append(s.since_version)
    return dict(table)


def _allowed(sch: Any, type_str: str) -> tuple[str, ...]:
    for tc in sch.type_constraints:
        if tc.type_param_str == type_str:
            return tuple(tc.allowed_type_strs)
    return (type_str,)


def slots(sch: Any, count: int) -> list[InputSlot] | None:
    """The formal parameter of each of ``count`` actual inputs (``None``: they do not fit)."""
    formal = list(sch.inputs)
    out = []
    for i in range(count):
        if i < len(formal):
            f = formal[i]
        elif formal and formal[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
            f = formal[-1]
        else:
            return None
        allowed = _allowed(sch, f.type_str)
        option = f.option.name.lower()
        tensors = [a for a in allowed if a.startswith("tensor(")]
        data = bool(tensors) and f.name.lower() not in CONTROL_NAMES
        if data and set(tensors) <= _INDEX_TYPES and len(formal) > 1:
            data = False  # an index-typed input beside others: axes, indices
        out.append(InputSlot(f.name, f.type_str, tuple(allowed), option, data))
    return out


def _python(attr: onnx.AttributeProto) -> Any:
    return helper.get_attribute_value(attr)


@cache
def _collected() -> tuple[Any, ...]:
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(node_cases.collect_testcases(None))


def _seed(case: Any) -> Seed | None:
    model = case.model
    if model is None or not case.data_sets or len(model.graph.node) != 1:
        return None
    node = model.graph.node[0]
    if node.domain not in DOMAINS or node.op_type in SKIP_OPS:
        return None
    if any(vi.type.WhichOneof("value") != "tensor_type" for vi in model.graph.input):
        return None
    if any(vi.type.WhichOneof("value") != "tensor_type" for vi in model.graph.output):
        return None
    opset = next((o.version for o in model.opset_import if o.domain == node.domain), 0)
    try:
        sch = schema(node.op_type, node.domain, opset)
    except Exception:
        return None
    names = {vi.name for vi in model.graph.input}
    feeds = dict(zip([vi.name for vi in model.graph.input], case.data_sets[0][0]))
    values: list[np.ndarray | None] = []
    for name in node.input:
        if not name:
            values.append(None)
        elif name in names:
            v = feeds[name]
            values.append(numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v)
        else:
            return None
    if any(v is not None and not isinstance(v, np.ndarray) for v in values):
        return None
    sl = slots(sch, len(values))
    if sl is None:
        return None
    attrs = {a.name: _python(a) for a in node.attribute}
    graph_attrs = any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
    )
    return Seed(
        case.name,
        node.op_type,
        node.domain,
        sch.since_version,
        attrs,
        values,
        sl,
        len(node.output),
        (float(case.rtol), float(case.atol)),
        graph_attrs,
    )


@cache
def _all_seeds() -> dict[tuple[str, str], tuple[Seed, ...]]:
    table: dict[tuple[str, str], list[Seed]] = defaultdict(list)
    for case in _collected():
        s = _seed(case)
        if s is not None and not s.graph_attrs:
            table[(s.domain, s.op)].append(s)
    # small seeds first: cheaper, and their shapes mutate more freely
    return {
        k: tuple(sorted(v, key=lambda s: (sum(x.size for x in s.inputs if x is not None), s.test)))
        for k, v in sorted(table.items())
    }


def seeds() -> dict[tuple[str, str], tuple[Seed, ...]]:
    """Seeds by ``(domain, op)``, smallest inputs first (cached)."""
    return _all_seeds()


@cache
def attribute_values(domain: str, op: str) -> dict[str, tuple[Any, ...]]:
    """Every value each attribute takes in the node tests of ``op`` (the vocabulary)."""
    seen: dict[str, list[Any]] = defaultdict(list)
    for s in seeds().get((domain, op), ()):
        for k, v in s.attrs.items():
            if isinstance(v, (int, float, str, bytes, list)) and v not in seen[k]:
                seen[k].append(v)
    return {k: tuple(v) for k, v in seen.items()}


@cache
def combinations_used(domain: str, op: str) -> frozenset[frozenset[str]]:
    """The sets of attribute names the node tests of ``op`` give together."""
    return frozenset(frozenset(s.attrs) for s in seeds().get((domain, op), ()))


def ops() -> Iterator[tuple[str, str]]:
    """``(domain, op)`` of every op with a seed."""
    yield from seeds()
