"""What every dimension shares: which (seed, opset) pairs a depth explores, a
seed made into a spec, and the budget of cases per op and dimension."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..cases import Case
from .seeds import Seed, schema, seeds, versions
from .spec import Feed, Spec, legal, make_case

__all__ = [
    "BUDGET",
    "Target",
    "base_spec",
    "data_positions",
    "emit",
    "label",
    "targets",
]

BUDGET: dict[str, dict[str, int]] = {
    "quick": {"attribute": 4, "rank": 3, "axis": 2, "dtype": 3, "empty": 1, "pair": 1, "inputs": 1},
    "full": {
        "attribute": 24,
        "rank": 12,
        "axis": 12,
        "dtype": 14,
        "empty": 6,
        "pair": 3,
        "inputs": 4,
    },
}
"""At most this many cases per (op, opset, seed) and dimension, at each depth.
Candidates come in priority order, so the first ones are what ``quick`` keeps."""
OLD_BUDGET_SHARE = 2
"""An older opset of an op (``full`` only) gets this fraction of the budget."""
SEEDS_AT = {"quick": 1, "full": 2}
"""Seeds (distinct node tests) explored per op, at the latest opset."""

Target = tuple[Seed, int, str]
"""(seed, opset, suffix of its case names)."""


def targets(depth: str) -> Iterator[Target]:
    """The (seed, opset, name suffix) pairs explored at ``depth``: at ``quick``
    the smallest seed of each op at its latest schema version; at ``full`` also a
    second seed, and every older schema version the seed's node is valid for."""
    for (domain, op), found in seeds().items():
        known = versions(op, domain)
        if not known:
            continue
        latest = known[-1]
        for k, s in enumerate(found[: SEEDS_AT[depth]]):
            yield s, latest, "" if k == 0 else f"@s{k + 1}"
        if depth == "full":
            for v in reversed(known[:-1]):
                yield found[0], v, f"@v{v}"


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
