"""Dimensions of shape: ``rank``, ``axis``, ``empty`` and ``inputs``.

* ``rank``: the data inputs at every rank from 0 to 5 (the seed's shapes with
  leading dimensions of distinct sizes added, or leading dimensions dropped;
  inputs of lower rank than the largest keep theirs, so broadcasting still
  holds), then broadcasting: each data input of a multi-input op reduced to
  each shape that broadcasts to it (a scalar, ``(1,)``, its suffixes, each of
  its dimensions made 1: a Gemm ``C`` of ``(M, 1)``, ``(1, N)``, ``(N,)``, ``()``).
* ``axis``: an ``axis``/``axes`` attribute or input at every legal value, at
  every rank, negative values first.
* ``empty``: a zero-size dimension in each data input position (with the same
  dimension of the inputs it broadcasts with).
* ``inputs``: each optional input left out, a variadic input given once and
  one time more than the seed does.

Which candidates are legal is decided by onnx's checker and shape inference,
and at load by the oracle; nothing here knows an op by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from ..cases import Case
from .base import base_spec, budget, data_positions, emit, label, max_rank, targets
from .seeds import Seed
from .spec import Feed, Spec

__all__ = ["at_rank", "cases"]

RANKS = (1, 3, 0, 4, 5, 2)
"""Ranks in the order they are tried (the seed's own rank is skipped)."""
PREFIX = (2, 3, 4, 5, 6)
"""Sizes of the leading dimensions added to reach a higher rank (distinct, so a
kernel that mixes up dimensions shows)."""


def _reshape(spec: Spec, shapes: dict[int, tuple[int, ...]], detail: str) -> Spec:
    inputs = list(spec.inputs)
    for i, shape in shapes.items():
        f = inputs[i]
        assert f is not None
        inputs[i] = replace(f, shape=tuple(shape))
    return replace(spec, inputs=inputs, detail=detail)


def at_rank(spec: Spec, rank: int, detail: str = "") -> Spec | None:
    """``spec`` with its data inputs of the largest rank at ``rank`` (``None``: no data)."""
    pos = data_positions(spec)
    if not pos:
        return None
    top = max_rank(spec)
    shapes = {}
    for i in pos:
        s = spec.inputs[i].shape  # type: ignore[union-attr]
        if rank >= top:
            shapes[i] = (PREFIX[: rank - top] + s) if len(s) == top else s
        else:
            shapes[i] = s[max(0, len(s) - rank) :]
    return _reshape(spec, shapes, detail or f"r{rank}")


def rank_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``rank`` candidates: every rank 0..5 but the seed's."""
    base = base_spec(s, opset, "rank", "")
    top = max_rank(base)
    for r in RANKS:
        if r != top:
            spec = at_rank(base, r, f"r{r}{suffix}")
            if spec is not None:
                yield spec


def _broadcastable(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [(), (1,)]
    out += [shape[k:] for k in range(1, len(shape))]
    out += [(*shape[:k], 1, *shape[k + 1 :]) for k in range(len(shape)) if shape[k] != 1]
    seen: list[tuple[int, ...]] = []
    for x in out:
        if x != shape and x not in seen:
            seen.append(x)
    return seen


def broadcast_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """Broadcasting candidates (dimension ``rank``): each data input of a
    multi-input op at each shape that broadcasts to its own."""
    base = base_spec(s, opset, "rank", "")
    pos = data_positions(base)
    if len(pos) < 2:
        return
    variants = {i: _broadcastable(base.inputs[i].shape) for i in pos}  # type: ignore[union-attr]
    depth = max((len(v) for v in variants.values()), default=0)
    for k in range(depth):  # round robin over the inputs
        for i in pos:
            if k < len(variants[i]):
                shape = variants[i][k]
                yield _reshape(base, {i: shape}, f"bcast_x{i}={label(list(shape))}{suffix}")


def _axis_slot(s: Seed, spec: Spec) -> tuple[str, int | str] | None:
    """Where the op takes its axis: (``attr``, name) or (``input``, position)."""
    from .base import attribute_schema

    attrs = attribute_schema(s, spec.opset)
    for name in ("axis", "axes"):
        if name in attrs:
            return ("attr", name)
    for i, slot in enumerate(s.slots):
        if slot.name.lower() in ("axis", "axes") and s.inputs[i] is not None:
            return ("input", i)
    return None


def _set_axis(spec: Spec, where: tuple[str, int | str], axis: int, detail: str) -> Spec:
    kind, key = where
    if kind == "attr":
        attrs = dict(spec.attrs[0])
        name = str(key)
        was = attrs.get(name)
        attrs[name] = [axis] if isinstance(was, list) or name == "axes" else axis
        return replace(spec, attrs=[attrs], detail=detail)
    i = int(key)
    f = spec.inputs[i]
    assert f is not None and f.value is not None
    value = np.full(f.value.shape if f.value.size == 1 else (1,), axis, dtype=f.value.dtype)
    inputs = list(spec.inputs)
    inputs[i] = Feed(f.elem, tuple(value.shape), False, value)
    return replace(spec, inputs=inputs, detail=detail)


def axis_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``axis`` candidates: every axis at every rank, negative ones (at every rank)
    first."""
    base = base_spec(s, opset, "axis", "")
    where = _axis_slot(s, base)
    if where is None or not data_positions(base):
        return
    top = max_rank(base)
    ranks = [top] + [r for r in (1, 2, 3, 4, 5) if r != top]
    order = [-(k + 1) for k in range(5)] + list(range(5))
    current = _current_axis(s, base, where)
    pairs = [(axis, r) for axis in order for r in ranks if -r <= axis < r]
    # the axis the seed already uses comes last: a kernel that ignores the axis
    # passes those
    pairs.sort(key=lambda p: current is not None and p[0] % p[1] == current % p[1])
    for axis, r in pairs:
        shaped = at_rank(base, r, "") if r != top else base
        if shaped is not None:
            yield _set_axis(shaped, where, axis, f"r{r}_axis={axis}{suffix}")


def _current_axis(s: Seed, spec: Spec, where: tuple[str, int | str]) -> int | None:
    """The axis the seed uses (given or the schema's default; ``None``: several or unknown)."""
    from onnx import helper

    from .base import attribute_schema

    kind, key = where
    if kind == "attr":
        value = spec.attrs[0].get(str(key))
        if value is None:
            d = attribute_schema(s, spec.opset)[str(key)].default_value
            value = helper.get_attribute_value(d) if d is not None and d.type else None
    else:
        f = spec.inputs[int(key)]
        value = None if f is None or f.value is None else f.value.ravel().tolist()
    if isinstance(value, list):
        value = value[0] if len(value) == 1 else None
    return value if isinstance(value, int) else None


def empty_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``empty`` candidates: each dimension of each data input made 0, with the
    dimension it broadcasts with in the other inputs."""
    base = base_spec(s, opset, "empty", "")
    pos = data_positions(base)
    for j in pos:
        sj = base.inputs[j].shape  # type: ignore[union-attr]
        for d in range(len(sj)):
            shapes = {j: (*sj[:d], 0, *sj[d + 1 :])}
            for k in pos:
                sk = base.inputs[k].shape  # type: ignore[union-attr]
                dk = d - (len(sj) - len(sk))
                if k != j and 0 <= dk < len(sk) and sk[dk] == sj[d] and sk[dk] != 1:
                    shapes[k] = (*sk[:dk], 0, *sk[dk + 1 :])
            yield _reshape(base, shapes, f"x{j}_d{d}=0{suffix}")
            if len(shapes) > 1:
                yield _reshape(base, {j: shapes[j]}, f"x{j}_d{d}=0_alone{suffix}")


def inputs_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``inputs`` candidates: optional inputs left out, variadic ones resized."""
    base = base_spec(s, opset, "inputs", "")
    for i, slot in enumerate(s.slots):
        if slot.option == "optional" and base.inputs[i] is not None:
            inputs = list(base.inputs)
            inputs[i] = None
            while inputs and inputs[-1] is None:
                inputs.pop()
            yield replace(base, inputs=inputs, detail=f"no_{slot.name}{suffix}")
    var = [i for i, slot in enumerate(s.slots) if slot.option == "variadic"]
    if var and base.inputs[var[-1]] is not None:
        inputs = [*base.inputs, base.inputs[var[-1]]]
        yield replace(base, inputs=inputs, detail=f"{s.slots[var[0]].name}_x{len(var) + 1}{suffix}")
        if len(var) > 1:
            inputs = base.inputs[: var[0] + 1]
            yield replace(base, inputs=inputs, detail=f"{s.slots[var[0]].name}_x1{suffix}")


def cases(depth: str) -> Iterator[Case]:
    """The ``rank``, ``axis``, ``empty`` and ``inputs`` cases at ``depth``."""
    for s, opset, suffix in targets(depth):
        n = budget(depth, "rank", suffix)
        yield from emit(rank_specs(s, opset, suffix), n, s)
        yield from emit(broadcast_specs(s, opset, suffix), n, s)
        yield from emit(axis_specs(s, opset, suffix), budget(depth, "axis", suffix), s)
        yield from emit(empty_specs(s, opset, suffix), budget(depth, "empty", suffix), s)
        yield from emit(inputs_specs(s, opset, suffix), budget(depth, "inputs", suffix), s)
