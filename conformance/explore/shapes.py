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

import itertools
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from ..case import Case
from .base import base_spec, budget, data_positions, emit, feeds, label, max_rank, targets
from .rules import broadcast_positions
from .seeds import Seed, seeds
from .spec import Feed, Spec, build, infer

__all__ = ["at_rank", "cases"]

RANKS = (5, 1, 0, 4, 2, 3)
"""Ranks in the order they are tried (the seed's own rank is skipped): the
highest (kernels written for at most 4 dimensions), a vector, a scalar, then
the rest."""
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


def _rank_free(s: Seed, spec: Spec) -> Spec:
    """``spec`` without the optional integer-list attributes as long as the
    data's rank (Transpose's ``perm``): their default follows any rank, the
    seed's value only its own."""
    from .base import attribute_schema

    top = max_rank(spec)
    attrs = dict(spec.attrs[0])
    for name, attr in attribute_schema(s, spec.opset).items():
        value = attrs.get(name)
        if not attr.required and isinstance(value, list) and top and len(value) == top:
            del attrs[name]
    return replace(spec, attrs=[attrs])


def rank_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``rank`` candidates: every rank 0..5 but the seed's."""
    base = _rank_free(s, base_spec(s, opset, "rank", ""))
    top = max_rank(base)
    ranks: tuple[int, ...] = RANKS
    if len(broadcast_positions(base)) >= 2:
        ranks = (0, *(r for r in RANKS if r != 0))  # scalar with scalar first
    for r in ranks:
        if r != top:
            spec = at_rank(base, r, f"r{r}{suffix}")
            if spec is not None:
                yield spec


def to_target(target: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every shape that broadcasts to ``target``, most telling first: a scalar,
    a column (the last dimension 1), a row (every dimension but the last 1), the
    last dimension alone, ``(1,)``, the target itself, then every other suffix
    of the target with any of its dimensions made 1."""
    r = len(target)
    out: list[tuple[int, ...]] = [()]
    if r:
        out += [(*target[:-1], 1), (*(1,) * (r - 1), target[-1]), target[-1:], (1,), target]
    for k in range(r, 0, -1):
        suffix = target[r - k :]
        free = [p for p in range(k) if suffix[p] != 1]
        for mask in itertools.product((False, True), repeat=len(free)):
            shape = list(suffix)
            for p, ones in zip(free, mask):
                if ones:
                    shape[p] = 1
            out.append(tuple(shape))
    return list(dict.fromkeys(out))


def _output_shape(spec: Spec) -> tuple[int, ...] | None:
    try:
        _, dims = infer(build(spec))[0]
    except Exception:
        return None
    if dims is None or any(d is None for d in dims):
        return None
    return tuple(int(d or 0) for d in dims)


def broadcast_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """Broadcasting candidates (dimension ``rank``): each input the schema lets
    broadcast (every input of a multidirectional op; the named ones of a
    unidirectional op, such as Gemm's ``C``), at every shape that broadcasts
    to the op's output (:func:`to_target`): Gemm's ``C`` at ``(M, N)``,
    ``(M, 1)``, ``(1, N)``, ``(N,)``, ``(1,)`` and ``()``; then pairs of inputs
    that broadcast against each other (``(M, 1)`` with ``(1, N)``)."""
    base = base_spec(s, opset, "rank", "")
    pos = broadcast_positions(base)
    target = _output_shape(base)
    if not pos or target is None or (len(pos) < 2 and len(data_positions(base)) < 2):
        return
    own = {i: base.inputs[i].shape for i in pos}  # type: ignore[union-attr]
    variants = {i: [x for x in to_target(target) if x != own[i]] for i in pos}
    depth = max((len(v) for v in variants.values()), default=0)
    for k in range(depth):  # round robin over the inputs
        for i in pos:
            if k < len(variants[i]):
                shape = variants[i][k]
                yield _reshape(base, {i: shape}, f"bcast_x{i}={label(list(shape))}{suffix}")
        if k == 1 and len(target) >= 2:
            for i, j in itertools.permutations(pos, 2):
                col, row = (*target[:-1], 1), (*(1,) * (len(target) - 1), target[-1])
                detail = f"bcast_x{i}={label(list(col))},x{j}={label(list(row))}{suffix}"
                yield _reshape(base, {i: col, j: row}, detail)


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


AXIS_RANKS = (2, 4, 3, 1, 5)
"""Ranks the axis is explored at after the seed's own (the common ones first)."""


def axis_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``axis`` candidates: every axis at every rank, the seed's rank then
    :data:`AXIS_RANKS` taking turns (so the first few cases are at several
    ranks), negative axes first at each; the axis the seed already uses comes
    last (a kernel that ignores the axis passes those)."""
    base = base_spec(s, opset, "axis", "")
    where = _axis_slot(s, base)
    if where is None or not data_positions(base):
        return
    top = max_rank(base)
    ranks = [top] + [r for r in AXIS_RANKS if r != top]
    current = _current_axis(s, base, where)
    turns: list[list[tuple[int, int]]] = []
    last: list[tuple[int, int]] = []
    for r in ranks:
        axes = [-(k + 1) for k in range(r)] + list(range(r))
        same = [a for a in axes if current is not None and a % r == current % r]
        turns.append([(a, r) for a in axes if a not in same])
        last += [(a, r) for a in same]
    pairs = [p for k in range(10) for turn in turns if k < len(turn) for p in turn[k : k + 1]]
    for axis, r in pairs + last:
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


SIZES = (7, 1, 5)
"""Sizes a data dimension is given in the ``size`` dimension: 7 and 5 are odd
and prime (no attribute divides them: Split's ``num_outputs``, groups, block
sizes), 1 is the size broadcasting and squeezing treat apart."""


def _resized(spec: Spec, j: int, d: int, n: int, alone: bool) -> dict[int, tuple[int, ...]]:
    """New shapes with dimension ``d`` of input ``j`` at size ``n``: with every
    dimension of the same size in every data input (one symbol: Gemm's ``K`` in
    ``A`` and ``B``), or ``alone`` with the dimensions it broadcasts with."""
    pos = data_positions(spec)
    sj = spec.inputs[j].shape  # type: ignore[union-attr]
    old = sj[d]
    out = {}
    for k in pos:
        sk = list(spec.inputs[k].shape)  # type: ignore[union-attr]
        if alone or old == 1:
            dk = d - (len(sj) - len(sk))
            if (k == j or (0 <= dk < len(sk) and sk[dk] == old != 1)) and 0 <= dk < len(sk):
                sk[dk] = n
        else:
            sk = [n if x == old else x for x in sk]
        out[k] = tuple(sk)
    return out


def size_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``size`` candidates: each dimension of the largest data input at each of
    :data:`SIZES` (the op's axis first), and the axis at size 7 crossed with each
    integer attribute's other values (``num_outputs=3`` on a length of 7)."""
    from .attributes import changes, with_attrs

    base = base_spec(s, opset, "size", "")
    pos = data_positions(base)
    if not pos:
        return
    top = max_rank(base)
    j = next(i for i in pos if len(base.inputs[i].shape) == top)  # type: ignore[union-attr]
    shape = base.inputs[j].shape  # type: ignore[union-attr]
    dims = list(reversed(range(top)))
    where = _axis_slot(s, base)
    axis = _current_axis(s, base, where) if where is not None else None
    if isinstance(axis, int) and -top <= axis < top:
        dims.remove(axis % top)
        dims.insert(0, axis % top)
    ints = [(k, v) for level in (0, 1) for k, v in changes(s, opset, level) if isinstance(v, int)]
    for n in SIZES:
        for rank, d in enumerate(dims):
            if shape[d] == n:
                continue
            together = _resized(base, j, d, n, alone=False)
            alone = _resized(base, j, d, n, alone=True)
            yield _reshape(base, together, f"x{j}_d{d}={n}{suffix}")
            if alone != together:
                yield _reshape(base, alone, f"x{j}_d{d}={n}_alone{suffix}")
            if rank == 0 and n != 1:  # the axis crossed with the integer attributes
                for name, v in ints:
                    spec = _reshape(base, together, "")
                    yield with_attrs(spec, f"x{j}_d{d}={n},{name}={label(v)}{suffix}", **{name: v})


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


def _borrowed(s: Seed, base: Spec, i: int) -> list[Feed]:
    """Feeds for the optional input ``i`` the seed leaves out: as the other node
    tests of the op give it (those of the seed's opset first), and for a data
    input also shaped like the seed's other inputs of its type (LayerNorm's
    ``B`` like its ``Scale``)."""
    others = sorted(seeds().get((s.domain, s.op), ()), key=lambda t: t.opset != s.opset)
    out: list[Feed] = []
    for t in others:
        if i < len(t.inputs) and t.inputs[i] is not None and t.slots[i].name == s.slots[i].name:
            out.extend(f for f in feeds(t)[i : i + 1] if f is not None)
    slot = s.slots[i]
    if slot.data:
        for k, f in enumerate(base.inputs):
            if f is not None and f.data and k != 0 and s.slots[k].type_param == slot.type_param:
                out.append(Feed(f.elem, f.shape, True, f.value))
    unique: list[Feed] = []
    for f in out:
        if all(f.shape != g.shape or f.data != g.data for g in unique):
            unique.append(f)
    return unique[:2]


def _trim(inputs: list[Feed | None]) -> list[Feed | None]:
    while inputs and inputs[-1] is None:
        inputs.pop()
    return inputs


def _input_variants(s: Seed, base: Spec, suffix: str) -> Iterator[Spec]:
    """Optional inputs left out, given where the seed leaves them out, one swapped
    for another (Resize's ``scales`` for its ``sizes``)."""
    padded = list(base.inputs) + [None] * (len(s.slots) - len(base.inputs))
    optional = [i for i, slot in enumerate(s.slots) if slot.option == "optional"]
    present = [i for i in optional if padded[i] is not None]
    absent = [i for i in optional if padded[i] is None]
    for i in present:
        inputs = list(padded)
        inputs[i] = None
        yield replace(base, inputs=_trim(inputs), detail=f"no_{s.slots[i].name}{suffix}")
    given = {i: _borrowed(s, base, i) for i in absent}
    for i in absent:
        for n, f in enumerate(given[i]):
            inputs = list(padded)
            inputs[i] = f
            tag = "" if n == 0 else f"={label(list(f.shape))}"
            yield replace(base, inputs=_trim(inputs), detail=f"with_{s.slots[i].name}{tag}{suffix}")
    for i in present:
        for k in absent:
            for f in given[k][:1]:
                inputs = list(padded)
                inputs[i], inputs[k] = None, f
                detail = f"no_{s.slots[i].name},with_{s.slots[k].name}{suffix}"
                yield replace(base, inputs=_trim(inputs), detail=detail)


def _variadic(s: Seed, base: Spec, suffix: str) -> Iterator[Spec]:
    """A variadic input given one time more than the seed does, and once."""
    var = [i for i, slot in enumerate(s.slots) if slot.option == "variadic"]
    if var and base.inputs[var[-1]] is not None:
        inputs = [*base.inputs, base.inputs[var[-1]]]
        yield replace(base, inputs=inputs, detail=f"{s.slots[var[0]].name}_x{len(var) + 1}{suffix}")
        if len(var) > 1:
            inputs = base.inputs[: var[0] + 1]
            yield replace(base, inputs=inputs, detail=f"{s.slots[var[0]].name}_x1{suffix}")


def inputs_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``inputs`` candidates: each variant of the inputs (:func:`_input_variants`),
    then each of them crossed with each attribute's non-default values (the
    ``inputs`` dimension times the ``attribute`` one: ReduceSum without ``axes``
    and with ``noop_with_empty_axes=1``, Pad without ``constant_value`` in each
    ``mode``, Clip with only ``max``)."""
    from .attributes import changes, with_attrs

    base = base_spec(s, opset, "inputs", "")
    variants = list(_input_variants(s, base, ""))
    for v in variants:
        yield replace(v, detail=f"{v.detail}{suffix}")
    yield from _variadic(s, base, suffix)
    for level in range(4):
        values = changes(s, opset, level)
        if not values:
            break
        for v in variants:
            for name, value in values:
                detail = f"{v.detail},{name}={label(value)}{suffix}"
                yield with_attrs(v, detail, **{name: value})


def cases(depth: str) -> Iterator[Case]:
    """The ``rank``, ``axis``, ``size``, ``empty`` and ``inputs`` cases at ``depth``."""
    for s, opset, suffix in targets(depth):
        n = budget(depth, "rank", suffix)
        yield from emit(rank_specs(s, opset, suffix), n, s)
        yield from emit(broadcast_specs(s, opset, suffix), budget(depth, "broadcast", suffix), s)
        yield from emit(axis_specs(s, opset, suffix), budget(depth, "axis", suffix), s)
        yield from emit(size_specs(s, opset, suffix), budget(depth, "size", suffix), s)
        yield from emit(empty_specs(s, opset, suffix), budget(depth, "empty", suffix), s)
        yield from emit(inputs_specs(s, opset, suffix), budget(depth, "inputs", suffix), s)
