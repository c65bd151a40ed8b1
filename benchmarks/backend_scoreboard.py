"""Pass rate on onnx's backend cases: ortcore (CPU) next to onnxruntime and onnx.reference.

The same cases (node, simple, pytorch-converted, pytorch-operator, light;
Bernoulli excluded) and the same comparison (shape, dtype, values within the
case's tolerances) as ``conformance.backend``, run through three runtimes.

    python benchmarks/backend_scoreboard.py [--runtimes ortcore,onnxruntime,reference] [-k REGEX]
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from conformance.backend import KINDS, iter_cases
from conformance.cases import Case
from conformance.precision import compare_values

Runner = Callable[[Any, list[Any]], list[list[Any]]]


def _ortcore(model: Any, data_sets: list[Any]) -> list[list[Any]]:
    import ortcore

    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
    names = [i.name for i in sess.get_inputs()]
    return [sess.run(None, dict(zip(names, ins))) for ins, _ in data_sets]


def _onnxruntime(model: Any, data_sets: list[Any]) -> list[list[Any]]:
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.log_severity_level = 4
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in sess.get_inputs()]
    return [sess.run(None, dict(zip(names, ins))) for ins, _ in data_sets]


def _reference(model: Any, data_sets: list[Any]) -> list[list[Any]]:
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    return [list(ref.run(None, dict(zip(names, ins)))) for ins, _ in data_sets]


RUNNERS: dict[str, Runner] = {
    "ortcore": _ortcore,
    "onnxruntime": _onnxruntime,
    "reference": _reference,
}


def score(runner: Runner, cases: Sequence[Case]) -> Counter[str]:
    """Count passed / failed cases for one runtime."""
    counts: Counter[str] = Counter()
    for case in cases:
        try:
            model, data_sets = case.materialize()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results = runner(model, data_sets)
            for got, (_, want) in zip(results, data_sets, strict=True):
                if len(got) != len(want):
                    raise AssertionError("output count")
                for g, w in zip(got, want, strict=True):
                    verdict, detail, _ = compare_values(g, w, case.tolerance)
                    if verdict != "ok":
                        raise AssertionError(detail)
            counts["passed"] += 1
        except Exception:  # any failure of the runtime counts against it
            counts["failed"] += 1
    return counts


def main() -> None:
    """Print one line per runtime: passed / total and the rate."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtimes", default=",".join(RUNNERS))
    parser.add_argument("-k", dest="pattern")
    args = parser.parse_args()
    cases = list(iter_cases(KINDS, args.pattern))
    for name in args.runtimes.split(","):
        counts = score(RUNNERS[name], cases)
        total = sum(counts.values())
        print(
            f"{name:<12} {counts['passed']}/{total} passed "
            f"({100 * counts['passed'] / max(total, 1):.2f}%)",
            flush=True,
        )


if __name__ == "__main__":
    main()
