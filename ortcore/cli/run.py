"""``ortcore run``: run a model, time it, and check its outputs (against the
stored ones, and where those cannot discriminate, :mod:`ortcore.run_check`'s
oracles)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    _load_inputs,
    _session,
    _session_args,
    default_manager,
    model_args,
    resolve_model,
)

__all__ = ["add_parser", "cmd_run"]


def add_parser(sub: Any) -> None:
    """The ``run`` subcommand's arguments."""
    p = sub.add_parser("run", help="run a model, time it, check its stored outputs")
    model_args(p)
    p.add_argument("--repeat", type=int, default=10, help="timed runs after the first (default 10)")
    p.add_argument(
        "--rtol", type=float, default=1e-3, help="relative tolerance of the check (default 1e-3)"
    )
    p.add_argument(
        "--atol", type=float, default=1e-5, help="absolute tolerance of the check (default 1e-5)"
    )
    p.set_defaults(func=cmd_run)


def _reference_outputs(model: Path) -> list[np.ndarray] | None:
    """Stored outputs: ``<model>_output_<i>.pb`` beside it, or ``test_data_set_0``."""
    import onnx
    from onnx import numpy_helper

    stem = model.with_suffix("")
    files = sorted(model.parent.glob(f"{stem.name}_output_*.pb"))
    if not files:
        files = sorted((model.parent / "test_data_set_0").glob("output_*.pb"))
    if not files:
        return None
    return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


def cmd_run(ns: argparse.Namespace) -> int:
    """Run a model, time it and check it against its stored outputs."""
    model = resolve_model(ns.model)
    print("providers found:")
    for e in default_manager().entries():
        state = "available" if e.available else f"unavailable ({e.reason})"
        print(f"  {e.name:<28} {e.version:<8} {e.device:<6} {state}")
    print(f"model: {model}")
    t0 = time.perf_counter()
    sess = _session(ns, model)
    created = time.perf_counter() - t0
    print(f"session: providers {sess.get_providers()}, created in {created * 1000:.1f} ms")
    if not ns.providers:
        print("  (no --providers: the CPU provider only, as InferenceSession(model) does)")
    part = sess.get_partition()
    print("where nodes ran:")
    per = Counter((r.provider, r.op_type) for r in part.nodes)
    for provider, count in part.counts().items():
        ops = ", ".join(f"{op} x{n}" for (p, op), n in sorted(per.items()) if p == provider)
        print(f"  {provider}: {count} nodes ({ops})")
    if part.copies:
        print(f"  device copies inserted: {len(part.copies)}")
    _print_compiled(part.compiled)
    feeds = _load_inputs(model, sess.get_inputs())
    outputs = sess.run(None, feeds)
    times = []
    for _ in range(ns.repeat):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    if times:
        print(
            f"latency: median {statistics.median(times) * 1000:.2f} ms, "
            f"min {min(times) * 1000:.2f} ms over {len(times)} runs"
        )
    return 0 if _check(ns, model, sess, feeds, outputs) else 1


def _check(ns: argparse.Namespace, model: Path, sess: Any, feeds: Any, outputs: Any) -> bool:
    """``run``'s check: the stored outputs, and where they cannot discriminate
    (uniform) or are missing, the evidence :mod:`ortcore.run_check` finds."""
    from ..run_check import compare, is_uniform, oracle_checks

    expected = _reference_outputs(model)
    ok, weak = True, expected is None
    if expected is None:
        print("check: no stored reference outputs beside the model")
    for i, (got, want) in enumerate(zip(outputs, expected or ())):
        verdict = compare(got, want, ns.rtol, ns.atol)
        ok &= verdict.ok
        note = f", {verdict.note}" if verdict.note else ""
        print(
            f"check: output {i} {'OK' if verdict.ok else 'MISMATCH'} against the stored output "
            f"(max abs error {verdict.max_abs:.3g}, rtol {ns.rtol}, atol {ns.atol}{note})"
        )
        if is_uniform(want):
            weak = True
            value = np.asarray(want).reshape(-1)[0]
            print(
                f"check: the stored output {i} is uniform (all {value:.6g}): this check cannot "
                "tell a right answer from many wrong ones"
            )
    if not weak:
        return ok

    def make_session(data: bytes, reference: bool) -> Any:
        from ..options import GraphOptimizationLevel
        from ..session import InferenceSession

        so, providers = _session_args(ns)
        if reference:
            so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
            return InferenceSession(data, so, providers=["CPUExecutionProvider"])
        return InferenceSession(data, so, providers=providers)

    same = sess.get_providers() == ["CPUExecutionProvider"] and ns.no_optimize
    good, lines = oracle_checks(model, feeds, outputs, make_session, same, ns.rtol, ns.atol)
    for line in lines:
        print(line)
    return ok and good


def _print_compiled(compiled: Any) -> None:
    """Each compiled group and where it came from (cache hit, miss, saved session)."""
    if compiled:
        print("compiled groups:")
        for name, source in compiled.items():
            print(f"  {name}: {source}")
