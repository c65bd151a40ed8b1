"""What the contract checks share: the probes a provider takes nodes of
(:class:`Claimed`, :func:`claimed_probes`), running a check on each of them
(:func:`each_probe`), and comparing outputs with the oracle
(:func:`compare_outputs`). The checks themselves are in
:mod:`conformance.contract` and :mod:`conformance.contract_owned`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .outcomes import LOAD_ERROR, MISMATCH, PASSED, RUN_ERROR, UNSUPPORTED, WRONG_TYPE
from .precision import Tolerance, compare_values
from .probes import Probe, probes
from .target import Target, provider_instance, session_options

__all__ = [
    "Claimed",
    "Verdict",
    "claimed_probes",
    "compare_outputs",
    "each_probe",
    "open_probe",
    "probe_session",
]

Verdict = tuple[str, str]


def open_probe(probe: Probe, providers: Sequence[Any]) -> Any:
    import ortcore

    return ortcore.InferenceSession(probe.bytes, session_options(), providers=list(providers))


@dataclass(frozen=True)
class Claimed:
    """A probe the provider takes nodes of, and how the checks open it.

    Attributes:
        probe: the probe.
        providers: the sessions' provider list: the provider alone, or (for a
            multi-node probe it takes only part of) with the CPU provider after it.
        taken: how many of the probe's nodes the provider runs.
        error: why creating the session failed after the provider took nodes
            (every check that needs the probe then fails), or ``""``.
    """

    probe: Probe
    providers: tuple[Any, ...]
    taken: int
    error: str = ""

    @property
    def label(self) -> str:
        """The probe's name, with the share the provider took when partial."""
        total = len(self.probe.ops)
        if self.taken < total:
            return f"{self.probe.name} ({self.taken} of {total} nodes)"
        return self.probe.name


def probe_session(c: Claimed) -> Any:
    return open_probe(c.probe, c.providers)


def _claimed_nodes(p: Probe, target: Target) -> int:
    """How many of the probe's nodes ``get_capability`` claims (0 when it raises:
    ``contract/capability`` reports that)."""
    from ep_sdk import GraphContext
    from ortcore.model import load_model

    model = load_model(p.bytes)
    inst = provider_instance(target)
    try:
        cap = inst.get_capability(
            GraphContext(model.graph, list(model.graph), dict(model.opset_imports))
        )
        return len({n for claim in cap.claims for n in claim.nodes})
    except Exception:
        return 0
    finally:
        inst.close()


def _claim(p: Probe, target: Target) -> Claimed | None:
    """How the provider takes ``p``: alone, in part (the rest on CPU), or not at all.

    What the provider claims is asked of ``get_capability`` itself, so a
    session that fails to load (a kernel builder or ``compile`` raising,
    whatever the exception) is a failure of every check, never "not claimed".
    """
    import ortcore

    claimed = _claimed_nodes(p, target)
    if not claimed:
        return None
    alone = claimed >= len(p.ops) or not target.cpu
    providers: tuple[Any, ...] = (target.spec,) if alone else (target.spec, target.cpu)
    try:
        sess = open_probe(p, providers)
    except ortcore.NotImplementedOp as exc:
        if alone and p.multi_node and target.cpu:
            providers = (target.spec, target.cpu)  # claimed every node, yet declined some
            try:
                sess = open_probe(p, providers)
            except Exception as again:
                return Claimed(p, providers, claimed, f"{type(again).__name__}: {again}")
        else:
            return Claimed(p, providers, claimed, f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        return Claimed(p, providers, claimed, f"{type(exc).__name__}: {exc}")
    try:
        taken = sum(1 for r in sess.get_partition().nodes if r.provider == target.provider)
    finally:
        sess.close()
    if not taken:
        why = f"get_capability claims {claimed} of its {len(p.ops)} nodes, but the session "
        return Claimed(p, providers, claimed, why + "placed none on the provider")
    return Claimed(p, providers, taken)


_claimed: dict[Target, list[Claimed]] = {}


def claimed_probes(target: Target) -> list[Claimed]:
    """The probes the provider takes nodes of (cached per target)."""
    if target not in _claimed:
        _claimed[target] = [c for p in probes() if (c := _claim(p, target)) is not None]
    return _claimed[target]


def each_probe(check: Callable[[Claimed, Target], Verdict | None]) -> Callable[[Target], Verdict]:
    """Run ``check`` on every claimed probe; the first failure wins."""

    def run(target: Target) -> Verdict:
        claimed = claimed_probes(target)
        if not claimed:
            names = ", ".join(p.name for p in probes())
            return UNSUPPORTED, f"the provider claims no node of any probe ({names})"
        for c in claimed:
            if c.error:
                return LOAD_ERROR, f"{c.probe.name}: session creation failed: {c.error}"
            try:
                bad = check(c, target)
            except Exception as exc:
                return RUN_ERROR, f"{c.probe.name}: {type(exc).__name__}: {exc}"
            if bad is not None:
                return bad[0], f"{c.probe.name}: {bad[1]}"
        return PASSED, f"checked on {', '.join(c.label for c in claimed)}"

    return run


def compare_outputs(
    got: Sequence[Any], want: Sequence[Any], scaled: bool = False
) -> Verdict | None:
    """Every output against the oracle, with the dtype's default tolerance, or
    (``scaled``) with an absolute tolerance scaled to each output's largest
    value (the big probes' sums carry more rounding)."""
    if len(got) != len(want):
        return WRONG_TYPE, f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        tol = None
        if scaled:
            scale = float(np.max(np.abs(w))) if isinstance(w, np.ndarray) and w.size else 1.0
            tol = Tolerance(1e-4, 1e-5 * max(scale, 1.0))
        verdict, detail, _ = compare_values(g, w, None, tol, f"output {i}")
        if verdict != "ok":
            return (MISMATCH if verdict == "mismatch" else WRONG_TYPE), detail
    return None
