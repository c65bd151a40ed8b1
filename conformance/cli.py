"""Run the conformance suite against one execution provider and grade it.

The suite runs contract checks (what every provider must do), operator cases
(onnx's node tests, the suite's generated cases, cases explored from each
operator's schema) and model cases, compares every output with onnx's
reference, and prints a grade, pass rates and the failures grouped by op and
by the dimension a case explores. Progress shows on stderr: a bar on a
terminal, a plain line every 10 s elsewhere.

Examples:
  ortcore conformance --provider cpu
  ortcore conformance --provider cpu -k 'node/test_(add|relu)' --failures
  ortcore conformance --provider cpu --list -k '^generated/'
  ortcore conformance --provider cpu --repro out/ explore/Gemm/attribute/transA

Exit status: 0 when no case failed, 1 when a case failed or a waived case
passed, 2 when the provider, its options or the waivers file cannot be used.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["HELP", "add_arguments", "main", "run"]

HELP = "run the conformance suite against a provider"
"""The line ``ortcore --help`` shows for this subcommand."""

MAX_ROWS = 20
"""Ops the terminal's failure table shows (the reports show them all)."""
MAX_COLUMNS = 8
"""Dimensions the terminal's failure table shows; the rest are summed in ``other``."""


def _provider_option(text: str) -> tuple[str, str]:
    from ortcore.cli import provider_option  # imported here: --list and --help stay fast

    return provider_option(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the suite's options to ``parser`` (used by ``ortcore conformance``)."""
    parser.add_argument(
        "cases",
        nargs="*",
        metavar="CASE",
        help="case ids to run (exactly these, e.g. node/test_add); with -k, those that match it",
    )
    parser.add_argument(
        "--provider", required=True, help="provider under test: name or alias, e.g. cpu"
    )
    parser.add_argument(
        "--provider-option",
        dest="provider_options",
        action="append",
        default=[],
        type=_provider_option,
        metavar="KEY=VALUE",
        help="an option given to the provider under test in every session (repeatable)",
    )
    parser.add_argument(
        "-k",
        dest="pattern",
        metavar="PATTERN",
        help="run only the cases whose id matches this regular expression (searched)",
    )
    parser.add_argument(
        "--suites",
        default="contract,operators,models",
        help="whole suites to run, comma-separated: contract, operators, models (default: all)",
    )
    parser.add_argument(
        "--kinds",
        help="case kinds to run instead of --suites, comma-separated: contract, node, "
        "generated, explore, simple, pytorch-converted, pytorch-operator, light",
    )
    parser.add_argument(
        "--depth",
        choices=("quick", "full"),
        default="full",
        help="how many cases the schema-driven exploration (kind explore) makes: "
        "quick (a sample, for CI) or full (default)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the selected case ids and stop (runs nothing)"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="run the cases in N worker processes"
    )
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="run every case in a worker process, so a crash or a hang is the case's outcome",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds a case may take in a worker before it counts as a timeout (default 120)",
    )
    parser.add_argument(
        "--waivers", metavar="FILE", help="TOML file of waivers and per-case tolerances"
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE and register it as a plugin first (a provider not installed)",
    )
    parser.add_argument(
        "--failures",
        action="store_true",
        help="print every case that failed, with its reason and a one-line reproducer",
    )
    parser.add_argument(
        "--repro",
        metavar="DIR",
        help="write each failing selected case into DIR (model.onnx, its inputs and expected "
        "outputs) and print how to rerun it",
    )
    parser.add_argument(
        "--report", metavar="DIR", help="write report.json, report.md, report.html, junit.xml"
    )
    parser.add_argument(
        "--summary-md", metavar="FILE", help="write the Markdown headline (for the docs) to FILE"
    )
    parser.add_argument("--no-progress", action="store_true", help="print no progress on stderr")


def _kinds(ns: argparse.Namespace) -> tuple[str, ...]:
    from .cases import KINDS
    from .suite import SUITES

    if ns.kinds:
        kinds = tuple(k.strip() for k in ns.kinds.split(",") if k.strip())
        bad = [k for k in kinds if k not in ("contract", *KINDS)]
    else:
        names = [s.strip() for s in ns.suites.split(",") if s.strip()]
        bad = [s for s in names if s not in SUITES]
        kinds = tuple(k for s in names if s in SUITES for k in SUITES[s])
    if bad:
        raise SystemExit(f"ortcore conformance: unknown suite or kind {bad}")
    return kinds


def _pattern(pattern: str | None, cases: Sequence[str]) -> str | None:
    """-k and the case ids given as one regular expression."""
    if not cases:
        return pattern
    exact = "^(?:" + "|".join(re.escape(c) for c in cases) + ")$"
    return exact if not pattern else f"(?=.*?(?:{pattern})){exact}"


def run(ns: argparse.Namespace) -> int:
    """Run the suite as ``ns`` asks; print the summary; write the reports."""
    from .progress import Progress

    bar = Progress(enabled=False if ns.no_progress or ns.list else None)
    bar.status("loading the suite...")  # before onnx is imported: the first second shows
    from ortcore.errors import OrtcoreError, ProviderOptionError

    from .cases import set_depth
    from .report import write_reports
    from .report.markdown import summary_lines
    from .suite import Settings, load_plugins, run_suite, select
    from .summary import build_report
    from .waivers import ConfigError

    settings = Settings(
        provider=ns.provider,
        kinds=_kinds(ns),
        pattern=_pattern(ns.pattern, ns.cases),
        jobs=max(1, ns.jobs),
        isolate=ns.isolate,
        timeout=ns.timeout,
        config=ns.waivers,
        plugins=list(ns.plugin),
        progress=False if ns.no_progress else None,
        options=dict(ns.provider_options),
        depth=ns.depth,
    )
    if ns.list:
        load_plugins(settings.plugins)
        set_depth(settings.depth)
        print("\n".join(select(settings.kinds, settings.pattern, cached=True)))
        return 0
    try:
        out = run_suite(settings, progress=bar)
    except (OrtcoreError, ProviderOptionError, ConfigError, RuntimeError) as exc:
        print(f"ortcore conformance: {exc}", file=sys.stderr)
        return 2
    report = build_report(out)
    if ns.failures:
        for r in out.results:
            if r.failed:
                print(f"{r.outcome:<16} {r.id}: {r.detail[:300]}")
                if r.repro:
                    print(f"{'':<16} repro: {r.repro}")
    print("\n".join(_plain(summary_lines(report))))
    table = failure_table(report)
    if table:
        print("\n".join(["", *table]))
    if ns.repro:
        _write_repros(out, ns.repro)
    if ns.report:
        for path in write_reports(report, ns.report):
            print(f"wrote {path}")
    if ns.summary_md:
        Path(ns.summary_md).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.summary_md).write_text("\n".join(summary_lines(report)) + "\n", encoding="utf-8")
        print(f"wrote {ns.summary_md}")
    return 1 if any(r.failed for r in out.results) else 0


def _write_repros(out: Any, directory: str) -> None:
    """Write each failing (or waived) case of the run into ``directory``; say how to rerun it."""
    from .repro import snippet, write_case
    from .suite import case_of

    wanted = [r for r in out.results if r.failed or r.outcome == "waived"]
    written = 0
    for r in wanted:
        case = case_of(r.id)
        if case is None:
            print(
                f"{r.id}: a contract check; nothing to write (its probes are in conformance.probes)"
            )
            continue
        try:
            folder = write_case(case, directory, out.target.provider, out.target.options, r.repro)
        except Exception as exc:
            print(f"{r.id}: could not be written: {type(exc).__name__}: {exc}")
            continue
        written += 1
        print(f"\n{r.id} ({r.outcome}) -> {folder}")
        if r.repro:
            print(f"  {r.repro}")
        print("\n".join("  " + line for line in snippet(folder).splitlines()))
        print(f"  (or: python -m conformance.repro {folder})")
    if not wanted:
        print(f"\n--repro: no selected case failed; nothing written to {directory}")


def failure_table(report: dict[str, Any]) -> list[str]:
    """Failures by op and dimension, compact for a terminal (empty when none failed).

    One row per op (the :data:`MAX_ROWS` with most failures), one column per
    dimension (the :data:`MAX_COLUMNS` most frequent, the rest summed in
    ``other``), and the op's first failing case.
    """
    fb = report.get("failures_by") or {}
    ops: dict[str, dict[str, Any]] = fb.get("ops") or {}
    if not ops:
        return []
    dims = list(fb["dimensions"])
    shown, rest = dims[:MAX_COLUMNS], set(dims[MAX_COLUMNS:])
    columns = shown + (["other"] if rest else [])
    opw = min(24, max(4, *(len(op) for op in list(ops)[:MAX_ROWS])))
    widths = [max(len(c), 3) for c in columns]
    head = "op".ljust(opw) + "  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths))
    lines = ["Failures by op and dimension (--failures lists them all):", "  " + head + "  e.g."]
    for op, row in list(ops.items())[:MAX_ROWS]:
        counts = [row[d]["count"] if d in row else 0 for d in shown]
        if rest:
            counts.append(sum(c["count"] for d, c in row.items() if d in rest))
        first = max(row.values(), key=lambda c: c["count"])["example"]
        cells = "  ".join((str(n) if n else ".").rjust(w) for n, w in zip(counts, widths))
        lines.append(f"  {op[:opw].ljust(opw)}  {cells}  {first}")
    if len(ops) > MAX_ROWS:
        more = sum(c["count"] for row in list(ops.values())[MAX_ROWS:] for c in row.values())
        lines.append(f"  … {len(ops) - MAX_ROWS} more ops with {more} failures (see --report)")
    return lines


def _plain(markdown: list[str]) -> list[str]:
    """The Markdown summary made readable on a terminal."""
    out = []
    for line in markdown:
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            line = "  " + cells[0].ljust(40) + "  ".join(c.rjust(9) for c in cells[1:])
        out.append(line.replace("**", "").removeprefix("# "))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conformance``: the same as ``ortcore conformance``."""
    parser = argparse.ArgumentParser(
        prog="ortcore conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
