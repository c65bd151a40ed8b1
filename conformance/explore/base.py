"""What every dimension shares: which (seed, opset) pairs a depth explores, a
seed made into a spec, and the budget of cases per op and dimension."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..case import Case
from .seeds import Seed, degenerate, diverse, schema, seeds, versions
from .spec import Feed, Spec, legal, make_case

__all__ = [
    "BUDGET",
    "Target",
    "base_spec",
    "chosen",
    "data_positions",
    "emit",
    "label",
    "seed_at",
    "targets",
]

BUDGET: dict[str, dict[str, int]] = {
    "quick": {
        "attribute": 4,
        "rank": 4,
        "broadcast": 6,
        "axis": 4,
        "size": 3,
        "dtype": 3,
        "empty": 1,
        "pair": 1,
        "inputs": 4,
        "opset": 4,
    },
    "full": {
        "attribute": 24,
        "rank": 12,
        "broadcast": 16,
        "axis": 12,
        "size": 10,
        "dtype": 14,
        "empty": 6,
        "pair": 3,
        "inputs": 12,
        "opset": 8,
    },
}
"""At most this many cases per (op, opset, seed) and dimension, at each depth.
Candidates come in priority order, so the first ones are what ``quick`` keeps.
``broadcast`` cases belong to dimension ``rank`` but have a budget of their own."""
OLD_BUDGET_SHARE = 2
"""An older opset of an op (``full`` only) gets this fraction of the budget."""
SEEDS_AT = {"quick": 1, "full": 3}
"""Representative seeds (distinct node tests, :func:`.seeds.diverse`) explored
per op at the latest opset."""
DEGENERATE_AT = {"quick": 0, "full": 1}
"""Degenerate seeds (:func:`.seeds.degenerate`: an empty input, a scalar where
a shape is usual) explored per op besides, at the latest opset."""

Target = tuple[Seed, int, str]
"""(seed, opset, suffix of its case names)."""


def _valid_at(s: Seed, opset: int) -> bool:
    return legal(base_spec(s, opset, "seed", "probe"), count=False)


def chosen(domain: str, op: str, depth: str) -> list[Seed]:
    """The seeds of ``op`` explored at its latest opset at ``depth``, most
    representative first: valid at that opset, diverse, degenerate ones last."""
    found = seeds().get((domain, op), ())
    known = versions(op, domain)
    if not found or not known:
        return []
    valid = tuple(s for s in found if _valid_at(s, known[-1]))
    picked = diverse(valid, SEEDS_AT[depth])
    extra = [s for s in valid if degenerate(s)][: DEGENERATE_AT[depth]]
    return picked + extra if picked else [s for s in valid if degenerate(s)][:1]


@cache
def seed_at(domain: str, op: str, opset: int) -> Seed | None:
    """The seed explored at an older ``opset`` of ``op``: the most representative
    node test written for that schema version, else the most representative one
    valid at it (``None``: none is)."""
    found = seeds().get((domain, op), ())
    ordered = [s for s in found if s.opset == opset] + [s for s in found if s.opset != opset]
    return next((s for s in ordered if _valid_at(s, opset)), None)


def targets(depth: str) -> Iterator[Target]:
    """The (seed, opset, name suffix) pairs explored at ``depth``: at ``quick``
    the most representative seed of each op at its latest schema version; at
    ``full`` also other diverse seeds and a degenerate one (``@s<k>``), and every
    older schema version (``@v<version>``) with the seed chosen for it."""
    for domain, op in seeds():
        known = versions(op, domain)
        if not known:
            continue
        latest = known[-1]
        for k, s in enumerate(chosen(domain, op, depth)):
            yield s, latest, "" if k == 0 else f"@s{k + 1}"
        if depth == "full":
            for v in reversed(known[:-1]):
                old = seed_at(domain, op, v)
                if old is not None:
                    yield old, v, f"@v{v}"


def budget(depth: str, dimension: str, suffix: str) -> int:
    """How many cases one target gets in ``dimension``."""
    n = BUDGET[depth][dimension]
    return max(1, n // OLD_BUDGET_SHARE) if suffix.startswith("@v") else n


def feeds(s: Seed) -> list[Feed | None]:
    """The seed's inputs as feeds (the seed's values kept: control values, data ranges)."""
    out: list[Feed | None] = []
    for v, slot in zip(s.inputs, s.slots):
        if v is None:
            out.append(None)
            continue
        elem = helper.np_dtype_to_tensor_dtype(v.dtype)
        out.append(Feed(elem, tuple(v.shape), slot.data, v))
    return out


def base_spec(s: Seed, opset: int, dimension: str, detail: str) -> Spec:
    """The seed as a spec of ``dimension`` at ``opset``: its attributes and inputs."""
    return Spec(
        s.op,
        s.domain,
        opset,
        feeds(s),
        [dict(s.attrs)],
        s.outputs,
        dimension,
        detail,
        s.tolerance,
    )


def data_positions(spec: Spec) -> list[int]:
    """Positions of the data inputs."""
    return [i for i, f in enumerate(spec.inputs) if f is not None and f.data]


def label(value: Any) -> str:
    """A short name-safe form of an attribute value."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, onnx.TensorProto):
        return "tensor"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(label(v) for v in value) + "]"
    if isinstance(value, float):
        value = f"{value:g}"
    text = re.sub(r"[^A-Za-z0-9_.,\-\[\]=+]", "_", str(value))
    return text[:40]


def attribute_schema(s: Seed, opset: int) -> dict[str, Any]:
    """The schema's attributes of the seed's op at ``opset``."""
    return dict(schema(s.op, s.domain, opset).attributes)


def emit(
    candidates: Iterable[Spec],
    limit: int,
    seed: Seed | None = None,
    keep: Callable[[Spec], bool] = legal,
) -> Iterator[Case]:
    """The first ``limit`` candidates (names unique) that are legal and not
    dropped (:mod:`.rules`), as lazy cases."""
    from .rules import dropped

    shapes = (
        {
            i: tuple(v.shape)
            for i, (v, sl) in enumerate(zip(seed.inputs, seed.slots))
            if v is not None and sl.data
        }
        if seed is not None
        else None
    )
    seen: set[str] = set()
    for spec in candidates:
        if len(seen) >= limit:
            return
        if spec.name in seen or dropped(spec, shapes) or not keep(spec):
            continue
        seen.add(spec.name)
        yield make_case(spec)


def max_rank(spec: Spec) -> int:
    """The largest rank among the data inputs (0 when none)."""
    ranks = [len(spec.inputs[i].shape) for i in data_positions(spec)]  # type: ignore[union-attr]
    return max(ranks, default=0)


def np_value(elem: int, value: Any) -> np.ndarray:
    """``value`` as an array of ``elem``'s numpy type."""
    return np.asarray(value).astype(helper.tensor_dtype_to_np_dtype(elem))


def target_cases(
    specs: Iterable[Spec], s: Seed, suffix: str, budget: Mapping[str, int], depth: str
) -> Iterator[Case]:
    """The cases of one target's ``specs``, at most ``budget[depth]`` of them
    (half as many at an older opset, ``@v…``)."""
    limit = budget[depth] if not suffix.startswith("@v") else max(1, budget[depth] // 2)
    yield from emit(specs, limit, s)
