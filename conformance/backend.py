"""Quick runner of onnx's backend cases (kept for kernel authors' habits).

The full suite is ``ortcore conformance``; this command runs only the node
tests and stored models, with the same classification, and prints one line
per failure::

    python -m conformance.backend --provider cpu [-k REGEX] [--kinds node,simple] [--failures]

``-k`` is matched (``re.search``) against case names such as ``test_abs``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence

from .cases import MODEL_KINDS, Case, load_kind
from .execute import Target, run_case
from .outcomes import CaseResult

__all__ = ["KINDS", "iter_cases", "main", "run_case"]

KINDS = ("node", *MODEL_KINDS)


def iter_cases(kinds: Sequence[str] = KINDS, pattern: str | None = None) -> Iterator[Case]:
    """Every backend case of ``kinds`` whose name matches ``pattern``."""
    rx = re.compile(pattern) if pattern else None
    for kind in kinds:
        for case in load_kind(kind):
            if rx is None or rx.search(case.name):
                yield case


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run cases, print a summary and, optionally, failures."""
    parser = argparse.ArgumentParser(prog="python -m conformance.backend", description=__doc__)
    parser.add_argument("--provider", default="CPUExecutionProvider")
    parser.add_argument("-k", dest="pattern", help="regex on case names")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--failures", action="store_true", help="print each failure")
    args = parser.parse_args(argv)
    target = Target.resolve(args.provider)
    results: list[CaseResult] = [
        run_case(c, target) for c in iter_cases(args.kinds.split(","), args.pattern)
    ]
    if args.failures:
        for r in results:
            if r.outcome != "passed":
                print(f"{r.outcome:<12} {r.id}: {r.detail[:300]}")
    counts = Counter(r.outcome for r in results)
    passed = counts.get("passed", 0)
    print(", ".join(f"{k} {v}" for k, v in counts.most_common()))
    print(f"{passed}/{len(results)} passed ({100 * passed / max(len(results), 1):.2f}%)")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
