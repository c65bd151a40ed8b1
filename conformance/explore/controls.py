"""Dimension ``control``: the values of control inputs, explored.

Every other dimension keeps a control input (indices, a shape, pads, the
bounds of a slice) at the seed's value, so a Gather that mishandles a scalar
index, a Reshape that ignores ``0``, a Slice that does not clamp pass them
all. Here each control input, found by its schema name (:data:`HANDLERS`),
takes legal values the seed does not show:

* ``indices``: ranks 0 to 3 (Gather), each value drawn over ``[-n, n-1]``
  with both ends present; GatherElements/ScatterElements along the axis,
  GatherND/ScatterND tuples of 1 to ``r`` components; scatters get distinct
  targets (the standard leaves duplicates unordered), updates reshaped to fit;
* ``shape``: Reshape with ``0`` (copy), ``-1`` (infer), trailing 1s, and
  ``allowzero=1`` with an empty input; Expand with 1s, a shorter shape, a new
  leading dimension, a 1 of the input broadcast;
* ``starts``/``ends``/``axes``/``steps``: negative starts and ends, negative
  steps, bounds far out of range (clamped), an empty slice, every axis reversed;
* ``pads``: asymmetric, negative (cropping) and mixed pads;
* ``repeats``: all 1, 1 beside larger ones, every axis repeated;
* ``split``: uneven parts (one of 1), a part of 0;
* ``K``: 1 and the whole axis;
* ``axes`` (reductions, Squeeze, Unsqueeze): several axes, negative ones, out
  of order, every axis, none.

A data input the seed gives empty is made non-empty (its 0s become
:data:`FILL`) first. Candidates are kept by onnx's checker and strict shape
inference (which read control values: they are initializers) and by the
oracle at load, like every explored case.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
from onnx import helper

from ..case import Case
from .base import attribute_schema, base_spec, data_positions, label, target_cases, targets
from .seeds import Seed
from .spec import Feed, Spec

__all__ = ["cases_of", "BUDGET", "HANDLERS", "INDEXING", "cases"]

BUDGET = {"quick": 4, "full": 16}
"""``control`` cases per (op, opset, seed); older opsets get half."""
FILL = 5
"""The size given to a dimension the seed has as 0."""
INDEXING = {
    "Gather": "take",
    "GatherElements": "along",
    "ScatterElements": "along",
    "GatherND": "nd",
    "ScatterND": "nd",
}
"""How each op reads its ``indices``: one value per output element along the
axis (``take``: any rank), one per element of an indices tensor of the data's
rank (``along``), tuples of leading coordinates (``nd``). An op whose name
starts with Scatter writes where its indices say: they are drawn distinct."""
SHAPES = {"Reshape": "reshape", "Expand": "broadcast"}
"""What a ``shape`` input means to each op: the output's shape with 0 and -1
(``reshape``), a shape to broadcast with (``broadcast``)."""
INT64_MAX = 2**63 - 1


def _rng(spec: Spec, tag: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{spec.name}/{tag}".encode()))


def _attr(s: Seed, spec: Spec, name: str, default: Any = None) -> Any:
    if name in spec.attrs[0]:
        return spec.attrs[0][name]
    a = attribute_schema(s, spec.opset).get(name)
    if a is not None and a.default_value is not None and a.default_value.type:
        return helper.get_attribute_value(a.default_value)
    return default


def _set(spec: Spec, i: int, value: Any, like: Feed | None = None) -> list[Feed | None]:
    """``spec``'s inputs with control input ``i`` set to ``value`` (the type of
    ``like`` or of the input it replaces)."""
    inputs = list(spec.inputs)
    while len(inputs) <= i:
        inputs.append(None)
    ref = like or inputs[i]
    assert ref is not None
    v = np.asarray(value, dtype=np.asarray(ref.value).dtype)
    inputs[i] = Feed(ref.elem, tuple(v.shape), False, v)
    return inputs


def _with(spec: Spec, detail: str, inputs: list[Feed | None], **attrs: Any) -> Spec:
    merged = {k: v for k, v in {**spec.attrs[0], **attrs}.items() if v is not None}
    return replace(spec, inputs=inputs, attrs=[merged], detail=detail)


def _draw(rng: np.random.Generator, shape: tuple[int, ...], n: int) -> np.ndarray:
    """Indices of ``shape`` over ``[-n, n-1]``, both ends present where two fit."""
    x = rng.integers(-n, n, size=shape)
    flat = x.reshape(-1)
    if flat.size >= 2:
        flat[rng.permutation(flat.size)[:2]] = [-n, n - 1]
    elif flat.size == 1:
        flat[0] = -1 if n > 1 else 0
    return flat.reshape(shape)


def _distinct(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """``m`` distinct positions of ``n`` (``m <= n``), each written negative half the time."""
    x = rng.permutation(n)[:m]
    return np.where(rng.integers(0, 2, size=m) == 1, x - n, x)


def indices_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``indices`` candidates (see the module docstring)."""
    kind = INDEXING.get(s.op)
    if kind is None:
        return
    d = data_positions(spec)[0]
    data = spec.inputs[d]
    assert data is not None
    shape, r = data.shape, len(data.shape)
    scatter = s.op.startswith("Scatter")
    upd = next((k for k in data_positions(spec) if k != d), None)
    if kind == "take" and r:
        n = shape[int(_attr(s, spec, "axis", 0)) % r]
        ishape: tuple[int, ...]
        ishapes: tuple[tuple[int, ...], ...] = ((), (2, 3), (2, 1, 3), (4,))
        for ishape in ishapes:
            rng = _rng(spec, str(ishape))
            yield _with(spec, f"indices_r{len(ishape)}", _set(spec, i, _draw(rng, ishape, n)))
    elif kind == "along" and r:
        axis = int(_attr(s, spec, "axis", 0)) % r
        n = shape[axis]
        for m in (n, 1, 2 * n):
            if scatter and m > n:
                continue
            ishape = (*shape[:axis], m, *shape[axis + 1 :])
            rng = _rng(spec, str(m))
            if scatter:
                lines = [_distinct(rng, m, n) for _ in range(int(np.prod(ishape)) // m)]
                value = np.moveaxis(
                    np.array(lines).reshape(*ishape[:axis], *ishape[axis + 1 :], m), -1, axis
                )
            else:
                value = _draw(rng, ishape, n)
            inputs = _set(spec, i, value)
            if upd is not None:
                inputs[upd] = replace(inputs[upd], shape=ishape)  # type: ignore[arg-type,type-var]
            yield _with(spec, f"indices_axis{axis}_m{m}", inputs)
    elif kind == "nd" and r:
        b = int(_attr(s, spec, "batch_dims", 0))
        for k, lead in ((1, (3,)), (r - b, (2,)), (max(1, r - b - 1), (2, 2))):
            if k > r - b or (b and lead):
                continue
            dims = shape[b : b + k]
            count = int(np.prod(lead))
            rng = _rng(spec, f"{k}{lead}")
            if scatter:
                total = int(np.prod(dims))
                count = min(count, total)
                flat = rng.permutation(total)[:count]
                tup = np.stack(np.unravel_index(flat, dims), -1)
                tup = np.where(rng.integers(0, 2, size=tup.shape) == 1, tup - np.array(dims), tup)
                lead = (count,)
            else:
                tup = np.stack([_draw(rng, (count,), n) for n in dims], -1)
            value = tup.reshape(*lead, k)
            inputs = _set(spec, i, value)
            if upd is not None:
                inputs[upd] = replace(inputs[upd], shape=(*lead, *shape[b + k :]))  # type: ignore[arg-type,type-var]
            yield _with(spec, f"indices_k{k}_{label(list(lead))}", inputs)


def shape_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``shape`` candidates of Reshape and Expand."""
    kind = SHAPES.get(s.op)
    d = data_positions(spec)[0]
    data = spec.inputs[d]
    assert data is not None
    sh, r = list(data.shape), len(data.shape)
    if kind == "reshape":
        allow = 0 if "allowzero" in attribute_schema(s, spec.opset) else None
        for target in ([-1], [0, -1], [-1, sh[-1]] if r else [1], [*([0] * r), 1], [1, -1, 1]):
            yield _with(spec, f"shape={label(target)}", _set(spec, i, target), allowzero=allow)
        if allow is not None and r >= 1:
            emptied = [0, *sh[1:]]
            inputs = _set(spec, i, [*sh[1:], 0])
            inputs[d] = replace(data, shape=tuple(emptied))
            yield _with(spec, "shape=allowzero_empty", inputs, allowzero=1)
            yield _with(spec, "shape=allowzero_plain", _set(spec, i, sh[::-1]), allowzero=1)
    elif kind == "broadcast":
        ones = [3 if v == 1 else v for v in sh]
        for target in ([1] * r, [1], [3, *sh], ones, [2, *([1] * r)]):
            yield _with(spec, f"shape={label(target)}", _set(spec, i, target))


def slice_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``starts``/``ends``/``axes``/``steps`` candidates of Slice (inputs 1 to 4)."""
    d = data_positions(spec)[0]
    data = spec.inputs[d]
    ref = spec.inputs[i]
    assert data is not None and ref is not None
    sh, r = data.shape, len(data.shape)
    if not r:
        return
    big = INT64_MAX if np.asarray(ref.value).dtype == np.int64 else 2**31 - 1
    n0, n1 = sh[0], sh[-1]
    plans: list[tuple[str, list[int], list[int], list[int], list[int]]] = [
        ("negative", [-n1 + 1], [-1], [-1], [1]),
        ("reverse", [-1], [-big - 1], [-1], [-1]),
        ("clamped", [-1000], [1000], [0], [2]),
        ("step-2", [n0 + 5], [-n0 - 5], [0], [-2]),
        ("empty", [n1 - 1], [0], [-1], [1]),
        ("all_reversed", [-1] * r, [-big - 1] * r, list(range(-r, 0)), [-1] * r),
    ]
    for name, starts, ends, axes, steps in plans:
        inputs = list(spec.inputs)
        for k, v in zip(range(1, 5), (starts, ends, axes, steps)):
            inputs = _set(replace(spec, inputs=inputs), k, v, like=ref)
        yield _with(spec, f"slice_{name}", inputs)


def pads_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``pads`` candidates: asymmetric, negative and mixed (every axis; the
    ``axes`` input, if any, left out)."""
    d = data_positions(spec)[0]
    data = spec.inputs[d]
    assert data is not None
    sh, r = data.shape, len(data.shape)
    if not r:
        return
    base = replace(spec, inputs=spec.inputs[:3])
    last = r - 1
    plans = {
        "asymmetric": {(0, 0): 1, (last, 1): 2},
        "negative": {(last, 0): -1, (0, 1): -1},
        "mixed": {(last, 0): 2, (last, 1): -1, (0, 0): -1},
        "end_only": {(0, 1): 1, (last, 1): 1},
    }
    for name, where in plans.items():
        pads = [0] * (2 * r)
        for (axis, end), v in where.items():
            if v < 0 and sh[axis] < 2:
                continue
            pads[axis + end * r] = min(v, max(sh[axis] - 1, 0)) if v > 0 else v
        if any(pads):
            yield _with(base, f"pads_{name}", _set(base, i, pads))


def repeats_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``repeats`` candidates of Tile."""
    r = len(spec.inputs[data_positions(spec)[0]].shape)  # type: ignore[union-attr]
    for target in ([1] * r, [2, *([1] * (r - 1))], [*([1] * (r - 1)), 3], [2] * r):
        if len(target) == r:
            yield _with(spec, f"repeats={label(target)}", _set(spec, i, target))


def split_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``split`` candidates: uneven parts, a part of 0 (as many outputs as parts)."""
    data = spec.inputs[data_positions(spec)[0]]
    assert data is not None
    if not data.shape:
        return
    n = data.shape[int(_attr(s, spec, "axis", 0)) % len(data.shape)]
    for parts in ([1, n - 1], [n - 1, 1], [1, 1, n - 2], [0, n]):
        if min(parts) >= 0 and len(parts) <= n + 1:
            yield replace(
                _with(spec, f"split={label(parts)}", _set(spec, i, parts), num_outputs=None),
                outputs=len(parts),
            )


def k_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``K`` candidates of TopK: 1 and the whole axis."""
    data = spec.inputs[data_positions(spec)[0]]
    assert data is not None
    if not data.shape:
        return
    n = data.shape[int(_attr(s, spec, "axis", -1)) % len(data.shape)]
    for k in (1, n):
        yield _with(spec, f"K={k}", _set(spec, i, [k]))


def axes_specs(s: Seed, spec: Spec, i: int) -> Iterator[Spec]:
    """``axes`` candidates: several axes, negative, out of order, the size-1
    ones (Squeeze), all, none (which apply is left to shape inference)."""
    if s.op == "Slice" or s.op == "Pad":
        return
    r = len(spec.inputs[data_positions(spec)[0]].shape)  # type: ignore[union-attr]
    d = spec.inputs[data_positions(spec)[0]]
    ones = [a - r for a in reversed(range(r)) if d is not None and d.shape[a] == 1]
    for target in ([-1, 0], ones, [0, -1], list(range(-r, 0)), [1, -1], []):
        if r and len({a % r for a in target}) < len(target):
            continue  # an axis twice
        if target or s.op.startswith("Reduce"):
            yield _with(spec, f"axes={label(target)}", _set(spec, i, target))


HANDLERS: dict[str, Callable[[Seed, Spec, int], Iterator[Spec]]] = {
    "indices": indices_specs,
    "shape": shape_specs,
    "starts": slice_specs,
    "pads": pads_specs,
    "repeats": repeats_specs,
    "split": split_specs,
    "k": k_specs,
    "axes": axes_specs,
}
"""Candidates for each control input, by its schema name (lower-cased)."""


def _filled(spec: Spec) -> Spec:
    """``spec`` with its data inputs' zero-size dimensions made :data:`FILL`."""
    inputs = [
        replace(f, shape=tuple(FILL if v == 0 else v for v in f.shape))
        if f is not None and f.data and 0 in f.shape
        else f
        for f in spec.inputs
    ]
    return replace(spec, inputs=inputs)


def control_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``control`` candidates: each control input's handler in turn, round robin."""
    base = _filled(base_spec(s, opset, "control", ""))
    if not data_positions(base):
        return
    streams = []
    for i, slot in enumerate(s.slots):
        f = base.inputs[i]
        handler = HANDLERS.get(slot.name.lower())
        if f is not None and not f.data and handler is not None:
            streams.append(handler(s, base, i))
    for spec in itertools.chain.from_iterable(itertools.zip_longest(*streams)):
        if spec is not None:
            yield replace(spec, detail=f"{spec.detail}{suffix}")


def cases_of(s: Seed, opset: int, suffix: str, depth: str) -> Iterator[Case]:
    """The cases of one target (seed, opset, name suffix) at ``depth``."""
    yield from target_cases(control_specs(s, opset, suffix), s, suffix, BUDGET, depth)


def cases(depth: str) -> Iterator[Case]:
    """The cases of this dimension at ``depth``."""
    for s, opset, suffix in targets(depth):
        yield from cases_of(s, opset, suffix, depth)
