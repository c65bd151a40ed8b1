"""Overridable initializers: weights a feed may replace (IR version 4 and later).

An initializer that is also a graph input has a stored value, used when a run
does not feed it, and a run that feeds it must use the fed value. A provider
that reads the stored value at build time (a kernel packing
``const_value`` of a weight it takes for a constant, a fused group baking
its initializers into the engine) answers with the stored weights whatever
the caller feeds: :func:`overridable_case` and :func:`overridable_probe`
build the models that show it, with the runs to compare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["FLOATS", "OverridableRun", "make_overridable", "overridable_case"]

FLOATS = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
)
"""Element types of the inputs made overridable in operator cases: weights.
Integer inputs are often shapes, axes or indices, whose stored value shape
inference may read; a float weight changes values, never shapes."""
MIN_IR_VERSION = 4


@dataclass(frozen=True)
class OverridableRun:
    """One run of an overridable model and what it must give.

    Attributes:
        feeds: the values fed (some overridable initializers among them, or none).
        expected: the outputs.
        what: which values the run must use, for the failure's message.
    """

    feeds: dict[str, Any]
    expected: list[Any]
    what: str


def make_overridable(model: onnx.ModelProto, stored: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with the graph inputs named in ``stored`` given that stored
    value as an initializer (they stay graph inputs), at IR version 4 or later."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.ir_version = max(out.ir_version, MIN_IR_VERSION)
    existing = {t.name for t in out.graph.initializer}
    for name, value in stored.items():
        if name not in existing:
            out.graph.initializer.append(numpy_helper.from_array(value, name))
    return out


def _weights(model: onnx.ModelProto, values: Sequence[Any]) -> list[tuple[int, str]]:
    """(position, name) of the graph inputs after the first that are float tensors
    fed as arrays: the inputs made overridable."""
    inits = {t.name for t in model.graph.initializer}
    ins = [vi for vi in model.graph.input if vi.name not in inits]
    out = []
    for k, (vi, v) in enumerate(zip(ins, values)):
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if k and tt is not None and tt.elem_type in FLOATS and isinstance(v, np.ndarray):
            out.append((k, vi.name))
    return out


def _other(value: np.ndarray) -> np.ndarray:
    """A value of the same shape and dtype with (almost) every element changed."""
    wide = value.astype(np.float64)
    return np.asarray(np.where(wide == 0.5, -1.0, -1.5 * wide + 0.5)).astype(value.dtype)


def overridable_case(
    model: onnx.ModelProto, sets: Sequence[tuple[list[Any], list[Any]]]
) -> tuple[onnx.ModelProto, list[OverridableRun]] | None:
    """An operator case with its float inputs after the first made overridable
    initializers, and the runs that check it; ``None`` when it has no such input.

    With two data sets whose weights have the same shapes, the stored values are
    the second set's: run 1 feeds every input of set 1 (the fed values must
    win), run 2 only set 2's other inputs (the stored values must be used), run
    3 set 1 again (nothing of run 1 or 2 kept). With one data set, the stored
    values are the set's changed, and the one run feeds the set.
    """
    if not sets:
        return None
    ins1, outs1 = sets[0]
    weights = _weights(model, ins1)
    if not weights:
        return None
    inits = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    feeds1 = dict(zip(names, ins1))
    overridden = {name for _, name in weights}
    if len(sets) > 1:
        ins2, outs2 = sets[1]
        same = all(
            k < len(ins2)
            and isinstance(ins2[k], np.ndarray)
            and ins2[k].shape == ins1[k].shape
            and ins2[k].dtype == ins1[k].dtype
            for k, _ in weights
        )
        if same:
            stored = {name: np.array(ins2[k]) for k, name in weights}
            feeds2 = {n: v for n, v in zip(names, ins2) if n not in overridden}
            runs = [
                OverridableRun(feeds1, list(outs1), "the fed values (not the stored ones)"),
                OverridableRun(feeds2, list(outs2), "the stored values (none fed)"),
                OverridableRun(feeds1, list(outs1), "the fed values again"),
            ]
            return make_overridable(model, stored), runs
    stored = {name: _other(ins1[k]) for k, name in weights}
    run = OverridableRun(feeds1, list(outs1), "the fed values (not the stored ones)")
    return make_overridable(model, stored), [run]


def graph_input(name: str, value: np.ndarray) -> onnx.ValueInfoProto:
    """A graph input of ``value``'s type and shape."""
    elem = helper.np_dtype_to_tensor_dtype(value.dtype)
    return helper.make_tensor_value_info(name, elem, list(value.shape))
