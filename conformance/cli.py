"""``ortcore conformance``: run the suite against one provider and write the reports.

::

    ortcore conformance --provider NAME [--provider-option KEY=VALUE ...] [--report DIR]
                        [--waivers FILE] [-k PATTERN] [--jobs N] [--isolate] [--timeout S]
                        [--suites contract,operators,models]

Exit status: 0 when no case failed, 1 when some did (or a waived case passed),
2 when the provider, its options or the waivers file cannot be used.

``ortcore`` finds this subcommand through the ``conformance`` entry point of
group ``ortcore.cli``: this module's :data:`HELP`, :func:`add_arguments` and
:func:`run`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["HELP", "add_arguments", "main", "run"]

HELP = "run the conformance suite against a provider"
"""The line ``ortcore --help`` shows for this subcommand."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the suite's options to ``parser`` (used by ``ortcore conformance``)."""
    from ortcore.cli import provider_option

    parser.add_argument("--provider", required=True, help="provider name or alias, e.g. cpu")
    parser.add_argument(
        "--provider-option",
        dest="provider_options",
        action="append",
        default=[],
        type=provider_option,
        metavar="KEY=VALUE",
        help="an option of the provider under test (repeatable)",
    )
    parser.add_argument("--report", metavar="DIR", help="write report.json/.md/.html, junit.xml")
    parser.add_argument("--waivers", metavar="FILE", help="TOML file of waivers and tolerances")
    parser.add_argument("-k", dest="pattern", metavar="PATTERN", help="regex on case ids")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--isolate", action="store_true", help="run each case in a worker subprocess with a timeout"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case (--isolate)")
    parser.add_argument(
        "--suites", default="contract,operators,models", help="contract, operators, models"
    )
    parser.add_argument("--kinds", help="case kinds instead of --suites: contract,node,generated,…")
    parser.add_argument(
        "--depth",
        choices=("quick", "full"),
        default="full",
        help="how far the schema-driven exploration goes: quick (CI) or full (default)",
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE and register it as a plugin (a provider not installed)",
    )
    parser.add_argument(
        "--summary-md", metavar="FILE", help="write the Markdown summary (for the docs) to FILE"
    )
    parser.add_argument("--list", action="store_true", help="list the selected case ids and stop")
    parser.add_argument("--failures", action="store_true", help="print every failed case")
    parser.add_argument("--no-progress", action="store_true", help="never show the progress bar")


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


def run(ns: argparse.Namespace) -> int:
    """Run the suite as ``ns`` asks; print the summary; write the reports."""
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
        pattern=ns.pattern,
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
        print("\n".join(select(settings.kinds, settings.pattern)))
        return 0
    try:
        out = run_suite(settings)
    except (OrtcoreError, ProviderOptionError, ConfigError, RuntimeError) as exc:
        print(f"ortcore conformance: {exc}", file=sys.stderr)
        return 2
    report = build_report(out)
    if ns.failures:
        for r in out.results:
            if r.failed:
                print(f"{r.outcome:<16} {r.id}: {r.detail[:300]}")
    print("\n".join(_plain(summary_lines(report))))
    if ns.report:
        for path in write_reports(report, ns.report):
            print(f"wrote {path}")
    if ns.summary_md:
        Path(ns.summary_md).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.summary_md).write_text("\n".join(summary_lines(report)) + "\n", encoding="utf-8")
        print(f"wrote {ns.summary_md}")
    return 1 if any(r.failed for r in out.results) else 0


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
