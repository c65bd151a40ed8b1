"""Dimensions ``attribute`` and ``pair``: what the schema's attributes may be.

``attribute``: each optional attribute absent (the schema's default must
hold; where the seed leaves it out, given explicitly at its default), then at
legal non-default values drawn from its type (integers next to the default,
0/1 flags, halved and doubled floats) and from every value the node tests use
for it, then pairs of non-default values the node tests never combine.

``pair``: two nodes of the op in one graph, on the same inputs, one with the
seed's attributes and one with a non-default value: a kernel cached by op and
shape, not by attributes, gives the second node the first one's answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import onnx
from onnx import helper

from ..case import Case
from .base import attribute_schema, base_spec, budget, emit, label, targets
from .seeds import Seed, attribute_values, combinations_used
from .spec import Spec, legal

__all__ = ["cases", "changes", "values_for", "with_attrs"]

_A = onnx.AttributeProto
SKIPPED_TYPES = {_A.GRAPH, _A.GRAPHS, _A.SPARSE_TENSOR, _A.SPARSE_TENSORS, _A.TYPE_PROTO}
COUNT_ATTR = "num_outputs"
"""The attribute that says how many outputs the node has (Split)."""
AXIS_NAMES = {"axis", "axes"}
"""Explored at every rank by the ``axis`` dimension (:mod:`.shapes`)."""


def _default(attr: Any) -> Any:
    d = attr.default_value
    if d is None or d.type == _A.UNDEFINED:
        return None
    return helper.get_attribute_value(d)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) < 1e-12
        except (TypeError, ValueError):
            return False
    return bool(a == b)


def values_for(attr: Any, current: Any, vocabulary: tuple[Any, ...]) -> list[Any]:
    """Legal-looking non-default values of one attribute, most telling first: those
    the node tests use, then ones derived from its type and default."""
    d = _default(attr)
    ref = current if current is not None else d
    out: list[Any] = list(vocabulary)
    if attr.type == _A.INT:
        base = ref if isinstance(ref, int) else 0
        out += [base + 1, base - 1, 0, 1]
    elif attr.type == _A.FLOAT:
        scale = float(ref) if isinstance(ref, float) and ref else 0.0
        out += [scale * 2.0, scale * 0.5] if scale else [0.5, 2.0]
    elif attr.type == _A.INTS and isinstance(ref, list) and ref:
        out += [list(reversed(ref))]
    if attr.type == _A.INT and d in (0, 1) and all(v in (0, 1) for v in vocabulary):
        out = [v for v in out if v in (0, 1)]  # a flag
    elif attr.type == _A.INT and isinstance(ref, int) and ref >= 1:
        out = [v for v in out if not isinstance(v, int) or v >= 1]  # a size or a count
    kept: list[Any] = []
    for v in out:
        if attr.type == _A.INTS and isinstance(current, list) and len(v) != len(current):
            continue  # its length is tied to another attribute or the rank
        if attr.type == _A.INT and not isinstance(v, int):
            continue
        if attr.type == _A.FLOAT and not isinstance(v, (int, float)):
            continue
        v = float(v) if attr.type == _A.FLOAT else v
        if _same(v, ref) or any(_same(v, k) for k in kept):
            continue
        kept.append(v)
    return kept


def _explored(s: Seed, opset: int) -> dict[str, Any]:
    return {
        name: attr
        for name, attr in attribute_schema(s, opset).items()
        if attr.type not in SKIPPED_TYPES
    }


def changes(s: Seed, opset: int, level: int) -> list[tuple[str, Any]]:
    """The ``level``-th non-default value of each explored attribute but the axis
    (:func:`values_for`, most telling first), as ``(name, value)``: what other
    dimensions cross their own changes with."""
    vocab = attribute_values(s.domain, s.op)
    out = []
    for name, attr in _explored(s, opset).items():
        if name in AXIS_NAMES:
            continue
        vals = values_for(attr, s.attrs.get(name), vocab.get(name, ()))
        if level < len(vals):
            out.append((name, vals[level]))
    return out


def with_attrs(spec: Spec, detail: str, **changes: Any) -> Spec:
    """``spec`` (one node) with attributes changed (``None``: removed), renamed ``detail``."""
    return _with(spec, detail, **changes)


def _with(spec: Spec, detail: str, **changes: Any) -> Spec:
    attrs = dict(spec.attrs[0])
    for k, v in changes.items():
        if v is None:
            attrs.pop(k, None)
        else:
            attrs[k] = v
    outputs = spec.outputs
    if isinstance(changes.get(COUNT_ATTR), int) and changes[COUNT_ATTR] >= 1:
        outputs = changes[COUNT_ATTR]  # the node gets as many outputs as it says
    return replace(spec, attrs=[attrs], detail=detail, outputs=outputs)


def attribute_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """Candidates of the ``attribute`` dimension, most telling first."""
    base = base_spec(s, opset, "attribute", "")
    schema_attrs = _explored(s, opset)
    vocab = attribute_values(s.domain, s.op)
    for name, attr in schema_attrs.items():  # the default must hold
        if attr.required:
            continue
        if name in s.attrs:
            yield _with(base, f"{name}=absent{suffix}", **{name: None})
        elif _default(attr) is not None:
            yield _with(base, f"{name}=default{suffix}", **{name: _default(attr)})
    single: dict[str, list[Any]] = {}
    for name, attr in schema_attrs.items():
        if name in AXIS_NAMES:
            continue
        single[name] = values_for(attr, s.attrs.get(name), vocab.get(name, ()))
    for name, vals in single.items():  # round robin: every attribute gets a turn early
        for v in vals[:1]:
            yield _with(base, f"{name}={label(v)}{suffix}", **{name: v})
    for name, vals in single.items():
        for v in vals[1:]:
            yield _with(base, f"{name}={label(v)}{suffix}", **{name: v})
    used = combinations_used(s.domain, s.op)
    for (a, va), (b, vb) in itertools.combinations([(n, v[0]) for n, v in single.items() if v], 2):
        if any({a, b} <= combo for combo in used):
            continue
        yield _with(base, f"{a}={label(va)},{b}={label(vb)}{suffix}", **{a: va, b: vb})


def pair_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """Candidates of the ``pair`` dimension: the seed's node beside one with another
    value of one attribute (values, not absences, first)."""
    for spec in attribute_specs(s, opset, suffix):
        if "=absent" in spec.detail or "=default" in spec.detail or "," in spec.detail:
            continue
        if not legal(spec, count=False):
            continue
        yield replace(
            spec,
            attrs=[dict(s.attrs), spec.attrs[0]],
            dimension="pair",
            detail=spec.detail,
        )


def cases(depth: str) -> Iterator[Case]:
    """The ``attribute`` and ``pair`` cases at ``depth``."""
    for s, opset, suffix in targets(depth):
        yield from emit(attribute_specs(s, opset, suffix), budget(depth, "attribute", suffix), s)
        yield from emit(pair_specs(s, opset, suffix), budget(depth, "pair", suffix), s)
