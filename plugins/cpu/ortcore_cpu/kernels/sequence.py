"""Sequence ops: SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert,
SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap.

A sequence value is a Python list of arrays; kernels never modify the list
they receive, they return a new one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, RunContext

from . import registry
from ._common import INDEX, int_list, normalize_axis, scalar
from ._versions import per_schema_version


def _position(seq: list[Any], position: Any, what: str, *, insert: bool = False) -> int:
    """Return ``position`` in ``[0, len]`` (insert) or ``[0, len)``, accepting negatives."""
    n = len(seq)
    p = int(scalar(position))
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        raise IndexError(f"{what}: position {p} out of range for a sequence of length {n}")
    return p + n if p < 0 else p


@registry.kernel("SequenceConstruct", since=11)
def sequence_construct(info: NodeInfo) -> Compute:
    """A sequence of the input tensors (all of one element type)."""
    return lambda *xs: ([*xs],)


@registry.kernel("SequenceEmpty", since=11)
def sequence_empty(info: NodeInfo) -> Compute:
    """An empty sequence (of element type ``dtype``, float by default)."""
    return lambda: ([],)


@registry.kernel("SequenceAt", since=11, types={"I": INDEX}, input_memory={1: "host"})
def sequence_at(info: NodeInfo) -> Compute:
    """The tensor at ``position`` (negative counts from the end)."""
    return lambda seq, pos: (seq[_position(seq, pos, info.describe())],)


@registry.kernel("SequenceInsert", since=11, types={"I": INDEX}, input_memory={2: "host"})
def sequence_insert(info: NodeInfo) -> Compute:
    """A copy of the sequence with the tensor inserted at ``position`` (default: the end)."""

    def compute(seq: list[Any], x: np.ndarray, pos: np.ndarray | None = None) -> tuple[list]:
        out = list(seq)
        if pos is None:
            out.append(x)
        else:
            out.insert(_position(seq, pos, info.describe(), insert=True), x)
        return (out,)

    return compute


@registry.kernel("SequenceErase", since=11, types={"I": INDEX}, input_memory={1: "host"})
def sequence_erase(info: NodeInfo) -> Compute:
    """A copy of the sequence without the tensor at ``position`` (default: the last)."""

    def compute(seq: list[Any], pos: np.ndarray | None = None) -> tuple[list]:
        out = list(seq)
        del out[-1 if pos is None else _position(seq, pos, info.describe())]
        return (out,)

    return compute


@registry.kernel("SequenceLength", since=11)
def sequence_length(info: NodeInfo) -> Compute:
    """The number of tensors in the sequence, as an int64 scalar."""
    return lambda seq: (np.array(len(seq), dtype=np.int64),)


@per_schema_version("SplitToSequence", types={"I": INDEX}, input_memory={1: "host"})
def split_to_sequence(info: NodeInfo) -> Compute:
    """Split along ``axis`` into a sequence: a scalar ``split`` gives chunks of
    that size (the last may be smaller), a 1-D one gives the sizes; without it
    the parts have size 1 and the axis is dropped unless ``keepdims``."""
    axis_attr = int(info.attrs.get("axis", 0))
    keepdims = bool(info.attrs.get("keepdims", 1))

    def compute(x: np.ndarray, split: np.ndarray | None = None) -> tuple[list]:
        axis = normalize_axis(axis_attr, x.ndim)
        dim = x.shape[axis]
        if split is None:
            parts = np.split(x, dim, axis=axis) if dim else []
            return ([p if keepdims else np.squeeze(p, axis=axis) for p in parts],)
        if np.ndim(split) == 0:
            chunk = int(split)
            if chunk <= 0:
                raise ValueError(f"{info.describe()}: split must be positive, got {chunk}")
            sizes = [min(chunk, dim - i * chunk) for i in range(math.ceil(dim / chunk))]
        else:
            sizes = int_list(split)
            if sum(sizes) != dim or min(sizes, default=0) < 0:
                raise ValueError(f"{info.describe()}: split {sizes} does not add up to {dim}")
        bounds = np.cumsum(sizes)[:-1]
        return (list(np.split(x, bounds, axis=axis)),)

    return compute


@registry.kernel("ConcatFromSequence", since=11)
def concat_from_sequence(info: NodeInfo) -> Compute:
    """Concatenate the sequence's tensors along ``axis``, or stack them along
    a new ``axis`` when ``new_axis=1``."""
    axis_attr = int(info.attrs["axis"])
    new_axis = bool(info.attrs.get("new_axis", 0))

    def compute(seq: list[np.ndarray]) -> tuple[np.ndarray]:
        if not seq:
            raise ValueError(f"{info.describe()}: the input sequence is empty")
        rank = seq[0].ndim + (1 if new_axis else 0)
        axis = normalize_axis(axis_attr, rank)
        if new_axis:
            return (np.stack(seq, axis=axis),)
        return (np.concatenate(seq, axis=axis),)

    return compute


@registry.kernel("SequenceMap", since=17, context=True)
def sequence_map(info: NodeInfo) -> Compute:
    """Run ``body`` once per element of the first input sequence; sequence
    inputs give their i-th element, tensor inputs are passed whole. Each body
    output becomes a sequence."""
    body = info.attrs["body"]
    n_impl = len(info.implicit_inputs)
    implicit = list(info.implicit_inputs)
    n_out = info.num_outputs

    def compute(ctx: RunContext, *args: Any) -> list[list[Any]]:
        explicit = args[: len(args) - n_impl]
        by_name = dict(zip(implicit, args[len(args) - n_impl :], strict=True))
        outer = [by_name[n] for n in body.outer_names]
        count = len(explicit[0])
        outs: list[list[Any]] = [[] for _ in range(n_out)]
        for i in range(count):
            ctx.check_terminated()
            feeds = [v[i] if isinstance(v, list) else v for v in explicit]
            for acc, value in zip(outs, body.run(ctx, feeds, outer), strict=True):
                acc.append(value)
        return outs

    return compute
