"""Which cases of the conformance suite catch each provider of
``tests/conformance/faulty_unseen.py`` (one realistic bug each), grouped by
kind and dimension; the healthy counterparts must show none.

    python benchmarks/conformance_faults.py [--depth full|quick]
        [--kinds contract,node,generated,explore] [--provider ALIAS ...]
        [--all-ops] [--show N]

By default each provider runs only the cases of the ops its bug lives in
(and every contract check); ``--all-ops`` runs every case it claims.
Prints, per provider, its failing cases by group, then a table: provider,
bug class, caught or not, and the first case that catches it. Exit status 1
when a healthy provider fails a case or a faulty one is not caught.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conformance import faulty_unseen  # noqa: E402
from tests.conformance.unseen_runs import failures, group, op_pattern, run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the suite on each provider; print what catches it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", default="full", choices=("quick", "full"))
    ap.add_argument("--kinds", default="contract,node,generated,explore")
    ap.add_argument("--provider", action="append", default=[], help="alias (repeatable)")
    ap.add_argument("--all-ops", action="store_true", help="every case, not only the bug's ops")
    ap.add_argument("--show", type=int, default=5, help="case ids shown per group")
    args = ap.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    providers = [
        p for p in faulty_unseen.PROVIDERS if not args.provider or p.aliases[0] in args.provider
    ]
    rows: list[tuple[str, str, str, str]] = []
    bad = 0
    for cls in providers:
        alias, bug = cls.aliases[0], getattr(cls, "bug", "")
        ops = () if args.all_ops else getattr(cls, "ops", ())
        start = time.perf_counter()
        results = run(alias, kinds, op_pattern(ops), args.depth)
        failed = failures(results)
        seconds = time.perf_counter() - start
        print(
            f"\n== {alias} ({bug or 'healthy'}): {len(failed)} of {len(results)} cases fail, "
            f"{seconds:.1f} s"
        )
        for key, items in group(failed).items():
            print(f"  {key}: {len(items)}")
            for r in items[: args.show]:
                print(f"    {r.outcome:12} {r.id}: {(r.detail or '').splitlines()[0][:110]}")
        first = next(iter(sorted(failed)), "")
        if bug:
            rows.append((alias, bug, "yes" if failed else "NO", first))
            bad += not failed
        else:
            rows.append((alias, "healthy", "false alarm" if failed else "clean", first))
            bad += bool(failed)
    print("\n| provider | bug class | caught | first catching case |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
