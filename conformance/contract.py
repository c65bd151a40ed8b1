"""Contract checks: what every provider must do, whatever ops it supports.

Each check has an id ``contract/<name>`` and returns an outcome and a detail.
Checks that need a node the provider claims run on every probe
(:mod:`conformance.probes`) it takes nodes of: alone when it takes the whole
probe, with the CPU provider after it when it takes part of a multi-node probe
(a compile-path provider's groups). A provider that claims none of them gets
``unsupported`` for those checks, and fails ``contract/claims`` unless it
claims nodes of some case. Outputs are compared with the default tolerance of
their dtype (:data:`conformance.precision.DTYPE_TOLERANCES`), like the cases'.
Provider options given to the run (``--provider-option``) apply to every
session and instance the checks create.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import traceback
import tracemalloc
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .contract_base import (
    Claimed,
    Verdict,
    claimed_probes,
    compare_outputs,
    each_probe,
    open_probe,
    probe_session,
)
from .contract_owned import CHECKS as OWNED_CHECKS
from .layout import LAYOUTS, relayout
from .outcomes import (
    LOAD_ERROR,
    MISMATCH,
    PASSED,
    RUN_ERROR,
    WRONG_TYPE,
    CaseResult,
)
from .probes import Probe, probes, with_constants, with_shared_inputs
from .target import Target, provider_instance, session_options

__all__ = ["CHECKS", "MEMORY_LIMIT", "Claimed", "claimed_probes", "run_check"]

MEMORY_LIMIT = 1 << 20
"""Bytes the traced heap may grow across the memory and close checks."""
MEMORY_RUNS = 300
THREADS = 4
THREAD_ITERATIONS = 12
THREAD_SECONDS = 0.25
"""Each thread of contract/threads runs at least THREAD_ITERATIONS times and
until THREAD_SECONDS have passed (at most 50 times as many runs), so a race
on a fast probe gets as many chances as one on a slow probe."""
RESOURCE_SESSIONS = 6
"""Sessions opened and closed by contract/resources; it fails when the
process's threads or open files grow by half as many or more."""
UNKNOWN_OPTION = "conformance_no_such_option"


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def check_loads(target: Target) -> Verdict:
    """The provider loads, can be created with the run's options and names its device."""
    from ep_sdk import Device, ExecutionProvider
    from ortcore.plugins import default_manager

    entry = default_manager().resolve(target.provider)
    cls = entry.cls
    if cls is None or not issubclass(cls, ExecutionProvider):
        return LOAD_ERROR, f"{entry.plugin} offers no ExecutionProvider class"
    inst = provider_instance(target)
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
    """Each probe with a node of an unknown domain reading its first output."""
    from onnx import helper

    out = []
    for p in probes():
        g = p.model.graph
        first = g.output[0]
        extra = helper.make_node("NoSuchOp", [first.name], ["z"], domain="conformance.unknown")
        z = helper.make_tensor_value_info("z", first.type.tensor_type.elem_type, None)
        graph = helper.make_graph(
            [*g.node, extra], "capability", list(g.input), [z, *g.output[1:]], list(g.initializer)
        )
        model = helper.make_model(
            graph,
            opset_imports=[*p.model.opset_import, helper.make_opsetid("conformance.unknown", 1)],
        )
        out.append(model.SerializeToString())
    return out


def check_capability(target: Target) -> Verdict:
    """``get_capability`` answers a Capability whose claims and reasons are valid."""
    from ep_sdk import Capability, Claim, ExecutionProvider, GraphContext
    from ortcore.model import load_model

    inst = provider_instance(target)
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


CASE_KINDS = ("simple", "pytorch-operator", "pytorch-converted", "node")
"""Case kinds :func:`check_claims` looks through, in this order, when no probe
is claimed: the small stored models first, onnx's node tests (slower to
collect) last; the generated and light cases use the same ops."""


def _first_claimed_case(target: Target) -> tuple[str, int]:
    """The id of the first case of :data:`CASE_KINDS` of whose model the
    provider claims a node (``""`` if none), and how many cases were asked."""
    from ep_sdk import GraphContext
    from ortcore.model import load_model

    from .cases import load_kind

    inst = provider_instance(target)
    asked = 0
    try:
        for kind in CASE_KINDS:
            for case in load_kind(kind):
                try:
                    model = load_model(case.materialize()[0].SerializeToString())
                except Exception:
                    continue  # a model the core refuses is no evidence either way
                asked += 1
                ctx = GraphContext(model.graph, list(model.graph), dict(model.opset_imports))
                try:
                    cap = inst.get_capability(ctx)
                except Exception:
                    continue  # contract/capability reports a get_capability that raises
                if getattr(cap, "claims", None):
                    return case.id, asked
    finally:
        inst.close()
    return "", asked


def check_claims(target: Target) -> Verdict:
    """The provider claims something: a node of a probe, or else of a case."""
    claimed = claimed_probes(target)
    everything = probes()
    if claimed:
        return PASSED, f"claims nodes of {len(claimed)} of the {len(everything)} probes"
    case_id, asked = _first_claimed_case(target)
    if case_id:
        return PASSED, (
            f"claims no node of the {len(everything)} probes, but claims nodes of {case_id}; "
            "the checks that run on probes are unsupported"
        )
    names = ", ".join(p.name for p in everything)
    return LOAD_ERROR, (
        f"the provider claims nothing: get_capability returned no claim for any node of "
        f"the {len(everything)} probes ({names}) nor of the {asked} operator and model "
        f"cases ({', '.join(CASE_KINDS)}), so nothing it runs can be tested. Claim the "
        "nodes the provider runs (Claim.node for kernels of its registry, Claim.group or "
        "ep_sdk.group_nodes for groups it compiles); check the op, domain, opset and "
        "types its kernels or predicate accept"
    )


def _claimed_runs(c: Claimed, target: Target) -> Verdict | None:
    sess = probe_session(c)
    try:
        placed = [r.provider for r in sess.get_partition().nodes]
        mine = placed.count(target.provider)
        if mine != c.taken or (len(c.providers) == 1 and mine != len(placed)):
            return RUN_ERROR, f"nodes placed on {sorted(set(placed))}"
        feeds = c.probe.feeds(0)
        try:
            got = sess.run(None, feeds)
        except Exception as exc:
            return RUN_ERROR, f"run raised {type(exc).__name__}: {exc}"
        return compare_outputs(got, c.probe.reference(feeds))
    finally:
        sess.close()


def _copies(values: Sequence[Any]) -> list[Any]:
    return [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values]


def _repeatable(c: Claimed, target: Target) -> Verdict | None:
    sess = probe_session(c)
    try:
        feeds = c.probe.feeds(1)
        first = _copies(sess.run(None, feeds))
        for i in range(5):
            if not _same(first, sess.run(None, feeds)):
                return MISMATCH, f"run {i + 2} differs from run 1 with the same inputs"
    finally:
        sess.close()
    return None


def _shares(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return any(
        isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and np.shares_memory(x, y)
        for x in a
        for y in b
    )


def _state(c: Claimed, target: Target) -> Verdict | None:
    """Runs with other inputs of the same shapes: each gets its own answer, and
    an output the caller kept does not change when the session runs again."""
    sess = probe_session(c)
    try:
        a, b = c.probe.feeds(10), c.probe.feeds(11)
        want_a, want_b = c.probe.reference(a), c.probe.reference(b)
        kept = sess.run(None, a)
        bad = compare_outputs(kept, want_a)
        if bad is not None:
            return bad
        second = sess.run(None, b)
        bad = compare_outputs(second, want_b)
        if bad is not None:
            return bad[0], (
                f"run 2, with other inputs of the same shapes, is wrong (state kept from "
                f"run 1, e.g. a weight or result cached by shape?): {bad[1]}"
            )
        bad = compare_outputs(kept, want_a)
        if bad is not None:
            reused = " (it returns the same buffer every run)" if _shares(kept, second) else ""
            changed = f"the output of run 1 changed when the session ran again{reused}"
            return bad[0], f"{changed}: {bad[1]}"
        bad = compare_outputs(sess.run(None, a), want_a)
        if bad is not None:
            return bad[0], f"run 3, with run 1's inputs again, is wrong: {bad[1]}"
    finally:
        sess.close()
    return None


def _constants(c: Claimed, target: Target) -> Verdict | None:
    """Two sessions of one probe whose weights differ only in value, run in turn."""
    import ortcore

    variants = [v for seed in (20, 21) if (v := with_constants(c.probe, seed)) is not None]
    if len(variants) < 2:
        return None
    sessions = []
    try:
        for v in variants:
            try:
                sessions.append(open_probe(v, c.providers))
            except ortcore.NotImplementedOp:
                return None  # taken only while its weights are inputs: nothing to compare
        feeds = variants[0].feeds(12)
        wants = [v.reference(feeds) for v in variants]
        for k, i in enumerate((0, 1, 0, 1)):
            bad = compare_outputs(sessions[i].run(None, feeds), wants[i])
            if bad is not None:
                return bad[0], (
                    f"session {i + 1} of two whose weights differ only in value is wrong "
                    f"at run {k + 1} (weights cached by shape across sessions?): {bad[1]}"
                )
    finally:
        for sess in sessions:
            sess.close()
    return None


def _intermediates(c: Claimed, target: Target) -> Verdict | None:
    """A single-node probe's op reading intermediates that another node reads
    too and that are graph outputs (see :func:`conformance.probes.with_shared_inputs`)."""
    import ortcore

    if c.probe.multi_node:
        return None  # the multi-node probes have such intermediates already
    shared = with_shared_inputs(c.probe)
    providers = (target.spec, target.cpu) if target.cpu else (target.spec,)
    try:
        sess = open_probe(shared, providers)
    except ortcore.NotImplementedOp:
        return None
    try:
        placed = [r.provider for r in sess.get_partition().nodes]
        if placed.count(target.provider) < 2:
            return None
        feeds = shared.feeds(6)
        bad = compare_outputs(sess.run(None, feeds), shared.reference(feeds))
    finally:
        sess.close()
    if bad is not None:
        names = ", ".join(o.name for o in shared.model.graph.output)
        return bad[0], (
            f"with its inputs made by another node, read by two nodes and also graph "
            f"outputs ({names}): {bad[1]} (a kernel writing into an input it did not get "
            "from the user?)"
        )
    return None


def _input_layouts(c: Claimed, target: Target) -> Verdict | None:
    """The probe's inputs fed as views that are not C-contiguous."""
    sess = probe_session(c)
    try:
        feeds = c.probe.feeds(7)
        want = c.probe.reference(feeds)
        for layout in LAYOUTS:
            views = {k: relayout(v, layout) for k, v in feeds.items()}
            try:
                got = sess.run(None, views)
            except Exception as exc:
                raised = f"run raised {type(exc).__name__}: {exc}"
                return RUN_ERROR, f"inputs as {layout} views: {raised}"
            bad = compare_outputs(got, want)
            if bad is not None:
                return bad[0], f"inputs as {layout} views (strides ignored?): {bad[1]}"
    finally:
        sess.close()
    return None


def _big(c: Claimed) -> tuple[Probe, Any]:
    """The big form of a claimed probe and a session of it (the small form when
    the provider does not take the big one)."""
    import ortcore

    big = next(p for p in probes(big=True) if p.name == c.probe.name)
    try:
        return big, open_probe(big, c.providers)
    except ortcore.NotImplementedOp:
        return c.probe, probe_session(c)


def _threads(c: Claimed, target: Target) -> Verdict | None:
    probe, sess = _big(c)
    try:
        inputs = [probe.feeds(100 + t) for t in range(THREADS)]
        expected = [probe.reference(f) for f in inputs]
        barrier = threading.Barrier(THREADS)
        problems: list[Verdict] = []

        def worker(t: int) -> None:
            try:
                barrier.wait()
                until = time.monotonic() + THREAD_SECONDS
                for i in range(50 * THREAD_ITERATIONS):
                    if i >= THREAD_ITERATIONS and time.monotonic() > until:
                        break
                    got = _copies(sess.run(None, inputs[t]))
                    bad = compare_outputs(got, expected[t], scaled=True)
                    if bad is not None:
                        problems.append((bad[0], f"thread {t}, run {i + 1}: {bad[1]}"))
                        return
            except Exception as exc:
                problems.append((RUN_ERROR, f"thread {t} raised {type(exc).__name__}: {exc}"))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sess.close()
    if problems:
        outcome, detail = problems[0]
        return outcome, (
            f"{THREADS} threads running one session concurrently (each its own inputs) "
            f"do not all get the oracle's answer; {detail}"
        )
    return None


def _inputs_untouched(c: Claimed, target: Target) -> Verdict | None:
    sess = probe_session(c)
    feeds = c.probe.feeds(2)
    before = {k: v.copy() for k, v in feeds.items()}
    sess.run(None, feeds)
    sess.close()
    written = [k for k in feeds if not np.array_equal(feeds[k], before[k], equal_nan=True)]
    if written:
        return RUN_ERROR, f"the provider wrote into input buffer(s) {written}"
    return None


def _output_types(c: Claimed, target: Target) -> Verdict | None:
    from onnx import helper

    sess = probe_session(c)
    feeds = c.probe.feeds(3)
    got = sess.run(None, feeds)
    sess.close()
    want = c.probe.reference(feeds)
    if len(got) != len(want):
        return WRONG_TYPE, f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w, vi) in enumerate(zip(got, want, c.probe.model.graph.output)):
        declared = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if not isinstance(g, np.ndarray):
            return WRONG_TYPE, f"output {i} is a {type(g).__name__}, not a numpy array"
        if g.dtype != declared:
            return WRONG_TYPE, f"output {i} dtype {g.dtype}, the model declares {declared}"
        if g.shape != w.shape:
            return WRONG_TYPE, f"output {i} shape {g.shape}, expected {w.shape}"
    return None


def check_unknown_option(target: Target) -> Verdict:
    """An option the provider does not know is refused with an error naming it."""
    import ortcore

    probe = probes()[0]
    options = {**dict(target.options), UNKNOWN_OPTION: "1"}
    try:
        sess = ortcore.InferenceSession(
            probe.bytes, session_options(), providers=[(target.provider, options)]
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


def _memory(c: Claimed, target: Target) -> Verdict | None:
    sess = probe_session(c)
    feeds = c.probe.feeds(4)
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


def _close(c: Claimed, target: Target) -> Verdict | None:
    feeds = c.probe.feeds(5)
    warm = probe_session(c)
    warm.run(None, feeds)
    warm.close()
    del warm
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = _traced()
        sess = probe_session(c)
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


def _threads_and_files() -> tuple[int, int]:
    """The process's threads (native ones too, on Linux) and open file descriptors."""
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        threads = threading.active_count()
    files = 0
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            files = len(os.listdir(folder))
            break
        except OSError:
            continue
    return threads, files


def _resources(c: Claimed, target: Target) -> Verdict | None:
    """Sessions opened, run and closed leave no thread running and no file open."""
    feeds = c.probe.feeds(8)

    def oneprobe_session() -> None:
        sess = probe_session(c)
        try:
            sess.run(None, feeds)
        finally:
            sess.close()

    oneprobe_session()  # what a provider makes once per process is made here
    gc.collect()
    threads0, files0 = _threads_and_files()
    for _ in range(RESOURCE_SESSIONS):
        oneprobe_session()
    limit = RESOURCE_SESSIONS // 2
    deadline = time.monotonic() + 2.0  # threads told to stop may take a moment
    while True:
        gc.collect()
        threads, files = _threads_and_files()
        grown_threads, grown_files = threads - threads0, files - files0
        if max(grown_threads, grown_files) < limit or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    what = f"after {RESOURCE_SESSIONS} sessions were opened, run and closed"
    if grown_threads >= limit:
        return RUN_ERROR, (
            f"{grown_threads} more threads are running {what} ({threads0} before): "
            "a thread started per session and not stopped by close()?"
        )
    if grown_files >= limit:
        return RUN_ERROR, (
            f"{grown_files} more files are open {what} ({files0} before): "
            "a file or handle opened per session and not closed by close()?"
        )
    return None


CHECKS: dict[str, Callable[[Target], Verdict]] = {
    "loads": check_loads,
    "capability": check_capability,
    "claims": check_claims,
    "claimed_runs": each_probe(_claimed_runs),
    "repeatable": each_probe(_repeatable),
    "state": each_probe(_state),
    "constants": each_probe(_constants),
    "overridable": OWNED_CHECKS["overridable"],
    "threads": each_probe(_threads),
    "inputs_untouched": each_probe(_inputs_untouched),
    "ownership": OWNED_CHECKS["ownership"],
    "intermediates": each_probe(_intermediates),
    "input_layouts": each_probe(_input_layouts),
    "output_types": each_probe(_output_types),
    "unknown_option": check_unknown_option,
    "memory": each_probe(_memory),
    "shape_memory": OWNED_CHECKS["shape_memory"],
    "close": each_probe(_close),
    "resources": each_probe(_resources),
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
