"""``ortcore run``'s check, and what it does when the stored outputs cannot tell.

A model's stored reference outputs (``<model>_output_<i>.pb`` or
``test_data_set_0``) are the first evidence. When an output is *uniform*
(every element equal, as the 0.001 everywhere of onnx's ``light`` models,
whose weights are constants: 1000 equal logits through a softmax), matching
it says almost nothing: any implementation whose error keeps the logits
equal matches too. Then, and when nothing is stored, the check looks for
evidence that can discriminate and says what it found:

* **ortcore's CPU provider with optimizations off**: the same model, every
  node run by its own CPU kernel, no fusion or folding. Besides the final
  outputs, every intermediate value whose type shape inference knows is
  exposed and compared (a value computed wrongly shows there even when the
  end result does not), and the check says how many of those values vary
  (those that can tell a right answer from a wrong one). When the session
  under test is already that (``--providers cpu --no-optimize``), it would
  compare with itself: skipped, and said.
* **onnx.reference** (onnx's pure-numpy evaluator, independent of ortcore)
  on the final outputs, for small models only (:data:`REFERENCE_NODES`
  nodes, :data:`REFERENCE_WEIGHTS` weight elements): beyond that it takes
  minutes, and the check says it skipped it and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "REFERENCE_NODES",
    "REFERENCE_WEIGHTS",
    "Verdict",
    "compare",
    "is_uniform",
    "oracle_checks",
]

REFERENCE_NODES = 40
"""Largest model (nodes) the check runs through onnx.reference."""
REFERENCE_WEIGHTS = 1_000_000
"""Largest model (initializer elements) the check runs through onnx.reference."""


def is_uniform(a: np.ndarray) -> bool:
    """Whether ``a`` has more than one element and all of them are equal."""
    a = np.asarray(a)
    if a.size < 2 or a.dtype == object:
        return False
    flat = a.reshape(-1)
    return bool(np.all(flat == flat[0]))


@dataclass(frozen=True)
class Verdict:
    """One comparison: ``ok``, the largest absolute error, and a note."""

    ok: bool
    max_abs: float
    note: str = ""


def compare(got: Any, want: Any, rtol: float, atol: float) -> Verdict:
    """``got`` against ``want``: same shape, and close (strings: equal)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Verdict(False, float("inf"), f"shape {got.shape} != {want.shape}")
    if got.dtype == object or want.dtype == object:
        return Verdict(bool(np.array_equal(got, want)), 0.0)
    if got.size == 0:
        return Verdict(True, 0.0)
    g, w = got.astype(np.float64), want.astype(np.float64)
    err = float(np.nanmax(np.abs(g - w))) if np.isfinite(g).any() else 0.0
    ok = bool(np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True))
    return Verdict(ok, err)


def oracle_checks(
    model: Path,
    feeds: Mapping[str, np.ndarray],
    outputs: Sequence[np.ndarray],
    make_session: Callable[[bytes, bool], Any],
    same_as_cpu: bool,
    rtol: float,
    atol: float,
) -> tuple[bool, list[str]]:
    """The discriminating checks of the module docstring; whether every one
    that ran agreed, and a line for each (what ran, what it found, what was
    skipped and why).

    ``make_session(model_bytes, reference)`` makes a session of the given
    model: with ``reference``, on ortcore's CPU provider with optimizations
    off; without, as the session under test was made.
    """
    import onnx

    proto = onnx.load(str(model))
    lines: list[str] = []
    ok = True
    if same_as_cpu:
        lines.append(
            "check: the session is ortcore's CPU provider with optimizations off: "
            "comparing it with that would compare it with itself (skipped)"
        )
    else:
        try:
            good, said = _intermediates(proto, feeds, make_session, rtol, atol)
        except Exception as exc:  # no CPU provider, a model only the tested providers run
            good, said = (
                True,
                [
                    "check: comparing with ortcore's CPU provider with optimizations off "
                    f"failed: {type(exc).__name__}: {exc}"
                ],
            )
        ok &= good
        lines += said
    good, said = _reference(proto, feeds, outputs, rtol, atol)
    return ok and good, lines + said


def _intermediates(
    proto: Any,
    feeds: Mapping[str, np.ndarray],
    make_session: Callable[[bytes, bool], Any],
    rtol: float,
    atol: float,
) -> tuple[bool, list[str]]:
    """Every value shape inference types, exposed as an output of both sessions and compared."""
    import onnx

    exposed = onnx.ModelProto()
    exposed.CopyFrom(proto)
    try:
        inferred = onnx.shape_inference.infer_shapes(exposed)
    except Exception as exc:  # shape inference refused: the final outputs only
        inferred, why = exposed, f"shape inference failed ({type(exc).__name__})"
    else:
        why = ""
    have = {o.name for o in exposed.graph.output}
    typed = [
        vi
        for vi in inferred.graph.value_info
        if vi.name not in have and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type
    ]
    exposed.graph.output.extend(typed)
    data = exposed.SerializeToString()
    reference = make_session(data, True).run(None, dict(feeds))
    tested = make_session(data, False).run(None, dict(feeds))
    names = [o.name for o in exposed.graph.output]
    bad = []
    varying = 0
    for name, got, want in zip(names, tested, reference):
        verdict = compare(got, want, rtol, atol)
        varying += not is_uniform(np.asarray(want)) and np.asarray(want).size > 1
        if not verdict.ok:
            note = f", {verdict.note}" if verdict.note else ""
            bad.append(f"{name} (max abs error {verdict.max_abs:.3g}{note})")
    what = (
        f"{len(names)} values ({len(names) - len(typed)} output(s), {len(typed)} intermediate"
        f"{'; ' + why if why else ''}), {varying} of them not uniform"
    )
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return False, [
            f"check: MISMATCH against ortcore's CPU provider with optimizations off, on "
            f"{what}: {', '.join(bad[:3])}{more}"
        ]
    if not varying:
        return True, [
            f"check: OK against ortcore's CPU provider with optimizations off on {what}: "
            "no value varies, so this cannot discriminate either"
        ]
    return True, [
        f"check: OK against ortcore's CPU provider with optimizations off on {what} "
        f"(rtol {rtol}, atol {atol})"
    ]


def _reference(
    proto: Any,
    feeds: Mapping[str, np.ndarray],
    outputs: Sequence[np.ndarray],
    rtol: float,
    atol: float,
) -> tuple[bool, list[str]]:
    """The final outputs against onnx.reference, for small models."""
    nodes = len(proto.graph.node)
    weights = sum(int(np.prod(t.dims)) for t in proto.graph.initializer)
    if nodes > REFERENCE_NODES or weights > REFERENCE_WEIGHTS:
        return True, [
            f"check: onnx.reference skipped: {nodes} nodes, {weights} weight elements "
            f"(it runs only models of at most {REFERENCE_NODES} nodes and "
            f"{REFERENCE_WEIGHTS} weight elements: it is pure numpy, minutes on bigger ones)"
        ]
    import onnx.reference

    try:
        want = onnx.reference.ReferenceEvaluator(proto).run(None, dict(feeds))
    except Exception as exc:  # an op it lacks: no verdict, said
        return True, [f"check: onnx.reference could not run the model: {type(exc).__name__}: {exc}"]
    lines, ok = [], True
    for i, (got, ref) in enumerate(zip(outputs, want)):
        verdict = compare(got, ref, rtol, atol)
        ok &= verdict.ok
        uniform = " (its output is uniform too)" if is_uniform(np.asarray(ref)) else ""
        lines.append(
            f"check: output {i} {'OK' if verdict.ok else 'MISMATCH'} against onnx.reference "
            f"(max abs error {verdict.max_abs:.3g}){uniform}"
        )
    return ok, lines
