"""Dimension ``dtype``: every element type the schema allows for each type constraint.

For each type constraint that binds a data input, every allowed tensor type
among :data:`TYPES` is given to all the inputs it binds (control inputs bound
to it, such as Clip's bounds, are cast); data values are drawn for the type
(:func:`conformance.explore.spec.draw`: unsigned ones non-negative, small
integers for a type the seed did not have, so products do not overflow).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import onnx

from ..case import Case
from .base import base_spec, budget, emit, targets
from .seeds import Seed
from .spec import Feed, Spec

__all__ = ["TYPES", "cases"]

_T = onnx.TensorProto
TYPES: dict[str, int] = {
    "float": _T.FLOAT,
    "float16": _T.FLOAT16,
    "int32": _T.INT32,
    "double": _T.DOUBLE,
    "uint8": _T.UINT8,
    "bfloat16": _T.BFLOAT16,
    "int64": _T.INT64,
    "int8": _T.INT8,
    "bool": _T.BOOL,
    "string": _T.STRING,
    "int16": _T.INT16,
    "uint16": _T.UINT16,
    "uint32": _T.UINT32,
    "uint64": _T.UINT64,
}
"""The element types explored, in the order they are tried."""


def dtype_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``dtype`` candidates: each type constraint of a data input at each allowed type."""
    from .seeds import schema, slots

    base = base_spec(s, opset, "dtype", "")
    sl = slots(schema(s.op, s.domain, opset), len(s.inputs)) or s.slots
    params = []
    for slot, f in zip(sl, base.inputs):
        if f is not None and f.data and slot.type_param not in params:
            params.append(slot.type_param)
    for param in params:
        allowed = next(a for slot in sl if slot.type_param == param for a in [slot.allowed])
        names = [a[len("tensor(") : -1] for a in allowed if a.startswith("tensor(")]
        for name in TYPES:
            if name not in names:
                continue
            elem = TYPES[name]
            inputs: list[Feed | None] = [
                replace(f, elem=elem) if f is not None and slot.type_param == param else f
                for slot, f in zip(sl, base.inputs)
            ]
            if inputs == base.inputs:
                continue  # the seed's own type
            yield replace(base, inputs=inputs, detail=f"{param}={name}{suffix}")


def cases(depth: str) -> Iterator[Case]:
    """The ``dtype`` cases at ``depth``."""
    for s, opset, suffix in targets(depth):
        yield from emit(dtype_specs(s, opset, suffix), budget(depth, "dtype", suffix), s)
