"""Contract checks: what every provider must do, whatever ops it supports.

Each check has an id ``contract/<name>`` and returns an outcome and a detail.
Checks that need a node the provider claims run on every probe
(:mod:`conformance.probes`) it claims; a provider that claims none of them
gets ``unsupported`` for those checks.
"""

from __future__ import annotations

import gc
import threading
import time
import traceback
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .execute import Target, session_options
from .outcomes import (
    LOAD_ERROR,
    MISMATCH,
    PASSED,
    RUN_ERROR,
    UNSUPPORTED,
    WRONG_TYPE,
    CaseResult,
)
from .precision import Tolerance, compare_values
from .probes import Probe, probes

__all__ = ["CHECKS", "MEMORY_LIMIT", "run_check"]

MEMORY_LIMIT = 1 << 20
"""Bytes the traced heap may grow across the memory and close checks."""
MEMORY_RUNS = 300
THREADS = 4
THREAD_ITERATIONS = 8
UNKNOWN_OPTION = "conformance_no_such_option"
TOL = Tolerance(1e-4, 1e-5)

Verdict = tuple[str, str]


def _session(probe: Probe, target: Target) -> Any:
    import ortcore

    return ortcore.InferenceSession(probe.bytes, session_options(), providers=[target.provider])


_claimed: dict[str, list[Probe]] = {}


def claimed_probes(target: Target) -> list[Probe]:
    """The probes the provider takes alone (cached per provider)."""
    import ortcore

    if target.provider not in _claimed:
        found = []
        for p in probes():
            try:
                _session(p, target).close()
            except ortcore.OrtcoreError:
                continue
            found.append(p)
        _claimed[target.provider] = found
    return _claimed[target.provider]


def _each_probe(check: Callable[[Probe, Target], Verdict | None]) -> Callable[[Target], Verdict]:
    """Run ``check`` on every claimed probe; the first failure wins."""

    def run(target: Target) -> Verdict:
        claimed = claimed_probes(target)
        if not claimed:
            ops = ", ".join(p.op for p in probes())
            return UNSUPPORTED, f"the provider claims none of the probe ops ({ops})"
        for p in claimed:
            try:
                bad = check(p, target)
            except Exception as exc:
                return RUN_ERROR, f"{p.op}: {type(exc).__name__}: {exc}"
            if bad is not None:
                return bad[0], f"{p.op}: {bad[1]}"
        return PASSED, f"checked on {', '.join(p.op for p in claimed)}"

    return run


def check_loads(target: Target) -> Verdict:
    """The provider loads, can be created with default options and names its device."""
    from ep_sdk import Device, ExecutionProvider, SessionConfig
    from ortcore.plugins import default_manager

    entry = default_manager().resolve(target.provider)
    cls = entry.cls
    if cls is None or not issubclass(cls, ExecutionProvider):
        return LOAD_ERROR, f"{entry.plugin} offers no ExecutionProvider class"
    inst = cls({}, SessionConfig())
    try:
        if not isinstance(inst.device, Device):
            return LOAD_ERROR, f"device is {inst.device!r}, not an ep_sdk.Device"
        if inst.device.type != entry.device:
            return LOAD_ERROR, f"device {inst.device} differs from the class's {entry.device}"
        if not entry.version or entry.version == "0":
            return LOAD_ERROR, "the provider reports no version"
    finally:
        inst.close()
    return PASSED, f"device {inst.device}, version {entry.version}, plugin {entry.plugin}"


def _capability_graphs() -> list[bytes]:
    from onnx import helper

    extra = helper.make_node("NoSuchOp", ["y"], ["z"], domain="conformance.unknown")
    out = []
    for p in probes():
        g = p.model.graph
        graph = helper.make_graph(
            [*g.node, extra],
            "capability",
            list(g.input),
            [helper.make_tensor_value_info("z", 1, [d.dim_value for d in _out_dims(p)])],
        )
        model = helper.make_model(
            graph,
            opset_imports=[*p.model.opset_import, helper.make_opsetid("conformance.unknown", 1)],
        )
        out.append(model.SerializeToString())
    return out


def _out_dims(p: Probe) -> Any:
    return p.model.graph.output[0].type.tensor_type.shape.dim


def check_capability(target: Target) -> Verdict:
    """``get_capability`` answers a Capability whose claims and reasons are valid."""
    from ep_sdk import Capability, Claim, ExecutionProvider, GraphContext, SessionConfig
    from ortcore.model import load_model
    from ortcore.plugins import default_manager

    cls = default_manager().resolve(target.provider).cls
    assert cls is not None
    inst = cls({}, SessionConfig())
    compiles = type(inst).compile is not ExecutionProvider.compile
    try:
        for data in _capability_graphs():
            model = load_model(data)
            nodes = list(model.graph)
            cap = inst.get_capability(GraphContext(model.graph, nodes, dict(model.opset_imports)))
            if not isinstance(cap, Capability):
                return LOAD_ERROR, f"get_capability returned {type(cap).__name__}"
            taken: set[Any] = set()
            for claim in cap.claims:
                if not isinstance(claim, Claim) or not claim.nodes:
                    return LOAD_ERROR, f"invalid claim {claim!r}"
                for n in claim.nodes:
                    if n not in nodes:
                        return LOAD_ERROR, f"claimed a node not offered: {n!r}"
                    if n in taken:
                        return LOAD_ERROR, f"claimed {n.op_type} twice"
                    if n.domain == "conformance.unknown":
                        return LOAD_ERROR, "claimed an op of an unknown domain"
                    taken.add(n)
                if claim.fused and not compiles:
                    return LOAD_ERROR, "claims a fused group but does not implement compile()"
            for n, why in cap.declined.items():
                if n not in nodes or n in taken:
                    return LOAD_ERROR, f"declined a node it claims or was not offered: {n!r}"
                if not isinstance(why, str) or not why.strip():
                    return LOAD_ERROR, f"declined {n.op_type} without a reason"
            silent = [n.op_type for n in nodes if n not in taken and n not in cap.declined]
            if silent:
                return LOAD_ERROR, f"neither claims nor gives a reason for {silent}"
    finally:
        inst.close()
    return PASSED, ""


def _claimed_runs(p: Probe, target: Target) -> Verdict | None:
    sess = _session(p, target)
    try:
        placed = {r.provider for r in sess.get_partition().nodes}
        if placed != {target.provider}:
            return RUN_ERROR, f"nodes placed on {sorted(placed)}"
        feeds = p.feeds(0)
        try:
            got = sess.run(None, feeds)
        except Exception as exc:
            return RUN_ERROR, f"run raised {type(exc).__name__}: {exc}"
        verdict, detail, _ = compare_values(got[0], p.reference(feeds)[0], TOL)
        if verdict != "ok":
            return (MISMATCH if verdict == "mismatch" else WRONG_TYPE), detail
    finally:
        sess.close()
    return None


def _repeatable(p: Probe, target: Target) -> Verdict | None:
    sess = _session(p, target)
    feeds = p.feeds(1)
    first = sess.run(None, feeds)[0]
    for i in range(5):
        again = sess.run(None, feeds)[0]
        if not np.array_equal(first, again, equal_nan=True):
            return MISMATCH, f"run {i + 2} differs from run 1 with the same inputs"
    sess.close()
    return None


def _threads(p: Probe, target: Target) -> Verdict | None:
    sess = _session(p, target)
    inputs = [p.feeds(100 + t) for t in range(THREADS)]
    expected = [sess.run(None, f)[0] for f in inputs]
    barrier = threading.Barrier(THREADS)
    problems: list[Verdict] = []

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for _ in range(THREAD_ITERATIONS):
                got = sess.run(None, inputs[t])[0]
                verdict, detail, _ = compare_values(got, expected[t], TOL)
                if verdict != "ok":
                    problems.append((MISMATCH, f"thread {t}: {detail}"))
                    return
        except Exception as exc:
            problems.append((RUN_ERROR, f"thread {t} raised {type(exc).__name__}: {exc}"))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    sess.close()
    if problems:
        outcome, detail = problems[0]
        return outcome, f"concurrent runs from {THREADS} threads disagree; {detail}"
    return None


def _inputs_untouched(p: Probe, target: Target) -> Verdict | None:
    sess = _session(p, target)
    feeds = p.feeds(2)
    before = {k: v.copy() for k, v in feeds.items()}
    sess.run(None, feeds)
    sess.close()
    written = [k for k in feeds if not np.array_equal(feeds[k], before[k], equal_nan=True)]
    if written:
        return RUN_ERROR, f"the provider wrote into input buffer(s) {written}"
    return None


def _output_types(p: Probe, target: Target) -> Verdict | None:
    from onnx import helper

    sess = _session(p, target)
    feeds = p.feeds(3)
    got = sess.run(None, feeds)[0]
    sess.close()
    want = p.reference(feeds)[0]
    declared = helper.tensor_dtype_to_np_dtype(p.model.graph.output[0].type.tensor_type.elem_type)
    if not isinstance(got, np.ndarray):
        return WRONG_TYPE, f"output is a {type(got).__name__}, not a numpy array"
    if got.dtype != declared:
        return WRONG_TYPE, f"output dtype {got.dtype}, the model declares {declared}"
    if got.shape != want.shape:
        return WRONG_TYPE, f"output shape {got.shape}, expected {want.shape}"
    return None


def check_unknown_option(target: Target) -> Verdict:
    """An option the provider does not know is refused with an error naming it."""
    import ortcore

    probe = probes()[0]
    try:
        sess = ortcore.InferenceSession(
            probe.bytes,
            session_options(),
            providers=[(target.provider, {UNKNOWN_OPTION: "1"})],
        )
    except ortcore.NotImplementedOp:
        return LOAD_ERROR, f"option {UNKNOWN_OPTION!r} was accepted silently"
    except Exception as exc:
        if UNKNOWN_OPTION in str(exc):
            return PASSED, f"{type(exc).__name__}: {exc}"
        return LOAD_ERROR, f"refused, but the error does not name the option: {exc}"
    sess.close()
    return LOAD_ERROR, f"option {UNKNOWN_OPTION!r} was accepted silently"


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _memory(p: Probe, target: Target) -> Verdict | None:
    sess = _session(p, target)
    feeds = p.feeds(4)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for _ in range(20):
            sess.run(None, feeds)
        before = _traced()
        for _ in range(MEMORY_RUNS):
            sess.run(None, feeds)
        grown = _traced() - before
    finally:
        if started:
            tracemalloc.stop()
        sess.close()
    if grown > MEMORY_LIMIT:
        return RUN_ERROR, f"memory grew by {grown / 1e6:.1f} MB over {MEMORY_RUNS} runs"
    return None


def _close(p: Probe, target: Target) -> Verdict | None:
    feeds = p.feeds(5)
    warm = _session(p, target)
    warm.run(None, feeds)
    warm.close()
    del warm
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = _traced()
        sess = _session(p, target)
        for _ in range(3):
            sess.run(None, feeds)
        sess.close()
        ref = weakref.ref(sess)
        del sess
        grown = _traced() - before
    finally:
        if started:
            tracemalloc.stop()
    if ref() is not None:
        return RUN_ERROR, "the session is still referenced after close() and del"
    if grown > MEMORY_LIMIT:
        return RUN_ERROR, f"{grown / 1e6:.1f} MB still allocated after the session was closed"
    return None


CHECKS: dict[str, Callable[[Target], Verdict]] = {
    "loads": check_loads,
    "capability": check_capability,
    "claimed_runs": _each_probe(_claimed_runs),
    "repeatable": _each_probe(_repeatable),
    "threads": _each_probe(_threads),
    "inputs_untouched": _each_probe(_inputs_untouched),
    "output_types": _each_probe(_output_types),
    "unknown_option": check_unknown_option,
    "memory": _each_probe(_memory),
    "close": _each_probe(_close),
}
"""Every contract check, by name, in the order they run."""


def run_check(name: str, target: Target) -> CaseResult:
    """Run contract check ``name`` (id ``contract/<name>``)."""
    start = time.perf_counter()
    try:
        outcome, detail = CHECKS[name](target)
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)
        outcome, detail = RUN_ERROR, "".join(tb).strip()
    return CaseResult(
        f"contract/{name}", "contract", outcome, detail[:2000], time.perf_counter() - start
    )
