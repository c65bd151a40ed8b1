"""Run one operator or model case against the provider under test.

Operator cases (``node``, ``generated``) are run with the provider alone: the
CPU fallback is off and graph optimizations are disabled, so every node is
run by the provider's own kernels; a node it declines makes the case
``unsupported`` with the provider's reason. Model cases list the CPU provider
after it and record how many nodes the provider under test took; a model of
which it took no node is ``unsupported`` too, never a pass on the CPU.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tempfile
import time
from typing import Any

import numpy as np
import onnx

from .cases import Case
from .groups import Grouped, case_nodes, claims_all, compiles, grouped_variants, placed_all
from .layout import relayout
from .outcomes import (
    FAILURES,
    LOAD_ERROR,
    MISMATCH,
    PASSED,
    RUN_ERROR,
    SKIPPED,
    UNSUPPORTED,
    WRONG_TYPE,
    CaseResult,
    CaseSkipped,
)
from .precision import (
    ErrorStats,
    compare_values,
    override_for,
    tolerance_for,
)
from .target import Target, provider_instance, session_options
from .variants import Run, check_identity_inputs, check_overridable, check_ownership

__all__ = ["Target", "run_case", "session_options"]  # Target, session_options: from .target

_DECLINED = re.compile(r"Providers asked: (.*?)\. Install or enable", re.S)


def describe_model(model: onnx.ModelProto) -> tuple[str, str, list[str]]:
    """(primary op, dtype of its first input, all op types) of a model."""
    nodes = model.graph.node
    ops = sorted({n.op_type for n in nodes})
    op = nodes[0].op_type if len(nodes) == 1 else ""
    dtype = ""
    if model.graph.input:
        elem = model.graph.input[0].type.tensor_type.elem_type
        if elem:
            dtype = onnx.TensorProto.DataType.Name(elem).lower()
    return op, dtype, ops


_STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})


def _extension_ops(model: onnx.ModelProto) -> list[str]:
    """The domains outside ONNX (``com.microsoft``) of the model's nodes."""
    return sorted({n.domain for n in model.graph.node} - _STANDARD_DOMAINS)


def declined_reason(message: str) -> str:
    """The providers' reasons, taken out of a ``NotImplementedOp`` message."""
    m = _DECLINED.search(message)
    head = message.split(". Providers asked")[0].removeprefix(
        "Could not find an implementation for "
    )
    return f"{head}: {m.group(1)}" if m else message


def _snapshot(feeds: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in feeds.items()}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.dtype.kind == "O":  # element by element: a NaN object is itself
            return a.shape == b.shape and all(x is y or x == y for x, y in zip(a.flat, b.flat))
        if a.dtype.kind in "US":
            return bool(np.array_equal(a, b))
        return a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or a == b


def _open(case: Case, model: onnx.ModelProto, target: Target, folder: str | None) -> Any:
    """A session of ``model``; a large case's model is saved in ``folder`` first."""
    import ortcore

    data: str | bytes
    if case.large and folder is not None:
        data = os.path.join(folder, "model.onnx")
        onnx.save_model(
            model, data, save_as_external_data=True, location="weights.bin", size_threshold=4096
        )
    else:
        data = model.SerializeToString()
    if case.mixed:
        providers = [target.spec] + ([target.cpu] if target.cpu else [])
        return ortcore.InferenceSession(data, session_options(optimize=True), providers=providers)
    return ortcore.InferenceSession(data, session_options(), providers=[target.spec])


def run_case(case: Case, target: Target) -> CaseResult:
    """Run every data set of ``case`` and classify the result."""
    import ortcore

    start = time.perf_counter()
    suite = "models" if case.mixed else "operators"
    result = CaseResult(case.id, suite, PASSED, dimension=case.dimension)
    with (
        tempfile.TemporaryDirectory(prefix="ortcore-conformance-")
        if case.large
        else (contextlib.nullcontext()) as folder
    ):
        model: onnx.ModelProto | None = None
        grouped: Grouped | None = None
        try:
            model, data_sets = case.materialize()
            result.op, result.dtype, result.ops = describe_model(model)
            sess = _open(case, model, target, folder)
        except CaseSkipped as exc:
            result.outcome, result.detail = SKIPPED, str(exc)
        except ortcore.NotImplementedOp as exc:
            result.outcome, result.detail = UNSUPPORTED, declined_reason(str(exc))
            if model is not None and _extension_ops(model):
                # onnxruntime's contrib ops are optional: a provider is graded
                # on those it claims, never marked down for the others.
                result.outcome = SKIPPED
                result.detail = (
                    f"optional {'/'.join(_extension_ops(model))} op not claimed by the "
                    f"provider (not graded): {result.detail}"
                )
            elif model is not None and not case.mixed and not case.large:
                grouped, sess = _as_group(model, target)
        except Exception as exc:
            result.outcome, result.detail = LOAD_ERROR, f"{type(exc).__name__}: {exc}"
        if result.outcome == PASSED or grouped is not None:
            if grouped is not None:  # declined alone, taken in a group: run that
                result.outcome, result.detail = PASSED, ""
                placed = [r.provider for r in sess.get_partition().nodes]
                result.nodes = {"total": len(placed), "provider": placed.count(target.provider)}
            try:
                _run_sets(case, target, sess, data_sets, result)
            finally:
                sess.close()
                del sess  # before the folder of a large model's weights goes
            if model is not None and result.outcome == PASSED and not case.mixed and not case.large:
                try:
                    _variants(case, model, data_sets, target, grouped, result)
                except Exception as exc:  # one case's result, never the whole run's end
                    result.outcome = RUN_ERROR
                    result.detail = (
                        f"its ownership/overridable variants: {type(exc).__name__}: {exc}"
                    )
            if grouped is not None:
                result.detail = f"ran {grouped.label}" + (
                    f": {result.detail}" * bool(result.detail)
                )
        if model is not None and result.outcome in FAILURES:
            from .repro import reproducer

            result.repro = reproducer(case, model, data_sets)
    result.seconds = time.perf_counter() - start
    return result


def _as_group(model: onnx.ModelProto, target: Target) -> tuple[Grouped | None, Any]:
    """The case with companion nodes (:mod:`conformance.groups`) that a
    compile-path provider takes every node of the case in, and its session
    (the CPU provider after it, for the companions); ``(None, None)`` if none."""
    import ortcore
    from ortcore.plugins import default_manager

    if not compiles(default_manager().resolve(target.provider).cls):
        return None, None
    inst = provider_instance(target)
    try:
        for grouped in grouped_variants(model):
            if not claims_all(inst, grouped):
                continue
            providers = [target.spec] + ([target.cpu] if target.cpu else [])
            try:
                sess = ortcore.InferenceSession(
                    grouped.model.SerializeToString(), session_options(), providers=providers
                )
            except Exception:
                continue  # a companion this runtime cannot load here: try the next
            if placed_all(sess.get_partition().nodes, target.provider, grouped):
                return grouped, sess
            sess.close()
    finally:
        inst.close()
    return None, None


def _variants(
    case: Case,
    model: onnx.ModelProto,
    data_sets: list[Any],
    target: Target,
    grouped: Grouped | None,
    result: CaseResult,
) -> None:
    """The case's ownership and overridable-initializer variants (:mod:`conformance.variants`),
    on its grouped model when it ran as a group."""
    override = override_for(case.id, target.overrides)

    def compare(g: Any, w: Any, label: str) -> tuple[str, str]:
        verdict, detail, _ = compare_values(g, w, case.tolerance, override, label)
        return verdict, detail

    named = grouped.model if grouped is not None else case_nodes(model)
    own = list(grouped.nodes) if grouped is not None else [n.name for n in named.graph.node]
    mixed = [target.spec] + ([target.cpu] if target.cpu else [])
    alone = mixed if grouped is not None else [target.spec]
    if data_sets:
        check_identity_inputs(named, own, data_sets[0], mixed, target.provider, compare, result)
    if result.outcome == PASSED:
        check_overridable(named, own, data_sets, alone, target.provider, compare, result)


def _run_sets(
    case: Case, target: Target, sess: Any, data_sets: list[Any], result: CaseResult
) -> None:
    if case.mixed:
        nodes = sess.get_partition().nodes
        taken = sum(1 for r in nodes if r.provider == target.provider)
        result.nodes = {"total": len(nodes), "provider": taken}
        if taken == 0 and nodes:
            result.outcome = UNSUPPORTED
            reasons = [r.declined[target.provider] for r in nodes if target.provider in r.declined]
            why = f"; e.g. {reasons[0]}" if reasons else ""
            result.detail = f"the provider took none of the {len(nodes)} nodes{why}"
            return
    names = [i.name for i in sess.get_inputs()]
    override = override_for(case.id, target.overrides)
    errors = ErrorStats()
    numeric = False
    kept: list[tuple[list[Any], list[Any]]] = []  # each set's outputs, as returned
    runs: list[Run] = []  # each set as it ran, for the ownership checks
    for ins, outs in data_sets:
        before = dict(zip(names, ins))
        feeds = _snapshot(before)  # the case's own arrays stay pristine
        if case.layout:
            feeds = {k: relayout(v, case.layout) for k, v in feeds.items()}
        try:
            got = sess.run(None, feeds)
        except Exception as exc:
            result.outcome, result.detail = RUN_ERROR, f"{type(exc).__name__}: {exc}"
            break
        written = [k for k in feeds if not _same(feeds[k], before[k])]
        if written and result.outcome == PASSED:
            result.outcome = RUN_ERROR
            result.detail = f"the provider wrote into input buffer(s) {written}"
        if len(got) != len(outs):
            result.outcome = WRONG_TYPE
            result.detail = f"{len(got)} outputs, expected {len(outs)}"
            break
        for i, (g, w) in enumerate(zip(got, outs)):
            verdict, detail, stats = compare_values(g, w, case.tolerance, override, f"output {i}")
            errors.merge(stats)
            if isinstance(w, np.ndarray) and w.dtype.kind not in "OUSb":
                numeric = True
                if result.tolerance is None:
                    t = tolerance_for(w.dtype, case.tolerance, override)
                    result.tolerance = {"rtol": t.rtol, "atol": t.atol}
                    result.output_dtype = w.dtype.name
            if verdict != "ok" and result.outcome == PASSED:
                result.outcome = MISMATCH if verdict == "mismatch" else WRONG_TYPE
                result.detail = detail[:2000]
        kept.append((list(got), outs))
        runs.append((before, feeds, list(got), outs))
    if result.outcome == PASSED and len(kept) > 1:
        _check_kept(case, override, kept, result)
    if result.outcome == PASSED:

        def compare(g: Any, w: Any, label: str) -> tuple[str, str]:
            verdict, detail, _ = compare_values(g, w, case.tolerance, override, label)
            return verdict, detail

        check_ownership(sess, runs, compare, result)
    if numeric:
        result.error = errors.to_dict()


def _check_kept(
    case: Case, override: Any, kept: list[tuple[list[Any], list[Any]]], result: CaseResult
) -> None:
    """Outputs the caller kept from an earlier data set must not change when the
    session runs again (a kernel that returns one buffer every run)."""
    for k, (got, outs) in enumerate(kept[:-1]):
        for i, (g, w) in enumerate(zip(got, outs)):
            verdict, detail, _ = compare_values(g, w, case.tolerance, override, f"output {i}")
            if verdict != "ok":
                result.outcome = MISMATCH
                result.detail = (
                    f"the outputs of data set {k + 1} changed when the session ran the next "
                    f"one (a buffer returned again?): {detail}"
                )[:2000]
                return
