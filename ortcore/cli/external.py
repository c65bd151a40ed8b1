"""The subcommands other packages add: entry points of group ``ortcore.cli``
(:data:`SUBCOMMAND_GROUP`), and those of this project's other distributions
(:data:`ELSEWHERE`) listed even when not installed, saying what to install."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from typing import Any

from ._common import plain_text

__all__ = ["ELSEWHERE", "SUBCOMMAND_GROUP", "add_entry_points", "add_missing"]

SUBCOMMAND_GROUP = "ortcore.cli"
"""Entry-point group of the subcommands other packages add to ``ortcore``."""

ELSEWHERE = {
    "batch": (
        "ortcore-ray",
        "run a model over Parquet/.npy/.npz rows on Ray, resumably (pip install ortcore[ray])",
    ),
}
"""Subcommands other distributions of this project add: name -> (distribution,
help line). One whose distribution is not installed is still listed, and says
what to install."""

log = logging.getLogger("ortcore.cli")


def add_entry_points(sub: Any) -> None:
    """Add the subcommands of the :data:`SUBCOMMAND_GROUP` entry points, by name."""
    try:
        found = importlib.metadata.entry_points(group=SUBCOMMAND_GROUP)
    except Exception as exc:  # unreadable metadata: the built-in subcommands still work
        log.warning("ortcore: listing %s entry points failed: %s", SUBCOMMAND_GROUP, exc)
        return
    taken = set(sub.choices)
    for ep in sorted(found, key=lambda e: (e.name, e.value)):
        where = f"{ep.name} = {ep.value}"
        if ep.name in taken:
            log.warning("ortcore: subcommand %r (%s) left out: the name is taken", ep.name, where)
            continue
        taken.add(ep.name)
        try:
            command = ep.load()
            add_arguments, run = command.add_arguments, command.run
        except Exception as exc:
            log.warning("ortcore: subcommand %r (%s) failed to load: %r", ep.name, where, exc)
            continue
        doc = plain_text((getattr(command, "__doc__", None) or "").strip())
        help_line = getattr(command, "HELP", None) or (doc.splitlines()[0] if doc else None)
        p = sub.add_parser(
            ep.name,
            help=help_line,
            description=doc or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        try:
            add_arguments(p)
        except Exception as exc:
            log.warning("ortcore: subcommand %r (%s) failed to load: %r", ep.name, where, exc)
            run = _unusable(ep.name, where, exc)
        p.set_defaults(func=run)


def add_missing(sub: Any) -> None:
    """The :data:`ELSEWHERE` subcommands no entry point added: each says what to install."""
    for name, (dist, help_line) in ELSEWHERE.items():
        if name in sub.choices:
            continue
        p = sub.add_parser(
            name,
            help=help_line,
            description=f"ortcore {name} comes with {dist}, which is not installed: "
            f"pip install {dist} (from a clone of ortcore: pip install "
            f"./plugins/{dist.removeprefix('ortcore-')})",
        )
        p.add_argument("args", nargs=argparse.REMAINDER, help=f"the arguments {dist} takes")
        p.set_defaults(func=_not_installed(name, dist))


def _not_installed(name: str, dist: str) -> Any:
    """The ``func`` of a subcommand whose distribution is not installed."""

    def run(ns: argparse.Namespace) -> int:
        extra = dist.removeprefix("ortcore-")
        print(
            f"ortcore {name} needs {dist}, which is not installed: pip install {dist} (from a "
            f"clone of ortcore: pip install ./plugins/{extra}), or pip install 'ortcore[{extra}]'",
            file=sys.stderr,
        )
        return 2

    return run


def _unusable(name: str, where: str, exc: BaseException) -> Any:
    """The ``func`` of a subcommand whose arguments could not be added."""

    def run(ns: argparse.Namespace) -> int:
        print(f"ortcore {name}: the subcommand ({where}) failed to load: {exc!r}", file=sys.stderr)
        return 2

    return run
