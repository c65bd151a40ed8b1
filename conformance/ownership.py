"""The caller owns every output: checks shared by the cases and the contract.

onnxruntime hands back outputs the caller owns: writable arrays that share no
memory with each other, with the feeds, or with anything the session keeps.
Code written for it normalizes logits in place, reuses an output as the next
run's input buffer, or keeps results across runs, so a provider that breaks
this corrupts a user's data or its own next answer without any error.

* :func:`sharing` finds outputs that share memory with each other or with
  an input, and outputs that are read-only (onnxruntime's are writable; a
  read-only output is usually a view of something the provider keeps, and
  in-place code written for onnxruntime raises on it);
* :func:`poke` writes a sentinel into every output, so that running the same
  feeds again and comparing with the oracle shows a provider that kept an
  output buffer (a cached weight, a memoized result, a buffer returned every
  run): what it hands out next comes from memory the caller has written;
* :func:`with_identity_inputs` makes every graph input pass through an
  ``Identity`` whose result is also a graph output, so a kernel that writes
  into an input it did not get from the user corrupts an output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

__all__ = ["SUFFIX", "arrays", "poke", "sharing", "with_identity_inputs"]

SUFFIX = "__conformance_identity"
"""Suffix of the values :func:`with_identity_inputs` adds."""
_STRING = "conformance-sentinel"


def arrays(values: Any) -> Iterator[np.ndarray]:
    """The numpy arrays among ``values`` (a sequence output's elements too)."""
    if isinstance(values, np.ndarray):
        yield values
    elif isinstance(values, Mapping):
        for v in values.values():
            yield from arrays(v)
    elif isinstance(values, (list, tuple)):
        for v in values:
            yield from arrays(v)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    if a.size == 0 or b.size == 0 or not np.may_share_memory(a, b):
        return False
    return bool(
        np.shares_memory(a, b)
    )  # exact; the bounds overlap, so they are views of one buffer


def sharing(outputs: Sequence[Any], inputs: Mapping[str, Any]) -> str:
    """Why the caller does not own ``outputs`` (``""`` when it does): an output
    that shares memory with another output or with an input, or one that is
    read-only."""
    outs = [list(arrays(o)) for o in outputs]
    for i, group in enumerate(outs):
        for a in group:
            if a.size and not a.flags.writeable:
                return (
                    f"output {i} is a read-only array (onnxruntime returns writable arrays the "
                    "caller owns; a read-only output is usually a view of memory the "
                    "provider keeps)"
                )
            for j in range(i + 1, len(outs)):
                if any(_overlap(a, b) for b in outs[j]):
                    return (
                        f"outputs {i} and {j} share memory (one array returned for both, or "
                        "views of one buffer): writing into one changes the other"
                    )
            for name, value in inputs.items():
                if any(_overlap(a, b) for b in arrays(value)):
                    return (
                        f"output {i} shares memory with input {name!r}: writing into the "
                        "output changes the caller's input"
                    )
        for k, a in enumerate(group):  # a sequence's elements are outputs too
            if any(_overlap(a, b) for b in group[k + 1 :]):
                return f"elements {k} and later of output {i} share memory"
    return ""


def _fill(a: np.ndarray) -> None:
    """Write into every element of ``a`` a value that differs from the one there."""
    if a.dtype.kind in "OUS":
        a[...] = _STRING
        return
    one, three = np.array(1).astype(a.dtype), np.array(3).astype(a.dtype)
    a[...] = np.where(a == three, one, three)


def poke(outputs: Sequence[Any]) -> int:
    """Write a sentinel into every writable output array (as a caller reusing
    its outputs would); the number of arrays written."""
    written = 0
    for a in arrays(list(outputs)):
        if a.size and a.flags.writeable:
            try:
                _fill(a)
            except (TypeError, ValueError):
                continue  # a dtype numpy cannot assign these values to
            written += 1
    return written


def with_identity_inputs(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """``model`` with every tensor input ``x`` read through ``Identity(x)``, whose
    result (``x`` + :data:`SUFFIX`) is also a graph output, declared after the
    model's own. ``None`` when the model has no tensor input or subgraphs that
    may read the inputs."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    ins = [vi for vi in g.input if vi.name not in inits and vi.type.HasField("tensor_type")]
    if not ins or any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        for n in g.node
        for a in n.attribute
    ):
        return None
    rename = {vi.name: vi.name + SUFFIX for vi in ins}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    nodes = [
        helper.make_node("Identity", [vi.name], [rename[vi.name]], name=rename[vi.name])
        for vi in ins
    ]
    for n in model.graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(n)
        node.input[:] = [rename.get(x, x) for x in n.input]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    for vi in ins:
        extra = onnx.ValueInfoProto()
        extra.CopyFrom(vi)
        extra.name = rename[vi.name]
        graph.output.append(extra)
    return out
