"""Dimension ``opset``: each older schema version of an op, at both depths.

A provider that claims an op from an old opset but computes the latest
version's rule (Softmax from opset 1, computed as opset 13 does: along one
axis instead of over everything from ``axis`` on) passes every case at the
latest version. For each older ``since_version`` of each op's schema, the
seed chosen for that version (:func:`.base.seed_at`: a node test written for
it, else the most representative one valid at it) is run unchanged, then with
its axis at each other legal value at the seed's rank where that version's
rule (doc, attribute defaults) differs from the next one's. The oracle judges
each (cases it cannot compute are skipped, as everywhere). ``full`` also
explores every dimension at these versions (``@v<version>`` targets).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..case import Case
from .base import BUDGET, base_spec, emit, max_rank, seed_at
from .seeds import schema, seeds, versions
from .shapes import _axis_slot, _current_axis, _set_axis
from .spec import Spec

__all__ = ["cases", "opset_specs"]


def _rule(op: str, domain: str, opset: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a schema version says the op computes: its doc and its attributes'
    defaults (a version that differs from the next in types only says the same)."""
    sch = schema(op, domain, opset)
    attrs = tuple(sorted((n, str(a.default_value).strip()) for n, a in sch.attributes.items()))
    return " ".join(sch.doc.split()), attrs


def opset_specs(domain: str, op: str, opset: int) -> Iterator[Spec]:
    """The seed at ``opset`` as it is; where that version's rule differs from the
    next version's (:func:`_rule`), then at each other axis of its rank
    (non-negative ones first)."""
    s = seed_at(domain, op, opset)
    if s is None:
        return
    base = base_spec(s, opset, "opset", f"v{opset}")
    yield base
    later = [v for v in versions(op, domain) if v > opset]
    if later and _rule(op, domain, opset) == _rule(op, domain, later[0]):
        return
    where = _axis_slot(s, base)
    rank = max_rank(base)
    if where is None or rank == 0:
        return
    current = _current_axis(s, base, where)
    for axis in [*range(rank), *range(-1, -rank - 1, -1)]:
        if current is not None and axis % rank == current % rank:
            continue
        yield _set_axis(base, where, axis, f"v{opset}_axis={axis}")


def cases(depth: str) -> Iterator[Case]:
    """The ``opset`` cases at ``depth`` (the same at both: they are cheap)."""
    for domain, op in seeds():
        for v in versions(op, domain)[:-1]:
            yield from emit(
                opset_specs(domain, op, v), BUDGET[depth]["opset"], seed_at(domain, op, v)
            )
