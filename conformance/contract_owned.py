"""Contract checks of ownership, overridable initializers and memory across shapes.

Registered in :data:`conformance.contract.CHECKS`; each runs on every probe the
provider takes nodes of (:func:`conformance.contract.claimed_probes`):

* ``ownership``: the caller owns every output (:mod:`conformance.ownership`),
  on the probe, on its *twin* (each node making an output twice, on the
  same values: an engine that merges the two copies, or a kernel that
  memoizes by input, hands out one array twice), on its *echo* (each
  output given out again by an ``Identity``: an engine that folds the
  Identity into its input's buffer hands out one array twice), and on its *frozen*
  form (every input an initializer: a provider that computes the node once
  and hands out its kept result); after a sentinel is written into every
  output, the same inputs again give the oracle's answer;
* ``overridable``: the probe's weights as initializers that are also graph
  inputs, at the session's default optimization level: a run that feeds them
  gets the fed values' answer, a run that does not the stored values';
* ``shape_memory``: the probe with a symbolic dimension (:func:`dynamic`),
  right at two sizes, then run at the :data:`WARM_SHAPES` and
  :data:`COVER_SHAPES` sizes and at the :data:`FRESH_SHAPES` sizes never fed
  before: the last pass must not grow
  the traced heap or the process's resident memory beyond a bound (a cache
  keyed by shape that never forgets).
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .contract_base import Claimed, Verdict, compare_outputs, each_probe
from .outcomes import RUN_ERROR
from .overridable import graph_input
from .ownership import poke, sharing
from .probes import Probe, with_constants
from .target import Target, session_options

__all__ = [
    "CHECKS",
    "COVER_SHAPES",
    "FRESH_SHAPES",
    "RSS_LIMIT",
    "TRACED_LIMIT",
    "WARM_SHAPES",
    "dynamic",
    "frozen",
    "twin",
]

WARM_SHAPES = tuple(range(231, 103, -1))
"""Sizes of the varying dimension in the warm-up pass: 128 sizes, largest first."""
COVER_SHAPES = tuple(range(103, 8, -2))
"""Sizes of the second pass: 48 sizes below the warm-up's, largest first."""
FRESH_SHAPES = tuple(range(102, 7, -2))
"""Sizes of the measured pass: 48 sizes never fed before, each between two of
:data:`COVER_SHAPES`, largest first, from 8 (where a 3x3 kernel or a 2x2
pooling window fits).

Only caches that never forget grow over the measured pass: one bounded by
count (up to 128 entries, functools' default) is full after the warm-up and
then only trades its entries for ones of about the same size; one bounded by
size class (a caching allocator's power-of-two blocks) made its classes of
these sizes in the second pass. A cache keeping every size keeps 48 more
entries: the varying dimension summed over them is 2640, times the bytes of
a slice of each tensor it keeps."""
TRACED_LIMIT = 64 << 10
"""Bytes the traced heap may grow over the measured pass (the measured noise
is under 4 kB; a cache keeping a buffer of an elementwise probe per size
grows by 340 kB, one keeping a 1.4 kB plan per size by 67 kB)."""
RSS_LIMIT = 16 << 20
"""Bytes the resident memory may grow over the measured pass: memory no tracer
sees (a native engine compiled per shape is megabytes); the measured noise,
after the heap is trimmed, is under 1 MB."""


def _open(model: onnx.ModelProto, providers: Sequence[Any], optimize: bool = False) -> Any:
    import ortcore

    data = model.SerializeToString()
    return ortcore.InferenceSession(data, session_options(optimize=optimize), providers=providers)


def _placed(sess: Any, provider: str) -> int:
    return sum(1 for r in sess.get_partition().nodes if r.provider == provider)


def _probe_model(probe: Probe, graph: onnx.GraphProto, suffix: str) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=list(probe.model.opset_import))
    model.graph.name = f"{probe.model.graph.name}_{suffix}"
    return model


def _extended(probe: Probe, suffix: str, extra: list[onnx.NodeProto], copied: list[str]) -> Probe:
    """The probe with the ``extra`` nodes, and each graph output named in
    ``copied`` given out again as ``<name>_<suffix>`` (which an extra node makes)."""
    g = probe.model.graph
    outs = list(g.output)
    for o in g.output:
        if o.name in copied:
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(o)
            vi.name = f"{o.name}_{suffix}"
            outs.append(vi)
    nodes = [*g.node, *extra]
    graph = helper.make_graph(nodes, g.name, list(g.input), outs, list(g.initializer))
    return Probe(probe.name, _probe_model(probe, graph, suffix), probe.shapes, probe.positive)


def twin(probe: Probe) -> Probe:
    """The probe with every node that makes a graph output twice: the copy reads
    the same values and its result is an output too. Both copies lie in the
    group a fusing provider makes of the probe (they read its values), and a
    single-node probe's node runs twice on the same inputs."""
    finals = {o.name for o in probe.model.graph.output}
    copies: list[onnx.NodeProto] = []
    for n in probe.model.graph.node:
        if any(y in finals for y in n.output):
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            copy.name = f"{n.name}_twin"
            copy.output[:] = [f"{y}_twin" for y in n.output]
            copies.append(copy)
    made = [y for n in copies for y in n.output]
    return _extended(probe, "twin", copies, [o for o in finals if f"{o}_twin" in made])


def echo(probe: Probe) -> Probe:
    """The probe with every graph output also given out under a second name by
    an ``Identity`` (as exporters often write an output twice): an engine that
    folds the Identity into its input's buffer hands out one array twice."""
    names = [o.name for o in probe.model.graph.output]
    extra = [helper.make_node("Identity", [y], [f"{y}_echo"], f"{y}_echo") for y in names]
    return _extended(probe, "echo", extra, names)


def frozen(probe: Probe, seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The probe with every input an initializer (values drawn from ``seed``),
    and those values (the oracle's feeds)."""
    g = probe.model.graph
    values = probe.feeds(seed)
    inits = list(g.initializer) + [numpy_helper.from_array(v, k) for k, v in values.items()]
    graph = helper.make_graph(list(g.node), g.name, [], list(g.output), inits)
    return _probe_model(probe, graph, "frozen"), values


def _owned(sess: Any, feeds: dict[str, Any], want: list[Any], what: str) -> Verdict | None:
    got = sess.run(None, dict(feeds))
    bad = compare_outputs(got, want)
    if bad is not None:
        return bad[0], f"{what}: {bad[1]}"
    why = sharing(got, feeds)
    if why:
        return RUN_ERROR, f"{what}: {why}"
    poke(got)
    bad = compare_outputs(sess.run(None, dict(feeds)), want)
    if bad is not None:
        return bad[0], (
            f"{what}: run again after the caller wrote into the outputs it got, the same "
            "inputs give a wrong answer (the provider handed out memory it keeps and reads "
            f"again: a cached weight or result, a buffer returned every run): {bad[1]}"
        )
    return None


def _ownership(c: Claimed, target: Target) -> Verdict | None:
    import ortcore

    feeds = c.probe.feeds(40)
    want = c.probe.reference(feeds)
    doubled = twin(c.probe)
    twin_want = doubled.reference(feeds)
    echoed = echo(c.probe)
    forms: list[tuple[str, onnx.ModelProto, dict[str, Any], list[Any]]] = [
        # first: two outputs that are one array are named as such
        ("its nodes making outputs twice", doubled.model, feeds, twin_want),
        (
            "each output given out twice, by an Identity",
            echoed.model,
            feeds,
            echoed.reference(feeds),
        ),
        ("as it is", c.probe.model, feeds, want),
    ]
    model, values = frozen(c.probe, 41)
    forms.append(("every input an initializer", model, {}, c.probe.reference(values)))
    for what, m, f, want in forms:
        try:
            sess = _open(m, c.providers)
        except ortcore.NotImplementedOp:
            continue  # a form the provider does not take
        try:
            if not _placed(sess, target.provider):
                continue
            bad = _owned(sess, f, want, what)
        finally:
            sess.close()
        if bad is not None:
            return bad
    return None


def overridable_probe(probe: Probe) -> tuple[onnx.ModelProto, Probe, Probe] | None:
    """The probe's weights as overridable initializers: (the model, the probe
    with the stored weights, the probe with other weights of the same shapes
    (the values fed)); ``None`` without weights. Scalars stay constants."""
    stored, fed = with_constants(probe, 30), with_constants(probe, 31)
    if stored is None or fed is None:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(stored.model)
    model.ir_version = max(model.ir_version, 4)
    for t in stored.model.graph.initializer:
        value = numpy_helper.to_array(t)
        if value.size > 1:
            model.graph.input.append(graph_input(t.name, value))
    return model, stored, fed


def _overridable(c: Claimed, target: Target) -> Verdict | None:
    import ortcore

    made = overridable_probe(c.probe)
    if made is None:
        return None
    model, stored, fed = made
    inputs = {vi.name for vi in model.graph.input}
    weights = {
        t.name: numpy_helper.to_array(t) for t in fed.model.graph.initializer if t.name in inputs
    }
    try:
        sess = _open(model, c.providers, optimize=True)
    except ortcore.NotImplementedOp:
        return None
    try:
        if not _placed(sess, target.provider):
            return None
        x = stored.feeds(32)
        runs = [
            ({**x, **weights}, fed.reference(x), "feeds the weights: the fed values must win"),
            (x, stored.reference(x), "feeds none: the stored values must hold"),
            ({**x, **weights}, fed.reference(x), "feeds the weights again"),
        ]
        for k, (feeds, want, what) in enumerate(runs):
            try:
                got = sess.run(None, feeds)
            except Exception as exc:
                return RUN_ERROR, f"run {k + 1} ({what}) raised {type(exc).__name__}: {exc}"
            bad = compare_outputs(got, want)
            if bad is not None:
                names = ", ".join(sorted(weights))
                return bad[0], (
                    f"with its weights ({names}) initializers a feed may override, at the "
                    f"default optimization level, run {k + 1} {what}: {bad[1]}"
                )
    finally:
        sess.close()
    return None


def dynamic(probe: Probe) -> tuple[onnx.ModelProto, list[int], int] | None:
    """The probe with one dimension symbolic (``n``) on its first input and
    every input of the same shape, outputs of unknown shape: the last
    dimension where the oracle takes other sizes of it (cheaper: an image's
    width, not its batch), else the first. Returns the model, the inputs that
    vary and the axis; ``None`` when neither dimension may vary."""
    for axis in (-1, 0):
        model = onnx.ModelProto()
        model.CopyFrom(probe.model)
        g = model.graph
        varying = [k for k, s in enumerate(probe.shapes) if s == probe.shapes[0]]
        for k in varying:
            dim = g.input[k].type.tensor_type.shape.dim[axis]
            dim.Clear()
            dim.dim_param = "n"
        for o in g.output:
            o.type.tensor_type.ClearField("shape")
        try:
            for n in (FRESH_SHAPES[-1], FRESH_SHAPES[-1] + 3):
                outs = probe.reference(_feeds(probe, varying, axis, n))
                if not all(isinstance(o, np.ndarray) and o.size for o in outs):
                    raise ValueError("an output is empty at this size")
        except Exception:
            continue
        return model, varying, axis
    return None


def _feeds(probe: Probe, varying: list[int], axis: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n)
    out = {}
    for k, (vi, shape) in enumerate(zip(probe.model.graph.input, probe.shapes)):
        size = list(shape)
        if k in varying:
            size[axis] = n
        x = rng.uniform(-2.0, 2.0, size=size).astype(np.float32)
        out[vi.name] = np.abs(x) + np.float32(0.5) if probe.positive else x
    return out


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    except OSError:
        return 0


def _settled() -> tuple[int, int]:
    from ortcore.build_memory import trim_heap

    gc.collect()
    trim_heap()
    return tracemalloc.get_traced_memory()[0], _rss()


def _shape_memory(c: Claimed, target: Target) -> Verdict | None:
    import ortcore

    made = dynamic(c.probe)
    if made is None:
        return None
    model, varying, axis = made
    try:
        sess = _open(model, c.providers)
    except ortcore.NotImplementedOp:
        return None  # taken only with static shapes
    started = not tracemalloc.is_tracing()
    try:
        if not _placed(sess, target.provider):
            return None
        for n in (FRESH_SHAPES[-1], FRESH_SHAPES[-1] + 3):  # a plan for one size only
            feeds = _feeds(c.probe, varying, axis, n)
            bad = compare_outputs(sess.run(None, feeds), c.probe.reference(feeds))
            if bad is not None:
                return bad[0], f"with dimension {axis} symbolic, fed at size {n}: {bad[1]}"
        if started:
            tracemalloc.start()
        for n in (*WARM_SHAPES, *COVER_SHAPES):
            sess.run(None, _feeds(c.probe, varying, axis, n))
        traced0, rss0 = _settled()
        for n in FRESH_SHAPES:
            sess.run(None, _feeds(c.probe, varying, axis, n))
        traced1, rss1 = _settled()
    finally:
        if started and tracemalloc.is_tracing():
            tracemalloc.stop()
        sess.close()
    sizes = (
        f"{len(FRESH_SHAPES)} sizes of dimension {axis} never fed before (after "
        f"{len(WARM_SHAPES) + len(COVER_SHAPES)} other sizes, around and among them)"
    )
    if traced1 - traced0 > TRACED_LIMIT:
        return RUN_ERROR, (
            f"the traced heap grew by {(traced1 - traced0) / 1e6:.2f} MB over runs at {sizes}: "
            f"a cache keyed by shape that never forgets? (tolerated: {TRACED_LIMIT >> 10} KiB)"
        )
    if rss1 - rss0 > RSS_LIMIT:
        return RUN_ERROR, (
            f"the resident memory grew by {(rss1 - rss0) / 1e6:.1f} MB over runs at {sizes}: "
            f"a native cache keyed by shape that never forgets? (tolerated: "
            f"{RSS_LIMIT >> 20} MiB)"
        )
    return None


CHECKS = {
    "ownership": each_probe(_ownership),
    "overridable": each_probe(_overridable),
    "shape_memory": each_probe(_shape_memory),
}
"""The checks of this module, by name (registered in :data:`conformance.contract.CHECKS`)."""
