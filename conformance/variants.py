"""What every operator case checks besides its numbers (see :mod:`conformance.execute`).

After a case's data sets pass:

* **ownership** (:func:`check_ownership`, on the case's own session): the
  outputs share no memory with each other or an input and are writable;
  then a sentinel is written into every output and each data set is run
  again, which must still give the expected outputs (a provider handing out
  memory it keeps gives the sentinel back, or its cache is corrupted);
* **intermediate inputs** (:func:`check_identity_inputs`): the case with
  every input made by an ``Identity`` whose result is also a graph output
  (the CPU provider after the provider under test, for the Identity): every
  output, the Identity's included, is right;
* **overridable initializers** (:func:`check_overridable`): the case with its
  float inputs after the first made initializers that are also graph inputs
  (:mod:`conformance.overridable`), opened at the session's default
  optimization level: the fed values win, the stored ones hold when nothing
  is fed.

A variant the provider declines, or whose session it does not place the case's
nodes of, is skipped: the case is judged by what the provider takes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import onnx

from .outcomes import MISMATCH, PASSED, RUN_ERROR, WRONG_TYPE, CaseResult
from .overridable import overridable_case
from .ownership import SUFFIX, poke, sharing, with_identity_inputs
from .target import session_options

__all__ = ["Compare", "Run", "check_identity_inputs", "check_overridable", "check_ownership"]

Compare = Callable[[Any, Any, str], tuple[str, str]]
"""(got, expected, label) -> (verdict ``ok``/``mismatch``/other, detail)."""
Run = tuple[dict[str, Any], dict[str, Any], list[Any], list[Any]]
"""One data set as it ran: (inputs as made, feeds as fed, outputs got, expected)."""


def _fail(result: CaseResult, outcome: str, detail: str, dimension: str) -> None:
    result.outcome, result.detail = outcome, detail[:2000]
    result.dimension = dimension


def _verdict(
    got: Sequence[Any], want: Sequence[Any], compare: Compare, first: int = 0
) -> tuple[str, str]:
    if len(got) != len(want):
        return WRONG_TYPE, f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        verdict, detail = compare(g, w, f"output {i + first}")
        if verdict != "ok":
            return (MISMATCH if verdict == "mismatch" else WRONG_TYPE), detail
    return PASSED, ""


def _snapshot(feeds: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in feeds.items()}


def check_ownership(
    sess: Any,
    runs: Sequence[Run],
    compare: Compare,
    result: CaseResult,
) -> None:
    """The caller owns what every data set returned (see the module docstring)."""
    for k, (_, feeds, got, _) in enumerate(runs):
        why = sharing(got, feeds)
        if why:
            outcome = WRONG_TYPE if "read-only" in why else RUN_ERROR
            _fail(result, outcome, f"data set {k + 1}: {why}", "ownership")
            return
    if not poke([g for _, _, got, _ in runs for g in got]):
        return
    for k in reversed(range(len(runs))):  # the last first: what a cache holds now
        _, feeds, _, want = runs[k]
        try:  # the same arrays again, as a caller reusing its buffers would
            again = sess.run(None, feeds)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            _fail(result, RUN_ERROR, f"after the caller wrote into its outputs: {detail}", "")
            return
        outcome, detail = _verdict(again, want, compare)
        if outcome != PASSED:
            _fail(
                result,
                outcome,
                f"data set {k + 1} run again after the caller wrote into the outputs it "
                "got is wrong (the provider handed out memory it keeps and reads again: "
                f"a cached weight or result, a buffer returned every run): {detail}",
                "ownership",
            )
            return


def _open(model: onnx.ModelProto, providers: Sequence[Any], optimize: bool) -> Any:
    import ortcore

    data = model.SerializeToString()
    return ortcore.InferenceSession(data, session_options(optimize=optimize), providers=providers)


def _placed(sess: Any, provider: str, names: Sequence[str]) -> bool:
    where = {r.node: r.provider for r in sess.get_partition().nodes}
    return all(where.get(n) == provider for n in names)


def _session(
    model: onnx.ModelProto, providers: Sequence[Any], optimize: bool, provider: str, own: Any
) -> Any:
    """A session of a variant whose case nodes (named ``own``) all run on
    ``provider``, else ``None``."""
    try:
        sess = _open(model, providers, optimize)
    except Exception:
        return None  # declined, or a variant this runtime cannot load: not judged
    if _placed(sess, provider, own):
        return sess
    sess.close()
    return None


def check_identity_inputs(
    model: onnx.ModelProto,
    own: Sequence[str],
    first: tuple[list[Any], list[Any]],
    providers: Sequence[Any],
    provider: str,
    compare: Compare,
    result: CaseResult,
) -> None:
    """The case's inputs made by ``Identity`` nodes and also graph outputs
    (``model``'s nodes named, those of the case named in ``own``)."""
    variant = with_identity_inputs(model)
    if variant is None:
        return
    inits = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    ins, outs = first
    made = dict(zip(names, ins))
    tensors = [vi.name for vi in variant.graph.output[len(model.graph.output) :]]
    sess = _session(variant, providers, False, provider, own)
    if sess is None:
        return
    try:
        feeds = _snapshot(made)
        try:
            got = sess.run(None, feeds)
        except Exception as exc:
            _fail(result, RUN_ERROR, f"with its inputs made by Identity nodes: {exc}", "ownership")
            return
        want = [*outs, *(made[n.removesuffix(SUFFIX)] for n in tensors)]
        outcome, detail = _verdict(got, want, compare)
        why = "" if outcome != PASSED else sharing(got, feeds)
        if outcome != PASSED or why:
            _fail(
                result,
                outcome if outcome != PASSED else RUN_ERROR,
                "with each input made by an Identity node whose result is also a graph "
                f"output (outputs {len(outs)} and later): {detail or why} (a kernel writing "
                "into an input it did not get from the user?)",
                "ownership",
            )
    finally:
        sess.close()


def check_overridable(
    model: onnx.ModelProto,
    own: Sequence[str],
    sets: Sequence[tuple[list[Any], list[Any]]],
    providers: Sequence[Any],
    provider: str,
    compare: Compare,
    result: CaseResult,
) -> None:
    """The case's float inputs after the first as overridable initializers
    (``model``'s nodes named, those of the case named in ``own``)."""
    made = overridable_case(model, sets)
    if made is None:
        return
    variant, runs = made
    sess = _session(variant, providers, True, provider, own)
    if sess is None:
        return
    stored = ", ".join(t.name for t in variant.graph.initializer[len(model.graph.initializer) :])
    try:
        for k, r in enumerate(runs):
            try:
                got = sess.run(None, _snapshot(r.feeds))
            except Exception as exc:
                outcome, detail = RUN_ERROR, f"{type(exc).__name__}: {exc}"
            else:
                outcome, detail = _verdict(got, r.expected, compare)
            if outcome != PASSED:
                _fail(
                    result,
                    outcome,
                    f"with inputs {stored} made initializers a feed may override (at the "
                    f"default optimization level), run {k + 1} must use {r.what}: {detail}",
                    "overridable",
                )
                return
    finally:
        sess.close()
