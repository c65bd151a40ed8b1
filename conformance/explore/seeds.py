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
from functools import cache
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .seedtypes import InputSlot, Seed

__all__ = [
    "CONTROL_NAMES",
    "DOMAINS",
    "InputSlot",
    "Seed",
    "attribute_values",
    "degenerate",
    "diverse",
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
        "size",  # a window's length (HannWindow, HammingWindow, BlackmanWindow)
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
            if isinstance(v, onnx.TensorProto):
                v = numpy_helper.to_array(v)
            elif isinstance(v, (np.generic, bool, int, float)):
                v = np.asarray(v)  # a scalar feed (Clip's bounds, Pad's value)
            values.append(v)
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
def _table() -> dict[tuple[str, str], tuple[Seed, ...]]:
    """The seeds by ``(domain, op)``: from the cache file when it holds them
    (see :mod:`conformance.explore.seedcache`), else from onnx's node tests
    (importing them computes every expected output: seconds), then cached."""
    from . import seedcache

    cached = seedcache.load()
    if cached is not None:
        return cached
    table: dict[tuple[str, str], list[Seed]] = defaultdict(list)
    for case in _collected():
        s = _seed(case)
        if s is not None and not s.graph_attrs:
            table[(s.domain, s.op)].append(s)
    made = {k: tuple(v) for k, v in sorted(table.items())}
    seedcache.store(made)
    return made


@cache
def _all_seeds() -> dict[tuple[str, str], tuple[Seed, ...]]:
    return {k: tuple(sorted(v, key=_rank_key)) for k, v in _table().items()}


def seeds() -> dict[tuple[str, str], tuple[Seed, ...]]:
    """Seeds by ``(domain, op)``, most representative first (:func:`degenerate`
    ones last), cached."""
    return _all_seeds()


MODERATE = (6, 512)
"""Data elements of a representative seed: enough that dimensions differ, few
enough to stay cheap."""


@cache
def _shaped_slots(domain: str, op: str) -> frozenset[int]:
    """Input positions some node test of ``op`` gives a data tensor of rank >= 1."""
    return frozenset(
        i
        for s in _table().get((domain, op), ())
        for i, (v, sl) in enumerate(zip(s.inputs, s.slots))
        if v is not None and sl.data and v.ndim > 0
    )


def degenerate(s: Seed) -> bool:
    """A seed no ordinary model looks like: an input with no elements (an empty
    tensor, an empty ``axes`` or ``split``), or a scalar data input where other
    node tests of the op give that input a shape (Gemm's scalar bias; Clip's
    scalar bounds are what its schema asks for)."""
    if any(v is not None and v.size == 0 for v in s.inputs):
        return True
    shaped = _shaped_slots(s.domain, s.op)
    return any(
        v is not None and sl.data and v.ndim == 0 and i in shaped
        for i, (v, sl) in enumerate(zip(s.inputs, s.slots))
    )


def _edge_axis(s: Seed, data: list[np.ndarray]) -> bool:
    """An ``axis`` attribute at the first or last dimension of a rank >= 3 input:
    part of the shape vanishes around it (Flatten at axis 0 has no outer dims)."""
    axis = s.attrs.get("axis")
    if not isinstance(axis, int) or not data or data[0].ndim < 3:
        return False
    return axis % data[0].ndim in (0, data[0].ndim - 1)


def _rank_key(s: Seed) -> tuple[Any, ...]:
    """Smaller is more representative: not :func:`degenerate`; written for the
    op's latest schema; data dimensions of 2 or more; a moderate size; attributes
    given; optional inputs present; an axis inside the shape; dimensions of
    distinct sizes; then the test's name."""
    data = [v for v, sl in zip(s.inputs, s.slots) if v is not None and sl.data]
    small_dims = sum(d < 2 for v in data for d in v.shape) + sum(v.ndim < 2 for v in data)
    size = sum(v.size for v in data)
    off = 0 if MODERATE[0] <= size <= MODERATE[1] else 1
    known = versions(s.op, s.domain)
    old = bool(known) and s.opset != known[-1]
    present = sum(v is not None for v in s.inputs)
    repeats = sum(v.ndim - len(set(v.shape)) for v in data)
    return (
        degenerate(s),
        old,
        small_dims > 0,
        off,
        -len(s.attrs),
        -present,
        _edge_axis(s, data),
        repeats,
        small_dims,
        size,
        s.test,
    )


def diverse(found: tuple[Seed, ...], count: int) -> list[Seed]:
    """Up to ``count`` non-degenerate seeds of one op, most representative first,
    each differing from those before it in attributes given, inputs present or
    opset where one does, else in attribute values, else in anything."""
    pool = [s for s in found if not degenerate(s)]
    tiers = (
        lambda s: (frozenset(s.attrs), tuple(v is not None for v in s.inputs), s.opset),
        lambda s: repr(sorted(s.attrs.items())),
        lambda s: s.test,
    )
    picked: list[Seed] = []
    for profile in tiers:
        seen = {profile(s) for s in picked}
        for s in pool:
            if len(picked) >= count:
                return picked
            if s not in picked and profile(s) not in seen:
                picked.append(s)
                seen.add(profile(s))
    return picked


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
